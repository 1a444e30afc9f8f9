"""slurm/ablate-sweep.sbatch and slurm/ablate-sweep-srun.sbatch on a real SLURM.

Needs a SLURM: the single-node slurm-local cluster when its start.sh is found
($ABLATE_SLURM_LOCAL, else ../shared/slurm-local next to the source tree; CI has it and
this test starts it), else whatever sbatch/sinfo reach (the work dir must then be on a
filesystem the nodes share: set TMPDIR). With neither it exits 77, which CTest reports as
skipped. `test_slurm.py CASE...` runs only those cases. The cases (the jobs run 3 ranks:
rank 0 orchestrates, 2 workers):
  a. USR1 to the batch shell as its log says it started (`scancel -b -s USR1`, which is
     what a preemption does): the job is requeued, not FAILED; the next start resumes and
     the sweep completes with values identical to an uninterrupted sweep;
  b. USR1 while runs are in progress: they are checkpointed, the job requeues, the next
     start resumes them from their checkpoints; identical values again;
  f. the time limit: a job with -t 1 and the script's --signal=B:USR1@60 is warned by
     SLURM itself, at slurmctld's periodic pass (a probe job finds when the passes come;
     the job is submitted 3 s before one, so the pass finds runs in progress); it
     checkpoints, requeues itself and finishes in a later start; identical values;
  g. preemption: a job in `urgent` that needs the whole node preempts the sweep job in
     `debug`; SLURM signals it, it checkpoints its runs in progress, requeues itself
     within the grace time, starts again after the urgent job; identical values;
  c. the same as (a) for a job submitted with --no-requeue: it ends at once with ablate's
     exit 3 (FAILED), not 0 after holding its CPUs; its log says why;
  d. (a) with the srun script, which runs the sweep to completion (exit 0); its log is by
     default OUT.h5.log;
  e. slurm/submit: a typo'd spec fails at once (exit 2, ablate's located error, no job);
     --dry-run shows the proposed -n/--time (per task with --array N) and submits nothing;
     `submit --wait --report DIR` with a USR1 at the sweep job's start: the job requeues,
     the dependent finish job starts only after its real end (afterany), --wait exits 0,
     the file equals the reference and the report is written (when analysis/ablate-report
     exists; else the log must say there is none); a sweep job cancelled while running:
     the finish job says the sweep is not complete and --wait exits 3 (with --srun and
     --cpus-per-task 2: 2 CPUs per task and ablate run --blas-threads 2).
  h. slurm/submit --array 3 --wait: 3 tasks joined on the long sweep; task 1 is cancelled
     while it holds a run (another task takes it over), task 2 gets USR1 (it checkpoints,
     releases its run and requeues itself); the finish job after the whole array finds
     the sweep complete, --wait exits 0; every run once, values identical.
  i. SLURM as sites run it: export_none (--export=NONE as SBATCH_EXPORT: the
     jobs still get what they need, into a directory submit creates; a job with no binary
     ends "status 4 (not started)"); launcher_failure (mpirun refusing to run as root:
     status 4, submit exits 4, not "a run failed"); array_surplus (a held surplus task is
     cancelled once the sweep is complete, so --wait returns; thread variables of the
     submitting shell do not reach the runs); submit_options (--dry-run shows every
     exported variable, --dependency, --mail-type to the finish job, a missing directory);
     admin_requeue (an admin's requeue: resumes from checkpoints and says so, no ready
     file left, no "Forwarding signal 18").
  k. array_tune: a tune: sweep submitted as an array of 2 tasks (they share its tuning under
     --join) ends with the one-process sweep's choices, rung results and runs;
     array_tune_replicate: the same with replicate: (its decisions too).
  j. the job trains on the data that submit checked: data_export_none
     (SBATCH_EXPORT=NONE, ABLATE_DATA=A here, another file at the specs' default
     data/tinyshakespeare.txt: every run's data_sha256 is A's); data_export_list (an export
     list, --array 2, a spec that needs ${ABLATE_DATA}: each task gets the checked value);
     data_changed (A changes while the sweep job is held: the job refuses in one line with
     both digests, "status 2 (data check)", nothing trained; --wait says the sweep failed
     its data check, exit 2; the finish job names status 2, not 4); finish_status2 (a spec
     broken while the job is held: the finish job names status 2); and in every case that
     stops on USR1 (a, b, d, f, g), the line after the launcher's report of the exit 3
     says that it was planned, not a crash.
While (f) waits for its pass, the cases that fit in the wait run, and are reported in
their place. There is no sacct: the job's state and exit code
come from scontrol while the record lasts and from the job's own log."""
import calendar
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

SKIP = 77
RANKS = 3
VARIANTS = "  baseline: {}\n  gelu: {model.activation: gelu}\n"
SCRIPT = os.path.join(C.SOURCE_DIR, "slurm", "ablate-sweep.sbatch")
SRUN_SCRIPT = os.path.join(C.SOURCE_DIR, "slurm", "ablate-sweep-srun.sbatch")
SUBMIT = os.path.join(C.SOURCE_DIR, "slurm", "submit")
REPORT = os.path.join(C.SOURCE_DIR, "analysis", "ablate-report")
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
END_RE = re.compile(r"^ablate job end \S+ status (\d+)", re.M)
START_RE = re.compile(r"^ablate job \S+ start (\S+) restart (\d+)", re.M)
# slurmctld checks time limits and sends --signal warnings in a periodic pass (every 30 s,
# PERIODIC_TIMEOUT; 30.07 s measured on slurm-local: each of its 1 s loop turns runs a
# little over), so a warning comes at the first pass at or after its due time.
PASS_PERIOD = 30.07


def slurm_up():
    """Starts slurm-local when found; else checks that a SLURM answers; else exits 77."""
    if not C.slurm_reachable():
        C.log("SKIP: no SLURM here (no sbatch/sinfo and no slurm-local start.sh)")
        sys.exit(SKIP)


def job_info(jid):
    """scontrol's fields of the job, or None once its record is gone."""
    r = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True)
    if r.returncode != 0 or "JobState=" not in r.stdout:
        return None
    d = {}
    for tok in r.stdout.split():
        k, _, v = tok.partition("=")
        d.setdefault(k, v)
    return d


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


class SlurmJob:
    def __init__(self, d, script, spec, out, log=None, opts=(), ablate_opts=(), minutes=5,
                 env=None):
        """env: more variables for the job (sbatch's --export=ALL passes them on), e.g. the
        hold hook's (C.hold_env), so that a case finds runs in progress on any machine."""
        self.out = out
        self.log = log or out + ".log"
        cmd = ["sbatch", "--parsable", "-n", str(RANKS), "-t", str(minutes)] + list(opts)
        if log:
            cmd += ["-o", log]
        cmd += [script, spec, out] + list(ablate_opts)
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True,
                           env=dict(C.ENV, ABLATE_BIN=C.BIN, **(env or {})))
        assert r.returncode == 0, "sbatch failed: %s\n%s" % (" ".join(cmd), r.stderr)
        self.id = r.stdout.strip().split(";")[0]
        self.restarts = 0
        self.info = None
        C.log("  job %s: %s" % (self.id, " ".join(cmd[1:])))

    def text(self):
        return read(self.log)

    def wait_running(self, timeout=60):
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            i = job_info(self.id)
            if i and i["JobState"] == "RUNNING":
                return time.monotonic()
            assert i is None or i["JobState"] not in FINAL, "job ended before running: %s" % i
            time.sleep(0.02)
        raise AssertionError("job %s not running after %d s" % (self.id, timeout))

    def usr1(self):
        subprocess.run(["scancel", "-b", "-s", "USR1", self.id], check=True)

    def wait_end(self, timeout=240):
        """Waits for a final state (a requeued job is eligible again after about 10 s;
        hurrying it with StartTime=now makes the start fail: "Job credential revoked").
        Returns the last scontrol fields seen."""
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            i = job_info(self.id)
            if i is None:
                break
            self.info = i
            self.restarts = max(self.restarts, int(i.get("Restarts", "0")))
            if i["JobState"] in FINAL:
                break
            time.sleep(0.2)
        else:
            self.cancel()
            raise AssertionError("job %s did not end in %d s; log:\n%s"
                                 % (self.id, timeout, self.text()[-3000:]))
        # the batch shell's last line is written before the state changes
        ends = END_RE.findall(self.text())
        C.log("  job %s: %s, exit %s, %d restart(s); log ends: %s" % (
            self.id, self.info and self.info["JobState"], self.info and self.info["ExitCode"],
            self.restarts, ends))
        return self.info

    def final_status(self):
        ends = END_RE.findall(self.text())
        return int(ends[-1]) if ends else None

    def cancel(self):
        subprocess.run(["scancel", self.id], capture_output=True)


def wait_log(job, pred, what, timeout=120):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if pred(job.text()):
            return
        i = job_info(job.id)
        assert i is None or i["JobState"] not in FINAL, "job ended before %s:\n%s" % (
            what, job.text()[-3000:])
        time.sleep(0.05)
    raise AssertionError("no %s after %d s:\n%s" % (what, timeout, job.text()[-3000:]))


def wait_state(job, pred, what, timeout=120):
    """Waits until the job's state (None once its record is gone) satisfies pred."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        i = job_info(job.id)
        if pred(i["JobState"] if i else None):
            return
        time.sleep(0.05)
    raise AssertionError("job %s: no %s after %d s" % (job.id, what, timeout))


def check_requeued_complete(job, ref, out, label):
    info = job.wait_end()
    text = job.text()
    assert job.restarts >= 1 and "restart 1" in text, "%s: job %s was not requeued:\n%s" % (
        label, job.id, text[-4000:])
    assert info is None or info["JobState"] == "COMPLETED", "%s: job ended %s\n%s" % (
        label, info, text[-4000:])
    assert job.final_status() == 0, "%s: last start ended %s\n%s" % (
        label, job.final_status(), text[-4000:])
    v = C.View(out)
    C.assert_complete(v, len(ref.order), label)
    C.assert_same(ref, v, "reference", label, ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
    return v


class PassClock:
    """When slurmctld's next periodic pass comes. A probe job, submitted at once, with a
    warning due as soon as it starts (-t 1 --signal=B:USR1@60) is warned at the first pass
    and writes the time; later passes follow every PASS_PERIOD."""

    def __init__(self, d):
        self.out = os.path.join(d, "clock.out")
        r = subprocess.run(
            ["sbatch", "--parsable", "-n", "1", "-t", "1", "--signal=B:USR1@60",
             "--no-requeue", "-J", "ablate-test-clock", "-o", self.out, "--wrap",
             'trap "echo pass \\$(date +%s.%N); exit 0" USR1; '
             'while :; do sleep 1 & wait $!; done'],
            cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, "sbatch of the clock probe failed: %s" % r.stderr
        self.id = r.stdout.strip().split(";")[0]
        self.t0 = None

    def first(self, timeout=120):
        t_end = time.monotonic() + timeout
        while self.t0 is None:
            m = re.search(r"^pass (\d+\.\d+)", read(self.out), re.M)
            if m:
                self.t0 = float(m.group(1))
                C.log("  slurmctld pass at %.2f (clock probe job %s)" % (self.t0, self.id))
            elif time.monotonic() > t_end:
                raise AssertionError("the clock probe job %s was not warned in %d s: %s"
                                     % (self.id, timeout, job_info(self.id)))
            else:
                time.sleep(0.1)
        return self.t0

    def next_after(self, lead):
        """The first pass at least `lead` s from now (wall-clock time)."""
        t0 = self.first()
        k = max(0, int((time.time() + lead - t0) // PASS_PERIOD) + 1)
        return t0 + k * PASS_PERIOD

    def cancel(self):
        subprocess.run(["scancel", self.id], capture_output=True)


class Sweep:
    """The work dir, the specs and the uninterrupted references the cases compare with:
    `spec` runs in about 2 s on 2 workers; `long` (5x the steps) in about 6 s, for the
    cases whose signal SLURM sends a while after the test asked for it."""

    def __init__(self, d, long=True):
        self.d = d
        self.clock = PassClock(d)
        self.spec, self.ref = self.reference("t", 600)
        # the long reference trains in the background while the first cases mostly wait
        self._long = None
        self.long_spec, self._long_job = self.reference("long", 3000) if long else (None, None)

    def reference(self, name, steps):
        """(spec, View) of the sweep; (spec, the Job making it) for the long one."""
        spec = C.write(os.path.join(self.d, name + ".yaml"),
                       C.micro_spec(C.corpus_path(), steps=steps, seeds=(1, 2),
                                    variants=VARIANTS, eval_every=steps // 4,
                                    stats_every=steps // 4))
        h5 = os.path.join(self.d, name + "-ref.h5")
        if name == "long":
            return spec, C.Job(["run", spec, "-o", h5], ranks=RANKS, tag="reference")
        C.run(["run", spec, "-o", h5], expect_rc=0, tag="reference")
        return spec, C.View(h5)

    def long(self):
        """(spec, reference) of the long sweep (2.5 s a run)."""
        if self._long is None:
            rc, err = self._long_job.finish(300)
            assert rc == 0, "the long reference: exit %s\n%s" % (rc, err[-3000:])
            self._long = (self.long_spec, C.View(os.path.join(self.d, "long-ref.h5")))
        return self._long

    def close(self):
        self.clock.cancel()
        if self._long_job:
            self._long_job.kill_all()
            self._long_job.cleanup_files()

    def submit(self, case, script=SCRIPT, log=True, spec=None, **kw):
        """A job writing OUT.h5 `case`.h5 (log `case`.log, or OUT.h5.log when log=False)."""
        return SlurmJob(self.d, script, spec or self.spec, os.path.join(self.d, case + ".h5"),
                        log=os.path.join(self.d, case + ".log") if log else None, **kw)


def usr1_at_start(job):
    """USR1 to the batch shell as soon as its log says it started (its trap is set first):
    before the launcher, let alone ablate's ranks, can take it, on any machine."""
    job.wait_running()
    wait_log(job, lambda s: re.search(r"^ablate job \S+ start ", s, re.M), "the job's start line")
    job.usr1()
    return time.monotonic()


def stopped_by_usr1(job, label):
    """The first start's ablate got the USR1 (it was neither lost nor fatal)."""
    text = job.text()
    assert "SIGUSR1: checkpointing" in text and "stopped with" in text, (
        "%s: the USR1 never reached ablate (lost, or it killed a process):\n%s"
        % (label, text[-4000:]))
    planned_exit_said(text, label)


# mpirun's report of a rank's non-zero exit, which ablate's exit 3 after a USR1 causes
ABORT_BLOCK = "Per user-direction, the job has been aborted"


def planned_exit_said(text, label):
    """Each start that checkpointed on a USR1 and exited 3 says, after
    mpirun's "non-zero exit code ... aborted" block, that the exit was planned, not a
    crash (the block is there: mpirun prints it for any non-zero exit)."""
    starts = [m.start() for m in START_RE.finditer(text)] + [len(text)]
    stops = 0
    for a, b in zip(starts, starts[1:]):
        seg = text[a:b]
        if "SIGUSR1: checkpointing" not in seg or not re.search(
                r"^ablate: stopped with ", seg, re.M):
            continue
        stops += 1
        if "(mpirun)" in seg.splitlines()[0]:
            assert ABORT_BLOCK in seg, "%s: no mpirun block to explain:\n%s" % (label, seg)
        m = re.search(r"^ablate job: .*exit 3.* planned .*not a crash.*$", seg, re.M)
        assert m and (ABORT_BLOCK not in seg or seg.index(ABORT_BLOCK) < m.start()), (
            "%s: the planned exit 3 is not said to be planned after the launcher's "
            "report:\n%s" % (label, seg))
    assert stops, "%s: no start stopped on USR1:\n%s" % (label, text[-4000:])


def case_usr1_at_start(S):
    job = S.submit("a")
    try:
        usr1_at_start(job)
        check_requeued_complete(job, S.ref, job.out, "a (USR1 at the start)")
        stopped_by_usr1(job, "a")
    finally:
        job.cancel()


def held_then_released(job, hold, what):
    """Once the job's log shows `what` (its runs held meanwhile by the hook, so that they
    are in progress when it happens, on any machine), lets them go on: the next start's
    attempts are not held."""
    wait_log(job, lambda s: what in s, repr(what))
    C.release(hold)


def case_usr1_mid_run(S):
    """USR1 once a run has finished, while a later one is in progress (the hook holds the
    runs started third and fourth from step 50 until the signal, with their periodic
    checkpoints): the job checkpoints, requeues itself and resumes."""
    hold = os.path.join(S.d, "hold-b")
    env = C.hold_env(hold, 50, C.dispatch_order(S.spec)[2:])
    job = S.submit("b", ablate_opts=["--checkpoint-every", "1"], env=env)
    try:
        wait_log(job, lambda s: len(C.reported_finished(s)) >= 1 and C.held(hold),
                 "first run done, a later one held in progress")
        job.usr1()
        held_then_released(job, hold, "SIGUSR1: checkpointing")
        v = check_requeued_complete(job, S.ref, job.out, "b (USR1 mid-run)")
        stopped_by_usr1(job, "b")
        m = re.search(r"SIGUSR1: checkpointing (\d+) run", job.text())
        assert m and int(m.group(1)) >= 1, "b: no run checkpointed:\n%s" % job.text()
        resumed = [r["name"] for r in v.runs.values() if r["resumed_from_step"] > 0]
        assert resumed, "b: no run resumed from a checkpoint: %s" % v.runs
        C.log("  b: resumed from a checkpoint: %s" % resumed)
    finally:
        job.cancel()


def case_no_requeue(S):
    """Exit 3 at once (FAILED, visible), not COMPLETED 0 after holding the CPUs 30 s."""
    job = S.submit("c", opts=["--no-requeue"])
    try:
        t0 = usr1_at_start(job)
        info = job.wait_end(timeout=90)
        took = time.monotonic() - t0
        text = job.text()
        assert job.final_status() == 3, "c: job ended with %s, expected 3\n%s" % (
            job.final_status(), text[-4000:])
        assert info is None or (info["JobState"] == "FAILED"
                                and info["ExitCode"].startswith("3:")), "c: %s" % info
        assert "requeue was refused" in text, text[-4000:]
        assert job.restarts == 0, "c: requeued %d time(s)" % job.restarts
        assert took < 25, "c: took %.1f s after the USR1 to end" % took
        C.log("  c: ended %.1f s after the USR1" % took)
    finally:
        job.cancel()


def case_srun(S):
    """(a) with the srun script: its USR1 comes before srun's job step exists."""
    job = S.submit("d", script=SRUN_SCRIPT, log=False)
    try:
        usr1_at_start(job)
        check_requeued_complete(job, S.ref, job.out, "d (srun, USR1 at the start)")
        stopped_by_usr1(job, "d")
        assert "(srun)" in job.text(), "d: not run by srun:\n%s" % job.text()[-4000:]
    finally:
        job.cancel()


def checkpointed_at_usr1(job, label):
    """The first start's ablate got the USR1 with runs in progress and checkpointed them."""
    stopped_by_usr1(job, label)
    m = re.search(r"SIGUSR1: checkpointing (\d+) run", job.text())
    assert m and int(m.group(1)) >= 1, "%s: no run in progress at the USR1:\n%s" % (
        label, job.text()[-4000:])


def case_time_limit(S):
    """The time limit's own warning: -t 1 with the script's --signal=B:USR1@60 makes the
    warning due from the start, so slurmctld sends it at its first periodic pass. The job
    is submitted `lead` s before a pass, and its runs are held in progress by the hook from
    step 100 until the warning's USR1 (then released), so the pass finds runs to checkpoint
    however fast the machine.
    Each later start is warned again at its first pass (about 16 s in: it started about
    14 s after the last pass) and has usually finished by then (else one more start);
    the limit itself never hits. While it waits for the pass, short cases run (EARLY)."""
    spec, ref = S.long()
    hold = os.path.join(S.d, "hold-f")  # runs in progress whenever the pass comes
    lead = 3.0
    # of the next two passes, the one that the early cases fill best
    t_pass = min((S.clock.next_after(lead) + k * PASS_PERIOD for k in (0, 1)),
                 key=lambda t: S.early.idle(t - lead - time.time()))
    S.early.run_until(t_pass - lead)
    if time.time() > t_pass - lead - 0.5:  # an early case overran its budget
        t_pass = S.clock.next_after(lead)
    time.sleep(max(0.0, t_pass - lead - time.time()))
    job = S.submit("f", spec=spec, minutes=1, env=C.hold_env(hold, 100))
    try:
        held_then_released(job, hold, "SIGUSR1: checkpointing")
        check_requeued_complete(job, ref, job.out, "f (time limit)")
        checkpointed_at_usr1(job, "f")
        v = C.View(job.out)
        resumed = [r["name"] for r in v.runs.values() if r["resumed_from_step"] > 0]
        C.log("  f: pass predicted %.1f s after the submission; resumed from a checkpoint: %s"
              % (lead, resumed))
    finally:
        job.cancel()


def case_preempted(S):
    """A job in `urgent` that needs the node preempts the sweep: SLURM sends the sweep job
    its --signal at once; it checkpoints and requeues itself within GraceTime (SLURM
    would requeue it too, but with a SIGTERM, which loses the runs' progress) and starts
    again once the urgent job is done."""
    spec, ref = S.long()
    S.clock.first()  # the probe has ended (else it would be preempted too)
    hold = os.path.join(S.d, "hold-g")  # runs held in progress from step 100 until the USR1
    job = S.submit("g", spec=spec, env=C.hold_env(hold, 100))
    urgent = None
    try:
        wait_log(job, lambda s: "planned" in s and C.held(hold), "runs in progress")
        node = job_info(job.id)["NodeList"]
        mark = os.path.join(S.d, "urgent.out")
        r = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "--exclusive", "-w", node,
                            "-n", "1", "-t", "1", "-J", "ablate-test-urgent", "-o", mark,
                            "--wrap", "echo urgent start $(date +%s.%N); sleep 1"],
                           cwd=S.d, capture_output=True, text=True)
        assert r.returncode == 0, "sbatch -p urgent failed: %s" % r.stderr
        urgent = r.stdout.strip().split(";")[0]
        C.log("  urgent job %s (-p urgent --exclusive -w %s)" % (urgent, node))
        held_then_released(job, hold, "SIGUSR1: checkpointing")
        check_requeued_complete(job, ref, job.out, "g (preempted)")
        checkpointed_at_usr1(job, "g")
        text = job.text()
        assert "requeueing, the next start resumes" in text, text[-4000:]
        m = re.search(r"^urgent start (\d+\.\d+)", read(mark), re.M)
        assert m, "g: the urgent job %s did not run: %s" % (urgent, read(mark))
        starts = START_RE.findall(text)
        # the second start waited for the urgent job, which needed the whole node
        t2 = calendar.timegm(time.strptime(starts[1][0], "%Y-%m-%dT%H:%M:%SZ"))
        assert t2 >= int(float(m.group(1))), "g: restarted before the urgent job: %s, %s" % (
            starts, m.group(0))
        v = C.View(job.out)
        resumed = [r["name"] for r in v.runs.values() if r["resumed_from_step"] > 0]
        C.log("  g: resumed from a checkpoint: %s" % resumed)
    finally:
        job.cancel()
        if urgent:
            subprocess.run(["scancel", urgent], capture_output=True)


def submit_env(**kw):
    """The environment slurm/submit runs in: the tests' (ABLATE_BIN set), with the thread
    variables a user's shell may have; `kw` sets (None: unsets) more."""
    env = dict(C.ENV, ABLATE_BIN=C.BIN)
    for k, v in kw.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def submit(S, args, wait=True, timeout=60, env=None):
    """slurm/submit SPEC ARGS in the work dir; returns (rc, stdout, stderr)."""
    r = subprocess.run([SUBMIT] + args, cwd=S.d, capture_output=True, text=True,
                       timeout=timeout, env=env or submit_env())
    C.log("  submit %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.returncode, r.stdout, r.stderr


def queued_names():
    r = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True)
    return r.stdout.split()


class Submitted:
    """slurm/submit ... --wait running in the background; the job ids as it prints them."""

    def __init__(self, S, args, env=None):
        self.proc = subprocess.Popen([SUBMIT] + args, cwd=S.d, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=env or submit_env())
        self.lines, self.ids = [], {}
        while "finish" not in self.ids:
            line = self.proc.stdout.readline()
            assert line, "submit ended before printing its jobs:\n" + "".join(self.lines)
            self.lines.append(line)
            m = re.match(r"\s+(sweep|array|finish) job (\d+) ", line)
            if m:
                self.ids[m.group(1)] = m.group(2)
        self.job = SlurmJob.__new__(SlurmJob)  # the sweep job, for wait_running and usr1
        self.job.id = self.ids.get("sweep") or self.ids["array"]
        self.job.log = args[args.index("-o") + 1] + ".log"

    def wait(self, timeout=150):
        try:
            rest, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cancel()
            raise
        self.lines.append(rest)
        C.log("  submit: exit %d\n%s" % (self.proc.returncode, "".join(self.lines)))
        return self.proc.returncode, "".join(self.lines)

    def cancel(self):
        self.proc.kill()
        subprocess.run(["scancel"] + list(self.ids.values()), capture_output=True)


def case_submit_checks(S):
    """Fails fast on a typo, refuses --array, --dry-run proposes -n/--time."""
    bad = C.write(os.path.join(S.d, "typo.yaml"), read(S.spec).replace("steps:", "stepz:"))
    rc, out, err = submit(S, ["typo.yaml", "-o", "typo.h5", "--wait"])
    assert rc == 2, "typo: exit %d, expected 2" % rc
    assert re.search(r"typo\.yaml:\d+:\d+: unknown key 'train\.stepz'", err), err
    assert "job" not in out and "ablate-typo" not in queued_names(), out
    assert not os.path.exists(os.path.join(S.d, "typo.h5.log")), "typo: a job ran"
    os.unlink(bad)

    rc, out, err = submit(S, ["t.yaml", "-o", "arr.h5", "--dry-run", "--", "--array=1-4"])
    assert rc == 2 and "--array N (before --)" in err, err
    rc, out, err = submit(S, ["t.yaml", "-o", "arr.h5", "--dry-run", "--array", "2"])
    line = [l for l in out.splitlines() if "ablate-sweep.sbatch" in l]
    # 4 runs on 2 tasks: 2 workers + rank 0 each, every task joined
    assert rc == 0 and line and " --array=1-2 -n 3 " in line[0] and line[0].endswith(
        " --join"), out

    rc, out, err = submit(S, ["t.yaml", "-o", "dry.h5", "--dry-run", "--report", "rep"])
    assert rc == 0, err
    m = re.search(r"ranks: (\d+) .*\n\s+time:\s+(\d+) min", out)
    assert m, out
    ranks, minutes = int(m.group(1)), int(m.group(2))
    # 4 runs: rank 0 + 4 workers, unless the default partition has fewer CPUs (then 1
    # when only one worker would be left); a few seconds' estimate + the 10 min margin
    r = subprocess.run(["sinfo", "-h", "-o", "%P %C"], capture_output=True, text=True)
    cpus = sum(int(l.split()[1].split("/")[3]) for l in r.stdout.splitlines()
               if l.split()[0].endswith("*"))
    want = min(5, cpus)
    assert ranks == (want if want >= 3 else 1), "%d CPUs:\n%s" % (cpus, out)
    assert 10 <= minutes <= 12, out
    line = [l for l in out.splitlines() if "ablate-sweep.sbatch" in l]
    assert line and " -n %d -t %d " % (ranks, minutes) in line[0], out
    assert any("--dependency=afterany:JOB" in l and "ablate-finish.sbatch" in l
               for l in out.splitlines()), out
    assert "ablate-t-dry" not in queued_names() and not os.path.exists(
        os.path.join(S.d, "dry.h5.log")), "dry run submitted a job"
    rc, out, err = submit(S, ["t.yaml", "-o", "dry.h5", "--dry-run", "--ranks", "3",
                              "--time", "7", "--cpus-per-task", "2"])
    assert rc == 0 and " -n 3 -t 7 " in out and " -c 2 " in out and \
        "--blas-threads 2" in out, out


def case_submit_wait(S):
    """submit --wait --report through a requeue: afterany waits for the real end."""
    rep = os.path.join(S.d, "rep")
    sub = Submitted(S, ["t.yaml", "-o", os.path.join(S.d, "e.h5"), "--wait", "--report", rep])
    try:
        usr1_at_start(sub.job)
        rc, out = sub.wait()
        text = read(sub.job.log)
        assert rc == 0, "submit --wait exited %d:\n%s\n%s" % (rc, out, text[-4000:])
        assert "restart 1" in text, "e: the sweep job was not requeued:\n" + text[-4000:]
        end = text.rindex("ablate job end")
        start = text.index("ablate finish %s start" % sub.ids["finish"])
        assert start > end, "e: the finish job started before the sweep ended:\n" + text
        assert "ablate finish: sweep complete" in text, text[-3000:]
        v = C.View(os.path.join(S.d, "e.h5"))
        C.assert_complete(v, len(S.ref.order), "e")
        C.assert_same(S.ref, v, "reference", "e (submit)",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        if os.path.exists(REPORT):
            assert os.path.isfile(os.path.join(rep, "report.md")), text[-3000:]
        else:
            C.log("  note: no analysis/ablate-report in this tree: the report is not checked")
            assert "no report" in text, text[-3000:]
    finally:
        sub.cancel()


def case_array(S):
    """submit --array 3 --ranks 1 --wait on the long sweep: 3 joined tasks of one process
    each. Once all have joined (each then holds one of the 4 runs), task 1 is cancelled:
    its run is taken over by another task; task 2 gets USR1 (as at a time limit or a
    preemption): it checkpoints and releases its run, requeues itself, and its next start
    joins the sweep again (or finds it complete). The finish job (afterany on the whole
    array) finds the sweep complete, --wait exits 0; every run once, values identical."""
    spec, ref = S.long()
    h5 = os.path.join(S.d, "h.h5")
    # the hook holds every run in progress from step 100 until the signals have been sent
    # and task 2 has requeued itself (then released): each task holds a run when it is
    # cancelled or signalled, however fast the machine
    hold = os.path.join(S.d, "hold-h")
    sub = Submitted(S, [spec, "-o", h5, "--array", "3", "--ranks", "1", "--wait"],
                    env=submit_env(**C.hold_env(hold, 100)))
    jid = sub.ids["array"]
    logs = {i: "%s.%s_%d.log" % (h5, jid, i) for i in (1, 2, 3)}
    joined_re = re.compile(r"^ablate: joined the sweep as (\S+):", re.M)
    try:
        t_end = time.monotonic() + 60
        while not (all(joined_re.search(read(l)) for l in logs.values()) and
                   len(C.held(hold)) >= 3):
            ended = [l for l in logs.values() if END_RE.search(read(l))]
            assert not ended and time.monotonic() < t_end, "h: not all tasks joined%s:\n%s" % (
                " (%d ended)" % len(ended) if ended else " in 60 s", "\n".join(
                    "%s:\n%s" % (l, read(l)[-2000:]) for l in logs.values()))
            time.sleep(0.05)
        names = set(re.findall(r"JobName=(\S+)", subprocess.run(
            ["scontrol", "show", "job", "-o", jid], capture_output=True, text=True).stdout))
        assert names == {"ablate-long-h"}, "h: the tasks are named %s" % names
        subprocess.run(["scancel", "%s_1" % jid], check=True)
        subprocess.run(["scancel", "-b", "-s", "USR1", "%s_2" % jid], check=True)
        t_end = time.monotonic() + 60
        while "requeueing" not in read(logs[2]):
            assert time.monotonic() < t_end, "h: task 2 did not requeue:\n" + read(logs[2])
            time.sleep(0.05)
        C.release(hold)
        rc, out = sub.wait(timeout=180)
        text = {i: read(l) for i, l in logs.items()}
        all_text = "\n".join("== %s\n%s" % (logs[i], text[i]) for i in logs)
        assert rc == 0, "h: submit --wait exited %d:\n%s\n%s" % (rc, out, all_text[-6000:])
        assert "sweep complete" in out, out
        gone = joined_re.search(text[1]).group(1)
        assert "ablate job end" not in text[1], "h: task 1 was not cancelled:\n" + text[1]
        assert re.search(r"taken over from %s " % re.escape(gone), text[2] + text[3]), (
            "h: the run of the cancelled task 1 (%s) was not taken over:\n%s" % (gone, all_text))
        assert "requeueing" in text[2], "h: task 2 was not requeued:\n" + text[2]
        # its next start ran, unless task 3 completed the sweep while task 2 was pending
        # again and cancelled it (a surplus task)
        ended = [3] + ([] if "cancelling the array's pending tasks %s_2" % jid in text[3]
                       else [2])
        if 2 in ended:
            assert "%s_2 start" % jid in text[2] and "restart 1" in text[2], (
                "h: task 2 did not start again:\n" + text[2])
        for i in ended:
            m = END_RE.findall(text[i])
            assert m and m[-1] == "0", "h: task %d ended %s:\n%s" % (i, m, text[i])
        v = C.View(h5)
        C.assert_complete(v, len(ref.order), "h")
        C.assert_same(ref, v, "reference", "h (array)",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        with h5py.File(h5, "r") as f:
            tasks = [t.decode() for t in f["runs"]["slurm_array_task_id"]]
        assert "1" not in tasks and set(tasks) <= {"2", "3"}, (
            "h: runs finished by tasks %s" % tasks)
        C.log("  h: runs finished by tasks %s" % tasks)
    finally:
        sub.cancel()


def array_against_one(S, name, text, decided):
    """submit --array 2 --ranks 1 --wait on spec text: the file has decided(h5) and every
    run's rows of the one-process sweep (the tasks share its decisions under --join)."""
    spec = C.write(os.path.join(S.d, name + ".yaml"), text)
    ref_h5 = os.path.join(S.d, name + "-ref.h5")
    C.run(["run", spec, "-o", ref_h5], expect_rc=0, tag=name + " reference")
    h5 = os.path.join(S.d, name + ".h5")
    sub = Submitted(S, [spec, "-o", h5, "--array", "2", "--ranks", "1", "--wait"])
    try:
        rc, out = sub.wait(timeout=180)
        jid = sub.ids["array"]
        text = "\n".join(read("%s.%s_%d.log" % (h5, jid, i)) for i in (1, 2))
        assert rc == 0 and "sweep complete" in out, "%s: exit %d:\n%s\n%s" % (
            name, rc, out, text[-4000:])
        assert decided(h5) == decided(ref_h5), (name, decided(h5), decided(ref_h5))
        C.assert_same(C.View(ref_h5), C.View(h5), "one process", name,
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        with h5py.File(h5, "r") as f:
            tasks = sorted(set(t.decode() for t in f["runs"]["slurm_array_task_id"]))
        C.log("  %s: the same decisions; runs finished by tasks %s" % (name, tasks))
    finally:
        sub.cancel()


def case_array_tune(S):
    """A tune: sweep as an array: test_tune's halving spec (2 configurations, 4 candidates x 2
    tuning seeds, eta 3): the two tasks share the tuning under --join, each deciding every
    rung from the results of both; the file has the choices, the rung results and the runs
    of the one-process sweep."""
    import test_tune as T
    array_against_one(S, "tune", T.halving_spec(C.corpus_path()),
                      lambda h5: (T.tuning(h5), T.rung_rows(h5)))


def case_array_tune_replicate(S):
    """tune: with replicate: as an array: test_tune_replicate's spec (3 configurations tuned
    by successive halving, then 2 to 4 comparison seeds by the rule): the tasks share the
    tuning and the looks; the file has the one-process sweep's choices, rung results,
    decisions and runs."""
    import test_tune_replicate as TR
    array_against_one(S, "tune_rep", TR.spec_text(C.corpus_path()), TR.state)


def case_submit_cancelled(S):
    """The sweep job (srun, 2 BLAS threads per run) cancelled: the finish job refuses,
    --wait exits 3."""
    h5 = os.path.join(S.d, "x.h5")
    sub = Submitted(S, ["t.yaml", "-o", h5, "--wait", "--set", "train.steps=50000", "--srun",
                        "--ranks", "3", "--cpus-per-task", "2"])
    try:
        sub.job.wait_running()
        wait_log(sub.job, lambda s: os.path.exists(h5 + ".d/journal") and "planned" in s,
                 "the sweep started")
        i = subprocess.run(["scontrol", "show", "job", "-o", sub.ids["sweep"]],
                           capture_output=True, text=True).stdout
        assert "CPUs/Task=2 " in i and re.search(
            r"Command=\S*/ablate-sweep-srun\.sbatch .* --blas-threads 2 ", i), (
                "--srun --cpus-per-task 2: the sweep job is %s" % i)
        subprocess.run(["scancel", sub.ids["sweep"]], check=True)
        rc, out = sub.wait()
        text = read(sub.job.log)
        assert rc == 3, "submit --wait exited %d, expected 3:\n%s\n%s" % (rc, out, text)
        assert "ablate finish: the sweep is not complete" in text, text
        assert re.search(r"ablate finish end \S+ status 3", text), text
        assert "(srun)" in text, text
        assert not ready_files(h5), "x: ready files left after scancel: %s" % ready_files(h5)
    finally:
        sub.cancel()

NOT_STARTED_RE = re.compile(r"^ablate job end \S+ status 4 \(not started\)$", re.M)


def ready_files(h5):
    d = os.path.dirname(h5)
    return [f for f in os.listdir(d) if f.startswith(os.path.basename(h5) + ".ready-")]


def case_export_none(S):
    """Item 1, the site default `--export=NONE` (as SBATCH_EXPORT=NONE; with --srun, whose
    ranks need no run-as-root variables): the jobs get ABLATE_BIN and the rest from the
    --export that submit builds, and the sweep completes, into a directory submit creates
    (item 9). The batch script submitted by hand with --export=NONE and no binary to find
    ends with its status line, 4 (not started), not a bare exit 2."""
    h5 = os.path.join(S.d, "none dir", "n.h5")
    rc, out, err = submit(S, ["t.yaml", "-o", h5, "--srun", "--ranks", "1", "--wait"],
                          timeout=150, env=submit_env(SBATCH_EXPORT="NONE"))
    text = read(h5 + ".log")
    assert rc == 0, "export NONE: submit --wait exited %d:\n%s%s\n%s" % (rc, out, err, text)
    assert "ablate finish: sweep complete" in text, text[-3000:]
    v = C.View(h5)
    C.assert_complete(v, len(S.ref.order), "export NONE")
    C.assert_same(S.ref, v, "reference", "export NONE",
                  ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)

    log = os.path.join(S.d, "nobin.log")
    r = subprocess.run(["sbatch", "--wait", "--export=NONE", "-n", "1", "-t", "2", "-o", log,
                        SCRIPT, S.spec, os.path.join(S.d, "nobin.h5")],
                       cwd=S.d, capture_output=True, text=True, timeout=90)
    text = read(log)
    assert r.returncode == 4 and NOT_STARTED_RE.search(text) and \
        "no ablate binary" in text, "no binary: sbatch exit %d:\n%s\n%s" % (
            r.returncode, r.stderr, text)


def case_launcher_failure(S):
    """Item 2: without the run-as-root variables mpirun refuses to start (as root): the
    sweep job says "status 4 (not started)", not a run failure; submit --wait says that
    ablate could not be started and exits 4; the finish job says the sweep recorded
    nothing. (Not root: mpirun would not refuse; skipped.)"""
    if os.geteuid() != 0:
        C.log("  not root: mpirun does not refuse; skipped")
        return
    h5 = os.path.join(S.d, "l.h5")
    env = submit_env(OMPI_ALLOW_RUN_AS_ROOT=None, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=None)
    rc, out, err = submit(S, ["t.yaml", "-o", h5, "--wait"], timeout=150, env=env)
    text = read(h5 + ".log")
    assert rc == 4, "launcher failure: submit --wait exited %d:\n%s%s\n%s" % (
        rc, out, err, text)
    assert "could not start ablate" in out and "nothing was trained" in out, out
    assert NOT_STARTED_RE.search(text) and "mpirun exited" in text, text
    assert "the sweep recorded nothing" in text, text
    assert not ready_files(h5), ready_files(h5)


def case_array_surplus(S):
    """Items 3 and 4. --array 3 --ranks 1 --wait on 4 runs, submitted held (-- --hold) from
    a shell with OMP_NUM_THREADS=4 OPENBLAS_NUM_THREADS=3; tasks 1 and 2 are released,
    task 3 stays held. The task that finds the sweep complete cancels task 3, so the finish
    job runs and --wait returns 0 without it. submit warned about the thread variables,
    and every run used one BLAS thread; values identical to the reference."""
    h5 = os.path.join(S.d, "s.h5")
    env = submit_env(OMP_NUM_THREADS="4", OPENBLAS_NUM_THREADS="3")
    sub = Submitted(S, ["t.yaml", "-o", h5, "--array", "3", "--ranks", "1", "--wait",
                        "--", "--hold"], env=env)
    jid = sub.ids["array"]
    try:
        for i in (1, 2):
            subprocess.run(["scontrol", "release", "%s_%d" % (jid, i)], check=True)
        rc, out = sub.wait(timeout=90)
        logs = {i: read("%s.%s_%d.log" % (h5, jid, i)) for i in (1, 2, 3)}
        all_text = "\n".join("== task %d\n%s" % (i, t) for i, t in logs.items())
        assert rc == 0 and "sweep complete" in out, "surplus: submit --wait exited %d:\n%s\n%s" % (
            rc, out, all_text)
        assert re.search(r"warning: OPENBLAS_NUM_THREADS=3 OMP_NUM_THREADS=4 in this shell: "
                         r"ignored by the jobs' runs, which use 1 BLAS thread", out), out
        assert "cancelling the array's pending tasks %s_3" % jid in logs[1] + logs[2], all_text
        assert not logs[3], "task 3 ran:\n" + logs[3]
        v = C.View(h5)
        C.assert_complete(v, len(S.ref.order), "surplus")
        C.assert_same(S.ref, v, "reference", "surplus",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        with h5py.File(h5, "r") as f:
            threads = sorted(set(int(t) for t in f["runs"]["blas_threads"]))
        assert threads == [1], "surplus: the runs used %s BLAS threads" % threads
    finally:
        sub.cancel()


def case_submit_options(S):
    """Items 6-9 with --dry-run: the printed sbatch lines carry every variable the jobs get
    (under the user's --export=NONE in the jobs' --export, without ALL; by default as
    VAR=value before sbatch, which ALL passes on); --dependency goes to the sweep job
    (the finish job depends on it); --mail-type/--mail-user go to the finish job (to the
    sweep job when there is none); a missing output directory is not refused (submit
    creates it; the dry run only says so). The shell's OPENBLAS_CORETYPE reaches the jobs
    (under NONE they would pick their own core, and the values would differ from the same
    sweep run in the shell): this machine's value when it sets one, else one set here
    (a dry run trains nothing)."""
    core = C.ENV.get("OPENBLAS_CORETYPE") or "Haswell"
    args = ["t.yaml", "-o", "new/o.h5", "--dry-run", "--wait", "--cpus-per-task", "2", "--",
            "--dependency=afterok:1", "--mail-type=END", "--mail-user", "me@example.org",
            "--export=NONE"]
    rc, out, err = submit(S, args, env=submit_env(OPENBLAS_CORETYPE=core))
    assert rc == 0, "dry run: exit %d\n%s%s" % (rc, out, err)
    sweep = [l for l in out.splitlines() if "ablate-sweep.sbatch" in l]
    fin = [l for l in out.splitlines() if "ablate-finish.sbatch" in l]
    assert sweep and fin, out
    sweep, fin = sweep[0], fin[0]
    for var in ("ABLATE_BIN=" + C.BIN, "ABLATE_SOURCE_DIR=", "ABLATE_SLURM_DIR=",
                "OMPI_MCA_hwloc_base_binding_policy=none", "SRUN_CPUS_PER_TASK=2",
                "OPENBLAS_CORETYPE=" + core):
        assert var in sweep and var in fin, "%s not exported:\n%s" % (var, out)
    assert " --export=ABLATE_BIN=" in sweep, "NONE: no ALL expected\n" + out
    assert " --dependency=afterok:1 " in sweep and "afterok" not in fin, out
    assert "--mail-type=END" in fin and "--mail-user=me@example.org" in fin and \
        "--mail" not in sweep, out
    assert "new does not exist: submit creates it" in out, out
    assert not os.path.exists(os.path.join(S.d, "new")), "a dry run created the directory"
    rc, out, err = submit(S, ["t.yaml", "-o", "dry2.h5", "--dry-run", "--", "--mail-type=END"])
    sweep = [l.split() for l in out.splitlines() if "ablate-sweep.sbatch" in l]
    assert rc == 0 and sweep, out
    env = sweep[0][:sweep[0].index("sbatch")]
    assert env == ["ABLATE_BIN=" + C.BIN, "ABLATE_SOURCE_DIR=" + C.SOURCE_DIR,
                   "ABLATE_SLURM_DIR=" + os.path.join(C.SOURCE_DIR, "slurm")] + (
                       ["OPENBLAS_CORETYPE=" + C.ENV["OPENBLAS_CORETYPE"]]
                       if C.ENV.get("OPENBLAS_CORETYPE") else []), out
    assert not any(w.startswith("--export") for w in sweep[0]) and \
        "--mail-type=END" in sweep[0] and sweep[0][-2:] == ["--blas-threads", "1"], out


def case_admin_requeue(S):
    """Item 10 and 11: an admin's `scontrol requeue` while runs are in progress (SIGTERM to
    every process of the job, no USR1): the next start resumes them from their periodic
    checkpoints and says so; no ready file is left behind; values identical."""
    spec, ref = S.long()
    hold = os.path.join(S.d, "hold-r")  # runs held in progress from step 100 (checkpoints taken)
    job = S.submit("r", spec=spec, ablate_opts=["--checkpoint-every", "1"],
                   env=C.hold_env(hold, 100))
    ckpt = os.path.join(job.out + ".d", "ckpt")
    try:
        wait_log(job, lambda s: os.path.isdir(ckpt) and any(
            f.endswith(".ckpt") for f in os.listdir(ckpt)), "a periodic checkpoint")
        subprocess.run(["scontrol", "requeue", job.id], check=True)
        wait_state(job, lambda st: st != "RUNNING", "the requeue")
        C.release(hold)  # the next start's attempts go on
        check_requeued_complete(job, ref, job.out, "r (admin requeue)")
        text = job.text()
        assert re.search(r"\d+ to run \(\d+ resumed from their checkpoints\)", text), (
            "r: the restart does not say it resumes from checkpoints:\n" + text[-4000:])
        assert not ready_files(job.out), "r: ready files left: %s" % ready_files(job.out)
        assert "Forwarding signal 18" not in text, text[-4000:]
    finally:
        job.cancel()


# The job trains on exactly the data that slurm/submit checked. The specs
# name their data through ${ABLATE_DATA:-data/tinyshakespeare.txt}; under --export=NONE the
# job does not inherit the submitting shell's ABLATE_DATA.
DEFAULT_PATH = "${ABLATE_DATA:-data/tinyshakespeare.txt}"
DATA_CHECK_END_RE = re.compile(r"^ablate job end \S+ status 2 \(data check\)$", re.M)


def sha256_of(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def data_files(S, name):
    """A copy of the corpus as `name` (ABLATE_DATA's file) and, in the submit directory, a
    different file at data/tinyshakespeare.txt (what the specs fall back to): (path, sha)."""
    text = read(C.corpus_path())
    a = C.write(os.path.join(S.d, name), text)
    other = os.path.join(S.d, "data", "tinyshakespeare.txt")
    if not os.path.exists(other):
        os.makedirs(os.path.dirname(other), exist_ok=True)
        C.write(other, "\n".join(reversed(text.split("\n"))) + "\nother data\n")
    assert sha256_of(a) != sha256_of(other)
    return a, sha256_of(a)


def data_spec(S, name, path):
    return C.write(os.path.join(S.d, name), C.micro_spec(path, steps=40, seeds=(1, 2),
                                                         eval_every=20, stats_every=20))


def trained_on(h5, sha, label):
    with h5py.File(h5, "r") as f:
        got = sorted(set(s.decode() for s in f["runs"]["data_sha256"]))
    other = sha256_of(os.path.join(os.path.dirname(h5), "data", "tinyshakespeare.txt"))
    assert got == [sha], "%s: trained on data %s, not ABLATE_DATA's %s%s" % (
        label, got, sha, " (it is data/tinyshakespeare.txt in the submit directory)"
        if other in got else "")


def case_data_export_none(S):
    """SBATCH_EXPORT=NONE, ABLATE_DATA=A in the submitting shell, another file at the
    specs' default data/tinyshakespeare.txt: the job trains on A, which the check saw."""
    a, sha = data_files(S, "data-a.txt")
    data_spec(S, "dv.yaml", DEFAULT_PATH)
    h5 = os.path.join(S.d, "dv.h5")
    rc, out, err = submit(S, ["dv.yaml", "-o", h5, "--srun", "--ranks", "1", "--wait"],
                          timeout=150, env=submit_env(SBATCH_EXPORT="NONE", ABLATE_DATA=a))
    text = read(h5 + ".log")
    assert rc == 0, "dv: submit --wait exited %d:\n%s%s\n%s" % (rc, out, err, text[-3000:])
    trained_on(h5, sha, "dv (SBATCH_EXPORT=NONE)")


def case_data_export_list(S):
    """An export list (-- --export=PATH: NONE plus PATH) and an array of 2 tasks, with a
    spec that needs ${ABLATE_DATA} (no default), set only in the submitting shell: each
    task gets the value the check resolved the spec with and trains on A."""
    a, sha = data_files(S, "data-l.txt")
    data_spec(S, "dl.yaml", "${ABLATE_DATA}")
    h5 = os.path.join(S.d, "dl.h5")
    rc, out, err = submit(S, ["dl.yaml", "-o", h5, "--srun", "--ranks", "1", "--array", "2",
                              "--wait", "--", "--export=PATH"],
                          timeout=150, env=submit_env(ABLATE_DATA=a))
    logs = "\n".join(read(os.path.join(S.d, f)) for f in sorted(os.listdir(S.d))
                     if f.startswith("dl.h5.") and f.endswith(".log"))
    assert rc == 0, "dl: submit --wait exited %d:\n%s%s\n%s" % (rc, out, err, logs[-4000:])
    trained_on(h5, sha, "dl (--export=PATH, --array 2)")


def held_submit(S, args, env):
    """slurm/submit ARGS --wait -- --hold: returns the Submitted, its sweep job held."""
    return Submitted(S, args + ["--wait", "--", "--hold"], env=env)


def case_data_changed(S):
    """The data changes between the check and the job's start (the sweep job is held
    meanwhile): the job refuses in one line naming ABLATE_DATA, the file and both digests,
    ends "status 2 (data check)" having trained nothing, and submit --wait says that the
    sweep failed its data check (exit 2); the finish job says that the sweep job ended
    with status 2, not that ablate could not start (status 4)."""
    a, sha = data_files(S, "data-c.txt")
    data_spec(S, "dc.yaml", "${ABLATE_DATA}")
    h5 = os.path.join(S.d, "dc.h5")
    sub = held_submit(S, ["dc.yaml", "-o", h5, "--srun", "--ranks", "1"],
                      env=submit_env(SBATCH_EXPORT="NONE", ABLATE_DATA=a))
    try:
        with open(a, "a") as f:
            f.write("ROMEO:\nchanged after the check\n")
        sha2 = sha256_of(a)
        subprocess.run(["scontrol", "release", sub.ids["sweep"]], check=True)
        rc, out = sub.wait()
        text = read(h5 + ".log")
        assert rc == 2, "dc: submit --wait exited %d, expected 2:\n%s\n%s" % (rc, out, text)
        assert "the sweep failed its data check" in out, out
        assert DATA_CHECK_END_RE.search(text), text
        lines = [l for l in text.splitlines() if l.startswith("ablate job: data check")]
        assert len(lines) == 1 and all(s in lines[0] for s in ("ABLATE_DATA", a, sha, sha2)), (
            "dc: the refusal is not one line naming ABLATE_DATA, %s, %s and %s:\n%s"
            % (a, sha, sha2, text))
        assert not os.path.exists(h5 + ".d"), "dc: the job trained:\n" + text
        fin = text[text.index("ablate finish %s start" % sub.ids["finish"]):]
        assert "status 2 (data check)" in fin and "status 4" not in fin, (
            "dc: the finish job's message:\n" + fin)
    finally:
        sub.cancel()


def case_finish_status2(S):
    """The spec is broken after the check (the sweep job held
    meanwhile): the sweep job ends with status 2 having recorded nothing; the finish job's
    message names that status, and does not suggest status 4."""
    spec = C.write(os.path.join(S.d, "s2.yaml"), read(S.spec))
    h5 = os.path.join(S.d, "s2.h5")
    sub = held_submit(S, ["s2.yaml", "-o", h5, "--srun", "--ranks", "1"], env=submit_env())
    try:
        C.write(spec, read(S.spec).replace("steps:", "stepz:"))
        subprocess.run(["scontrol", "release", sub.ids["sweep"]], check=True)
        rc, out = sub.wait()
        text = read(h5 + ".log")
        assert rc == 2, "s2: submit --wait exited %d, expected 2:\n%s\n%s" % (rc, out, text)
        assert re.search(r"unknown key 'train\.stepz'", text), text
        fin = text[text.index("ablate finish %s start" % sub.ids["finish"]):]
        assert "the sweep recorded nothing" in fin and re.search(
            r"sweep job %s ended with status 2\b" % sub.ids["sweep"], fin) and \
            "status 4" not in fin, "s2: the finish job's message:\n" + fin
    finally:
        sub.cancel()


class Early:
    """Short cases run while another case waits (time_limit, for slurmctld's pass), each
    reported in its own place in the list: its result is kept and given again there."""

    def __init__(self, S, cases):
        self.S, self.todo, self.done = S, list(cases), {}

    @staticmethod
    def budget(typical):
        return 1.3 * typical + 1

    def idle(self, window):
        """The seconds left idle in a wait of `window` s once the cases that fit ran."""
        for _, _, typical in self.todo:
            if self.budget(typical) <= window:
                window -= typical
        return window

    def run_until(self, t_end):
        """Runs the cases whose budget fits before wall-clock time t_end, in order."""
        for name, fn, typical in list(self.todo):
            if time.time() + self.budget(typical) > t_end:
                continue
            self.todo.remove((name, fn, typical))
            C.log("== %s (early, %.0f s before time_limit's slurmctld pass)"
                  % (name, t_end - time.time()))
            t0 = time.monotonic()
            try:
                fn(self.S)
                self.done[name] = (time.monotonic() - t0, None, "")
            except Exception as e:
                self.done[name] = (time.monotonic() - t0, e, traceback.format_exc())
            C.log("   (%s %.1f s)" % ("failed" if self.done[name][1] else "passed",
                                     self.done[name][0]))

    def case(self, name, fn):
        """The test of case `name`: its early result, or a run now."""
        def test():
            if name not in self.done:
                return fn(self.S)
            took, exc, tb = self.done[name]
            C.log("  ran early, in %.1f s%s" % (took, ":\n" + tb if exc else ""))
            if exc:
                raise exc
        return test


# name, function, its time on slurm-local (s) when it may run early (None: never)
CASES = [("usr1_at_start", case_usr1_at_start, None),
         ("usr1_mid_run", case_usr1_mid_run, None),
         ("time_limit", case_time_limit, None),  # after 30 s: the clock probe saw a pass
         ("preempted", case_preempted, 21),
         ("array", case_array, 18),
         ("srun", case_srun, 15),
         ("no_requeue", case_no_requeue, 3.5),
         ("submit_cancelled", case_submit_cancelled, 2.5),
         ("submit_checks", case_submit_checks, 0.5),
         ("submit_options", case_submit_options, 0.5),
         ("export_none", case_export_none, 12),
         ("launcher_failure", case_launcher_failure, 4),
         ("array_surplus", case_array_surplus, 9),
         ("array_tune", case_array_tune, 10),
         ("array_tune_replicate", case_array_tune_replicate, 10),
         ("data_export_none", case_data_export_none, 5),
         ("data_export_list", case_data_export_list, 6),
         ("data_changed", case_data_changed, 4),
         ("finish_status2", case_finish_status2, 2.5),
         ("admin_requeue", case_admin_requeue, None),  # 40 s: fits no wait
         ("submit_wait", case_submit_wait, None)]

if __name__ == "__main__":
    # the cases as every test file takes them (common.select: none = all, --list, CASE...),
    # chosen before SLURM starts; then one process runs them all, sharing the references
    # and fitting the short cases into time_limit's wait (Early), so CTest has the whole
    # file as one test, e2e_slurm
    names = C.select([c[0] for c in CASES])
    slurm_up()
    with C.workdir("slurm") as d:
        chosen = [c for c in CASES if c[0] in names]
        S = Sweep(d, long=bool({"time_limit", "preempted", "array", "admin_requeue"}
                               & {c[0] for c in chosen}))
        S.early = Early(S, [c for c in chosen if c[2] is not None])
        try:
            C.main([(n, S.early.case(n, f)) for n, f, _ in chosen], argv=[])
        except SystemExit as e:
            if e.code:
                raise  # keeps the work dir
        finally:
            S.close()
