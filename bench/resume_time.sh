#!/usr/bin/env bash
# Resume against a fresh start (sweeps of 10^5 runs): an unmodified
# `ablate run` of N tiny runs (micro preset, 1 step, batch 1, a 16-token eval, no samples)
# on W workers (mpirun -n W+1 --oversubscribe) is started fresh and SIGKILLed (the whole
# job) once its progress lines say half the runs are done; then `ablate run --resume` of the
# same sweep is started. Both are timed from the launch of mpirun to the line rank 0 prints
# just before its first assignment ("N runs planned (K already finished), ... to run on"),
# read as it arrives. Prints:
#   RESUME_TIME runs=N done_at_kill=K already_finished=K2 fresh_s=F resume_s=R ratio=R/F
#               target=1.5 PASS|FAIL
# with the date, CPU, load average and commit; exits 0 either way (non-zero only if a sweep
# failed). Target: resume to the first assignment within 1.5x a fresh start.
# At more than 100,000 runs set ABLATE_MAX_RUNS (10^5 is the default limit).
#
#   bench/resume_time.sh [--runs 5000] [--workers 2] [--build DIR] [--corpus PATH] [--out DIR]
#   e.g. the issue's scale:  bench/resume_time.sh --runs 100000 --workers 2
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N=5000 W=2 BUILD="$REPO/build" CORPUS="" OUT=""
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) N="$2"; shift 2 ;;
    --workers) W="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
bench_ablate_setup
if [ -n "$OUT" ]; then mkdir -p "$OUT"; WORK="$(realpath "$OUT")"; else WORK="$(mktemp -d /tmp/resume_time.XXXXXX)"; trap 'rm -rf "$WORK"' EXIT; fi
echo "resume_time: $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'), $N runs, $W workers"
d="$WORK/n$N"
rm -rf "$d" && mkdir -p "$d"
bench_tiny_spec "$d/spec.yaml" "$N" "resume time bench"
# The driver: launches the job in its own session, stamps rank 0's lines as they arrive
# (monotonic clock), and SIGKILLs every process of that session when told to.
cat >"$d/drive.py" <<'PY'
import os, re, signal, subprocess, sys, time
log, kill_at, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
first_re = re.compile(r"^ablate: \d+ runs planned \((\d+) already finished\)")
done_re = re.compile(r"^\[(\d+)/\d+\]")

def kill_session(sid):
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                os.kill(int(p), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass

t0 = time.monotonic()
job = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, start_new_session=True, text=True)
first = done = None
finished = 0
with open(log, "w") as out:
    for line in job.stdout:
        out.write(line)
        m = first_re.match(line)
        if m and first is None:
            first = time.monotonic() - t0
            finished = int(m.group(1))
            if kill_at <= 0:  # the resume: timed; nothing more to see
                break
        m = done_re.match(line)
        if m and int(m.group(1)) >= kill_at > 0:
            done = int(m.group(1))
            break
kill_session(job.pid)
job.wait()
if first is None:
    sys.exit("resume_time.sh: no first assignment in %s (exit %s)" % (log, job.returncode))
if kill_at > 0 and done is None:
    sys.exit("resume_time.sh: the sweep ended before %d runs were done, see %s" % (kill_at, log))
print("%.3f %d %d" % (first, finished, done or 0))
PY
RUN=(mpirun -n $((W + 1)) --oversubscribe "$BUILD/ablate" run "$d/spec.yaml" -o "$d/out.h5")
read -r fresh _ done_at < <(/usr/bin/python3 "$d/drive.py" "$d/fresh.log" $((N / 2)) "${RUN[@]}")
read -r resume finished _ < <(/usr/bin/python3 "$d/drive.py" "$d/resume.log" 0 "${RUN[@]}" --resume)
ratio=$(echo "$resume / $fresh" | bc -l)
verdict=$(echo "$ratio <= 1.5" | bc -l | sed 's/1/PASS/; s/0/FAIL/')
printf 'RESUME_TIME runs=%d done_at_kill=%d already_finished=%d fresh_s=%.2f resume_s=%.2f ratio=%.2f target=1.5 %s\n' \
    "$N" "$done_at" "$finished" "$fresh" "$resume" "$ratio" "$verdict"
echo "resume_time: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
