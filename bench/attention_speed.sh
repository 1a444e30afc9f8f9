#!/usr/bin/env bash
# The attention timed alone, forward and backward, per head count and batch (study A at a
# fixed time: why heads 1 / 4 / 8 process different tokens/s): builds bench/attention_speed.c
# against ablate's static libraries (bench/build_c_bench.sh; BUILD=dir for another build) and
# runs it. Best-of-R timings in CPU time, interleaved: a load that comes and goes hits every
# shape alike. Each run prints every configuration's time per useful FLOP against the run's
# best configuration (a ratio measured in the same run) and checks the worst against the
# target (1.5: the engine must not decide a comparison at fixed time).
#
#   bench/attention_speed.sh                       # the shapes below, one run each
#   bench/attention_speed.sh [--width 128] [--context 128] [--layers 4] [--batches 2,8]
#                            [--heads 1,4,8] [--reps 20] [--target 1.5]    # one run
#
# The shapes without options: study A's book GPT (width 128, context 128, 4 layers, batch 2)
# at heads 1 / 2 / 4 / 8; the micro preset (width 32, context 16, 2 layers) at batches 1, 2
# and 32 (study B's) and heads 1 / 2 / 4 / 8; study B's wider variants (width 64, context 32).
# Exit status 0 whether or not a target is met: the ATTENTION_TARGET lines say.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO/bench/common.sh" # bench_c_program
if [ $# -gt 0 ]; then
    bench_c_program attention_speed "$@"
    exit 0
fi
bench_c_program attention_speed --width 128 --context 128 --layers 4 --batches 2 --heads 1,2,4,8
bench_c_program attention_speed --width 32 --context 16 --layers 2 --batches 1,2,32 \
    --heads 1,2,4,8 --reps 200
bench_c_program attention_speed --width 64 --context 32 --layers 2 --batches 1,2,32 \
    --heads 1,2,4,8 --reps 100
