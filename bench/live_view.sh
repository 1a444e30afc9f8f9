#!/usr/bin/env bash
# The live view's cost as runs finish (sweeps of 10^5 runs): a journal of RUNS
# tiny runs (a start, two steps, samples), PER_UPDATE of them ending between two live
# updates while the next IN_FLIGHT are part-way, brought up to date by h5live_update as
# the view thread of `ablate run` does. Prints a line per update where the runs ended grew
# by 1.25x, and the last two (the last with nothing new):
#   LIVE_VIEW ended=N update_s=S mappings=M out_h5_bytes=B plan_reads=P runs_rows=R segments=F updates=U total_update_s=T
# and at the end the target's summary (median update of the last 10% against updates 2-10%:
# at most 2x; the most mappings against 4 log2(runs) + 8):
#   LIVE_VIEW_TARGET runs=N updates=U early_median_s=E late_median_s=L growth=G target=2 mappings_max=M mappings_bound=B PASS|FAIL
# update_s: that update's time; mappings: virtual-dataset mappings in OUT.h5 (all tables),
# which is also what a reader's open costs; plan_reads: PLAN records /runs read again (the
# rows of runs ended before are kept); runs_rows: rows of /runs written (pages in flight);
# segments: segment files kept (those no OUT.h5 maps go after two updates and --grace
# seconds, 60 by default as in a sweep: most are kept in a bench this short).
# Target: both grow at most logarithmically with the runs ended. The driver is
# tests/test_h5view --live-bench (the test fixture's journal writer); segments are written
# to --dir (default a temp dir, on /dev/shm when there).
#
#   bench/live_view.sh [--runs 20000] [--per-update 200] [--in-flight 64] [--grace S] [--build DIR] [--dir DIR]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=20000 PER=200 FLIGHT=64 GRACE=60 BUILD="$REPO/build" DIR=""
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --per-update) PER="$2"; shift 2 ;;
    --in-flight) FLIGHT="$2"; shift 2 ;;
    --grace) GRACE="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target test_h5view >/dev/null
if [ -n "$DIR" ]; then
    mkdir -p "$DIR"
else
    base=/tmp
    [ -w /dev/shm ] && base=/dev/shm
    DIR="$(mktemp -d "$base/live_view.XXXXXX")"
    trap 'rm -rf "$DIR"' EXIT
fi
echo "live_view: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $DIR"
"$BUILD/tests/test_h5view" --live-bench "$RUNS" "$PER" "$FLIGHT" "$DIR" "$GRACE"
