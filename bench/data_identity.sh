#!/usr/bin/env bash
# The data identity check on a large token file: the time of a load with
# the digest cached, of the check alone, and of the uncached hash; the check's target is
# <= 5% of the load. See bench/data_identity.c. Needs SIZE_MB of disk and ~3x SIZE_MB of
# memory (the file, its bytes and its int32 tokens).
#
#   bench/data_identity.sh [--size-mb 1000] [--reps 3] [--build DIR] [--out DIR]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE=1000 REPS=3 BUILD="$REPO/build" OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --size-mb) SIZE="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -n "$OUT" ]; then mkdir -p "$OUT"; WORK="$(realpath "$OUT")"; else WORK="$(mktemp -d /tmp/data_identity.XXXXXX)"; trap 'rm -rf "$WORK"' EXIT; fi
BIN="$BUILD/bench-data-identity/data_identity"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/data_identity.c" "$BIN"
echo "data_identity: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" "$WORK" "$SIZE" "$REPS"
