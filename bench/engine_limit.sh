#!/usr/bin/env bash
# The engine against its shape limit, per preset: builds bench/engine_limit.c
# against ablate's static libraries and runs it. See docs/benchmarks.md.
#
#   bench/engine_limit.sh [options]            (options go to engine_limit)
#     --preset micro,book      presets [micro,book]
#     --threads 1,2            BLAS thread counts, each timed on the same model [1]
#     --micro-steps S          timed micro steps [200];  --book-steps S  timed book steps [10]
#     --warmup W               untimed steps first [2];  --reps R  repetitions of each timing [3]
#     --json                   also one JSON line per preset
#   Environment: BUILD (build directory, default build-bench/, configured Release if new).
#
# OPENBLAS_CORETYPE is never set here: the program picks its core as ablate does (the
# environment's value when set) and prints it. Run it on a quiet machine: the figures are
# times; OpenBLAS thread counts above the free cores measure the contention.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD:-$REPO/build-bench}"
BIN="$BUILD/bench-engine/engine_limit"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/engine_limit.c" "$BIN" "$REPO/bench/gemm_timing.c"
echo "engine_limit: $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
exec env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS "$BIN" --shapes-dir "$REPO/bench/shapes" "$@"
