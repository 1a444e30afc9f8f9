#!/usr/bin/env bash
# Rank 0's memory against the number of runs (sweeps of 10^5 runs): an
# unmodified `ablate run` of N tiny runs (micro preset, 1 step, batch 1, a 16-token eval, no
# samples) on W workers (mpirun -n W+1 --oversubscribe), live views on (--view-interval),
# with bench/sweep_timeshim.c preloaded to read each rank's peak RSS (ru_maxrss) at
# MPI_Finalize. Prints per N:
#   RANK0_MEMORY runs=N wall_s=S rank0_peak_mib=M worker_peak_mib=M journal_mib=J out_mib=O
# and rank 0's service time ("rank 0's service time per run in us at 10^5 runs,
# and from it the largest number of workers it can keep busy for a given run length"):
#   RANK0_SERVICE runs=N rank0_cpu_s=C main_cpu_s=M cpu_us_per_run=U main_us_per_run=UM
#                 gap_us_median=G gap_us_p99=G99
# C: rank 0's CPU time (all its threads: the main loop, the group sync, the live view), M:
# its main thread's, the one that serves the workers; U, UM: the same over the runs; G: per
# finished run, the wall time from rank 0 receiving its END to it sending
# that worker its next ASSIGN (what a worker waits for rank 0). After the last N, from the
# two largest N (start-up and the final view cancelled out), the marginal main-thread CPU
# per run s (and the whole process's) and the model: rank 0's main thread serves ends one at
# a time, so W workers with runs of L seconds load it W * s / L, and it keeps at most L / s
# workers busy (at 100%; half that to leave slack; its other threads need cores of their
# own at the process figure):
#   RANK0_MODEL runs=N1..N2 main_us_per_run=s process_us_per_run=S max_workers_L1s=.. ..
# Target: rank 0 under 300 MB at 20,000 runs and under 1 GB at 10^5 runs, i.e.
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
    bench_tiny_spec "$d/spec.yaml" "$n" "rank 0 memory bench"
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
    /usr/bin/python3 - "$d/shim" "$n" <<'PY' | tee -a "$WORK/service.txt"
import statistics, sys
shim, n = sys.argv[1], int(sys.argv[2])
cpu, main, ends, gaps = 0.0, float("nan"), {}, []
for line in open(shim + "/rank0.tsv"):
    f = line.rstrip("\n").split("\t")
    if f[0] == "cpu":
        cpu = float(f[2]) + float(f[3])
    elif f[0] == "cpu_main":
        main = float(f[2]) + float(f[3])
    elif f[0] == "recv_end":  # recv_end 0 t run src
        ends.setdefault(int(f[4]), []).append(float(f[2]))
    elif f[0] == "send_assign":  # send_assign 0 t run dest
        w, t = int(f[4]), float(f[2])
        prev = [e for e in ends.get(w, []) if e <= t]
        if prev:
            gaps.append(t - prev[-1])
            ends[w] = [e for e in ends[w] if e > t]
gaps.sort()
med = statistics.median(gaps) if gaps else float("nan")
p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] if gaps else float("nan")
print("RANK0_SERVICE runs=%d rank0_cpu_s=%.2f main_cpu_s=%.2f cpu_us_per_run=%.0f main_us_per_run=%.0f "
      "gap_us_median=%.0f gap_us_p99=%.0f"
      % (n, cpu, main, 1e6 * cpu / n, 1e6 * main / n, 1e6 * med, 1e6 * p99))
PY
done
/usr/bin/python3 - "$WORK/service.txt" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    kv = dict(x.split("=") for x in line.split()[1:])
    rows.append((int(kv["runs"]), float(kv["main_cpu_s"]), float(kv["rank0_cpu_s"])))
rows.sort()
if len(rows) >= 2 and rows[-1][0] > rows[-2][0]:
    (n1, m1, c1), (n2, m2, c2) = rows[-2], rows[-1]
    s = max(1e-9, (m2 - m1) / (n2 - n1))
    print("RANK0_MODEL runs=%d..%d main_us_per_run=%.0f process_us_per_run=%.0f " % (
        n1, n2, 1e6 * s, 1e6 * (c2 - c1) / (n2 - n1)) +
          " ".join("max_workers_L%ds=%d" % (L, L / s) for L in (1, 10, 60, 600)))
PY
