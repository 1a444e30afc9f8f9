#!/usr/bin/env bash
# Compiles a C benchmark of bench/ against ablate's static libraries in a build directory
# (configured as Release if it is not yet, and brought up to date first), with mpicc, as
# bench/view_update.sh and bench/join_claims.sh need it; the top-level CMakeLists.txt is
# not involved.
#
#   bench/build_c_bench.sh BUILD_DIR SOURCE.c BINARY [MORE.c ...]   (more sources of the program)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$1" SRC="$2" BIN="$3"
shift 3
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target ablate_orch >/dev/null
mkdir -p "$(dirname "$BIN")"
# shellcheck disable=SC2046
mpicc -std=c11 -O2 -g -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$REPO/src" \
    -o "$BIN" "$SRC" "$@" \
    "$BUILD/libablate_orch.a" "$BUILD/libablate_worker.a" "$BUILD/libablate_model.a" \
    $(pkg-config --libs hdf5-serial yaml-0.1) -lopenblas -lm -lpthread
