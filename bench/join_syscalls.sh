#!/usr/bin/env bash
# System calls per claimed run of joined processes (~32 opens, 5 flocks, 7 stats and 1
# fsync per claimed run before the change they guided). P unmodified `ablate run
# --join` processes (each its own MPI singleton, no mpirun) share one sweep of tiny runs
# (micro preset, 1 step, batch 1, a 16-token eval, no samples), each under `strace -f -c`;
# the same is done with N and with 2N runs, and the difference of the two counts divided by
# N is what one more run costs, every process's start-up and end (MPI, hwloc, the plan, the
# final view) cancelled out. Prints, with the date, CPU, load average, file system and
# commit, every system call a run costs at least 0.05 of, then the opens by what they open
# and the calls the issue counted:
#   JOIN_SYSCALLS procs=P runs=N total=T opens=O claim_opens=C flocks=F stats=S syncs=Y
# per claimed run (medians of --reps repetitions). Counts, not times: strace's timings are
# mostly its own. With P = 1 they do not depend on the machine; with P > 1 they depend on
# how often the processes collide and how many live views each builds (a view build reads
# every journal: the "journal" and "weights" opens), so repeat (--reps).
# Needs strace. Exits 0 (non-zero only if a sweep failed or its result is wrong).
#
#   bench/join_syscalls.sh [--runs 200] [--procs 1] [--reps 1] [--dir DIR] [--build DIR] [--corpus PATH]
#   e.g. bench/join_syscalls.sh --procs 4 --dir /mnt/lustre/scratch
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N=200 P=1 R=1 DIR="${TMPDIR:-/tmp}" BUILD="$REPO/build" CORPUS=""
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) N="$2"; shift 2 ;;
    --procs) P="$2"; shift 2 ;;
    --reps) R="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
command -v strace >/dev/null || { echo "join_syscalls.sh: needs strace (apt-get install strace)" >&2; exit 2; }
bench_ablate_setup
WORK="$(mktemp -d "$DIR/join_syscalls.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "join_syscalls: $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(stat -f -c %T "$WORK") at $DIR, $("$BUILD/ablate" --version 2>/dev/null || echo "ablate ?"), $P process(es), $N and $((2 * N)) runs"

# sweep RUNS REP: P joined processes on a sweep of RUNS runs; sums their counts into
# $WORK/counts.RUNS.REP ("name count" lines: every system call, and open:WHAT by path).
sweep() {
    local runs="$1" d="$WORK/r$1.$2" i pids=()
    mkdir -p "$d"
    bench_tiny_spec "$d/spec.yaml" "$runs" "join syscalls bench"
    for i in $(seq 1 "$P"); do
        (cd "$d" && exec strace -f -qq -o "strace.$i" "$BUILD/ablate" run spec.yaml -o out.h5 --join >"log.$i" 2>&1) &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || { echo "join_syscalls.sh: a joined process failed ($d/log.*):" >&2; tail -3 "$d"/log.* >&2; exit 1; }; done
    # every run finished exactly once, in the view every process agrees on
    /usr/bin/python3 - "$d/out.h5" "$runs" <<'PY' || exit 1
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    st = [s.decode() if isinstance(s, bytes) else s for s in f["runs"]["status"][:]]
n = int(sys.argv[2])
if len(st) != n or any(s != "done" for s in st):
    sys.exit("join_syscalls.sh: %s: %d rows, %d done; expected %d done" % (sys.argv[1], len(st), st.count("done"), n))
PY
    # one line per call ("PID name(args) = result", or the halves of one cut by another
    # thread's: "<... name resumed>" counts it)
    cat "$d"/strace.* | awk '
        / <unfinished \.\.\.>$/ { next }
        { line = $0; sub(/^[0-9]+ +/, "", line)
          if (line ~ /^<\.\.\. [a-z_0-9]+ resumed>/) { split(line, w, " "); name = w[2] }
          else if (match(line, /^[a-z_0-9]+\(/)) name = substr(line, 1, RLENGTH - 1)
          else next
          c[name]++
          if (name == "openat" || name == "open") {
              what = "other"
              if (line ~ /join\/claims\//) what = "claims"
              else if (line ~ /join\/procs\/[^\/]*\/journal/) what = "journals"
              else if (line ~ /join\//) what = "join, other"
              else if (line ~ /\/weights\//) what = "weights"
              else if (line ~ /\/ckpt/) what = "checkpoints"
              else if (line ~ /"\/proc\//) what = "/proc"
              c["open:" what]++ } }
        END { for (k in c) print k "\t" c[k] }' >"$WORK/counts.$runs.$2"
    rm -rf "$d"
}

for rep in $(seq 1 "$R"); do
    sweep "$N" "$rep"
    sweep "$((2 * N))" "$rep"
done
/usr/bin/python3 - "$WORK" "$N" "$P" "$R" <<'PY'
import statistics, sys
work, n, p, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(path):
    d = {}
    for line in open(path):
        k, v = line.rstrip("\n").split("\t")
        d[k] = int(v)
    return d
per = []  # per repetition: {name: calls per claimed run}
for r in range(1, reps + 1):
    a, b = load("%s/counts.%d.%d" % (work, n, r)), load("%s/counts.%d.%d" % (work, 2 * n, r))
    per.append({k: max(0.0, (b.get(k, 0) - a.get(k, 0)) / n) for k in set(a) | set(b)})
keys = set().union(*per)
med = {k: statistics.median(x.get(k, 0.0) for x in per) for k in keys}
calls = sorted((k for k in keys if ":" not in k and med[k] >= 0.05), key=lambda k: -med[k])
for k in calls:
    print("  %-18s %7.2f per claimed run" % (k, med[k]))
print("  opens by what they open:")
for k in sorted((k for k in keys if k.startswith("open:")), key=lambda k: -med[k]):
    print("    %-16s %7.2f" % (k[5:], med[k]))
total = sum(med[k] for k in keys if ":" not in k)
g = lambda *ks: sum(med.get(k, 0.0) for k in ks)
print("JOIN_SYSCALLS procs=%d runs=%d reps=%d total=%.1f opens=%.2f claim_opens=%.2f flocks=%.2f "
      "stats=%.2f syncs=%.2f per claimed run" % (
          p, n, reps, total, g("openat", "open"), g("open:claims"), g("flock"),
          g("newfstatat", "stat", "fstat", "lstat", "statx"), g("fsync", "fdatasync")))
PY
