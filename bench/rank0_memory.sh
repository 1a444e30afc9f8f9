#!/usr/bin/env bash
# Rank 0's memory against the number of runs (issue 18, "Sweeps of 10^5 runs"): an
# unmodified `ablate run` of N tiny runs (micro preset, 1 step, batch 1, a 16-token eval, no
# samples) on W workers (mpirun -n W+1 --oversubscribe), live views on (--view-interval),
# with bench/sweep_timeshim.c preloaded to read each rank's peak RSS (ru_maxrss) at
# MPI_Finalize. Prints per N:
#   RANK0_MEMORY runs=N wall_s=S rank0_peak_mib=M worker_peak_mib=M journal_mib=J out_mib=O
# Target (issue 18): rank 0 under 300 MB at 20,000 runs and under 1 GB at 10^5 runs, i.e.
# O(runs in flight + a bounded per-run record). At 10^5 runs the plan needs
# ABLATE_MAX_RUNS set above 100000 only for more runs than that: 10^5 is the default limit.
#
#   bench/rank0_memory.sh [--runs "1000 4000"] [--workers 2] [--view-interval 1]
#                         [--build DIR] [--corpus PATH] [--out DIR]
#   e.g. at 10^5 runs:  bench/rank0_memory.sh --runs "20000 100000" --workers 8
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="1000 4000" W=2 VIEW=1 BUILD="$REPO/build" CORPUS="" OUT=""
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --workers) W="$2"; shift 2 ;;
    --view-interval) VIEW="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
bench_ablate_setup
SHIM="$BUILD/bench-sweep/libsweep_timeshim.so"
mkdir -p "$(dirname "$SHIM")"
mpicc -std=c11 -O2 -Wall -Wextra -shared -fPIC -I"$REPO/src" -o "$SHIM" "$REPO/bench/sweep_timeshim.c"
if [ -n "$OUT" ]; then mkdir -p "$OUT"; WORK="$(realpath "$OUT")"; else WORK="$(mktemp -d /tmp/rank0_memory.XXXXXX)"; trap 'rm -rf "$WORK"' EXIT; fi
echo "rank0_memory: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $W workers, --view-interval $VIEW"
for n in $RUNS; do
    d="$WORK/n$n"
    rm -rf "$d" && mkdir -p "$d/shim"
    cat >"$d/spec.yaml" <<YAML
description: rank 0 memory bench ($n tiny runs)
data: {path: "$CORPUS", tokenizer: char, val_fraction: 0.1}
base:
  preset: micro
  train: {steps: 1, batch_size: 1, eval_tokens: 16, log_every: 1}
  stats: {every: 0}
  sample: {tokens: 0}
seeds: $n
YAML
    t0=$(date +%s.%N)
    mpirun -n $((W + 1)) --oversubscribe -x LD_PRELOAD="$SHIM" -x SWEEP_SHIM_DIR="$d/shim" \
        "$BUILD/ablate" run "$d/spec.yaml" -o "$d/out.h5" --view-interval "$VIEW" >"$d/log" 2>&1 ||
        { echo "rank0_memory.sh: ablate run failed (N=$n), see $d/log" >&2; tail -5 "$d/log" >&2; exit 1; }
    t1=$(date +%s.%N)
    r0=$(awk -F'\t' '$1 == "cpu" { print $5 }' "$d/shim/rank0.tsv")
    wk=$(cat "$d"/shim/rank*.tsv | awk -F'\t' '$1 == "cpu" && $2 != 0 && $5 > m { m = $5 } END { print m + 0 }')
    printf 'RANK0_MEMORY runs=%d wall_s=%.1f rank0_peak_mib=%.1f worker_peak_mib=%.1f journal_mib=%.1f out_mib=%.1f\n' \
        "$n" "$(echo "$t1 - $t0" | bc)" "$(echo "$r0 / 1024" | bc -l)" "$(echo "$wk / 1024" | bc -l)" \
        "$(du -sm "$d/out.h5.d" | cut -f1)" "$(du -sm "$d/out.h5" | cut -f1)"
done
