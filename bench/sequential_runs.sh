#!/usr/bin/env bash
# The runs the sequential rule saves against a fixed design with the same
# family-wise error and power, at study B's effects and spreads; and the rule's error under
# skewed differences. See bench/sequential_runs.c and docs/benchmarks.md. Simulation only:
# a few seconds per 10,000 studies.
#
#   bench/sequential_runs.sh [--studies 20000] [--build DIR]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STUDIES=20000 BUILD="$REPO/build"
while [ $# -gt 0 ]; do
    case "$1" in
    --studies) STUDIES="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
BIN="$BUILD/bench-sequential/sequential_runs"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/sequential_runs.c" "$BIN"
"$BIN" "$STUDIES"
