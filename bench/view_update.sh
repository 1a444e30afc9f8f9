#!/usr/bin/env bash
# The cost of keeping OUT.h5 current as the journal grows (issue "the file as the product",
# Live): for journals of 10 MB, 100 MB and 1 GB, the time to bring the view up to date
# after one more finished run, and rank 0's ingest rate while that build runs on the view
# thread. See bench/view_update.c for what is measured; results in docs/benchmarks.md.
#
#   bench/view_update.sh [--sizes "10 100 1000"] [--build DIR] [--out DIR]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZES="10 100 1000" BUILD="$REPO/build" OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --sizes) SIZES="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -n "$OUT" ]; then mkdir -p "$OUT"; WORK="$(realpath "$OUT")"; else WORK="$(mktemp -d /tmp/view_update.XXXXXX)"; trap 'rm -rf "$WORK"' EXIT; fi
BIN="$BUILD/bench-view/view_update"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/view_update.c" "$BIN"
echo "view_update: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$BIN" "$WORK" $SIZES
