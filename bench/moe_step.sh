#!/usr/bin/env bash
# A mixture-of-experts step against the dense step on the book preset: see
# bench/moe_step.c for what is measured; target: E=8, k=1 costs at most 1.3x the dense step.
# Run it on a quiet machine (one core per process; nothing else running).
#
#   bench/moe_step.sh [--reps N] [--build DIR] [--micro] [E K ...]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS=10 BUILD="$REPO/build" PRESET=book
while [ $# -gt 0 ]; do
    case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --micro) PRESET=micro; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
BIN="$BUILD/bench-moe/moe_step"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/moe_step.c" "$BIN"
echo "moe_step: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" "$PRESET" "$REPS" "$@"
