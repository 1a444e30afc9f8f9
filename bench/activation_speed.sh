#!/usr/bin/env bash
# The MLP activations timed alone, forward and backward, at an MLP's shape (study
# A's claim "Tanh is the slowest"): builds bench/activation_speed.c against ablate's static
# libraries (bench/build_c_bench.sh; BUILD=dir for another build) and runs it. Best-of-R
# timings, interleaved: a load that comes and goes hits every activation alike.
#
#   bench/activation_speed.sh [--tokens 256] [--hidden 512] [--layers 4] [--reps 200]
#   (study A's book GPT: batch 2 x 128 tokens, MLP 4 x 128 = 512, 4 layers: the defaults)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO/bench/common.sh" # bench_c_program
bench_c_program activation_speed "$@"
