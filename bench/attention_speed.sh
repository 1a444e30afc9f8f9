#!/usr/bin/env bash
# The attention timed alone, forward and backward, per head count and batch (study
# A at a fixed time: why heads 1 / 4 / 8 process different tokens/s): builds
# bench/attention_speed.c against ablate's static libraries (bench/build_c_bench.sh;
# BUILD=dir for another build) and runs it. Best-of-R timings in CPU time, interleaved: a
# load that comes and goes hits every shape alike.
#
#   bench/attention_speed.sh [--width 128] [--context 128] [--layers 4] [--batches 2,8]
#                            [--heads 1,4,8] [--reps 20]
#   (study A's book GPT: width 128, context 128, 4 layers, batch 2: the defaults)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO/bench/common.sh" # bench_c_program
bench_c_program attention_speed "$@"
