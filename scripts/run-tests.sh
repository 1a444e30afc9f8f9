#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the dependencies, builds Release and runs
# every test, then builds with ASan+UBSan (build type Sanitize) and runs the C unit tests.
# Usage: scripts/run-tests.sh [extra ctest args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)

bash scripts/install-deps.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure --timeout 900 "$@")

cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Sanitize
cmake --build build-sanitize -j"$jobs"
# OpenBLAS' and Open MPI's own allocations are not ours to police: leaks are checked in
# the unit tests only, which load neither MPI nor run threads.
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure --timeout 900 -L unit "$@")
