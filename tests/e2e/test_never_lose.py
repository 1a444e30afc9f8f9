"""Never lose or misreport a run: every fault below once lost finished work,
reported runs done that were not, or stopped a job the wrong way. Each sub-test fails on
the release before the fix (b7ba083) and passes now.

  disk_full      the output's filesystem fills during the sweep (a small tmpfs; CI runs as
                 root, so it can mount one): exit 3 with one line naming the journal and the
                 cause, nothing reported done that is not durable; once the tmpfs is grown,
                 --resume ends with every run once, identical to an uninterrupted sweep.
                 In-process and under mpirun.
  view_full      only OUT.h5's filesystem is full: one-line warnings, no crash (was a
                 segfault in HDF5's close at exit, 139, and multi-line HDF5 dumps); the
                 sweep says how to write the file; `ablate view` writes it once there is room.
  force_locked   `--force` on an output another sweep is writing is refused; that sweep
                 finishes whole (it was deleted under it, which then reported success).
  damaged_byte   one flipped byte inside the journal: --resume keeps every later record,
                 says where the damage was, where it saved the bytes, which runs re-run, and
                 re-runs only those (it dropped the whole tail and retrained every later run);
                 `ablate view` before the resume says so (exit 3, status damaged; it wrote
                 the view with exit 0 and "complete", a run's rows silently missing).
  damaged_end    one flipped bit in a done run's RUN_END: `ablate view` names the run (it
                 read "interrupted" in a "complete" sweep, exit 0); --resume re-runs it.
  bad_checkpoint a checkpoint altered (was: resumed silently into wrong values) or truncated
                 (was: the run failed at every resume): reported with its path, the run
                 restarts from its start; values identical to the reference; no checkpoint
                 file left once the sweep is complete.
  periodic       --checkpoint-every: kill -9 mid-sweep, the runs in progress resume from a
                 periodic checkpoint (resumed_from_step > 0), bit-identical.
  usr1_early     SIGUSR1 to the ranks while MPI starts (was: they died, exit 138 under SLURM):
                 exit 3, --resume completes; and to mpirun as soon as ABLATE_READY_FILE
                 exists (how the batch scripts avoid Open MPI's own launch window).
  usr1_worker    SIGUSR1 to one worker rank: only its run is checkpointed and requeued; the
                 sweep ends complete, exit 0 (was: every later run of that worker ended
                 interrupted at step 0 and the sweep stopped).
  view_after_kill after kill -9, `ablate view` shows the sweep stopped and its runs in
                 progress interrupted, and `ablate inspect` says when the view is older than
                 the journal (was: "running" and pending forever).
  blas_threads   OMP_NUM_THREADS / OPENBLAS_NUM_THREADS change the BLAS thread count: a
                 warning, and the count in --json and /runs (was: silent, not recorded).
The long-history case (one run with more than 64 MiB of events across a checkpoint) is
tests/e2e/test_long_history.py.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = "  baseline: {}\n  gelu: {model.activation: gelu}\n"
SEEDS = (0, 1, 2, 3)
N_RUNS = 2 * len(SEEDS)
IGNORE = C.RUNS_PLACEMENT | C.RUNS_HISTORY | {"message"}
_REF = {}


def spec_and_ref(tmp, steps=200, stats_every=1):
    """A sweep of 8 micro runs whose journal is a few hundred KB, and its uninterrupted
    reference view (computed once per spec, for every case: C.shared_sweep)."""
    corpus = C.corpus_path(tmp)
    key = (steps, stats_every)
    if key not in _REF:
        spec, out = C.shared_sweep("never-lose-ref-%d-%d" % key, C.micro_spec(
            corpus, steps=steps, seeds=SEEDS, variants=VARIANTS, eval_every=20,
            stats_every=stats_every), timeout=300)
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "reference")
        _REF[key] = (spec, v, os.path.getsize(C.journal_path(out)))
    return _REF[key]


# ---------------------------------------------------------------- tmpfs

def need_root():
    if os.geteuid() != 0:
        raise C.Skip("needs root to mount a tmpfs (CI runs as root)")


class Tmpfs:
    def __init__(self, path, size):
        self.path = path
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", path],
                       check=True)

    def resize(self, size):
        subprocess.run(["mount", "-o", "remount,size=%d" % size, self.path], check=True)

    def close(self):
        subprocess.run(["umount", "-l", self.path], check=False)


def check_one_line_errors(err, label):
    assert "HDF5-DIAG" not in err and "#000:" not in err, "%s: HDF5 error dump:\n%s" % (
        label, err[-3000:])
    for line in err.splitlines():
        if line.startswith("ablate") and "warning" in line:
            assert "time = " not in line and "file descriptor" not in line, \
                "%s: raw HDF5 text in a warning: %s" % (label, line)


def finished_in_journal(out):
    state, _ = C.journal_state(C.journal_path(out))
    return {r["name"] for r in state.values() if r["finished"]}


# ---------------------------------------------------------------- disk full

def test_disk_full():
    need_root()
    with C.workdir("disk-full") as tmp:
        spec, ref, jbytes = spec_and_ref(tmp)
        for label, ranks in (("in-process", None), ("mpirun -n 3", 3)):
            fs = Tmpfs(os.path.join(tmp, "fs-%s" % (ranks or 1)), max(64 << 10, jbytes * 6 // 10))
            try:
                out = os.path.join(fs.path, "out.h5")
                rc, _, err = C.run(["run", spec, "-o", out], ranks=ranks, timeout=300,
                                   tag="full")
                check_one_line_errors(err, label)
                assert rc == 3, "%s: exit %s on a full disk, expected 3\n%s" % (label, rc,
                                                                                 err[-3000:])
                lines = [ln for ln in err.splitlines() if "No space left on device" in ln]
                assert lines and C.journal_path(out) in lines[0], \
                    "%s: no line naming the journal and the cause\n%s" % (label, err[-3000:])
                reported = set(C.reported_finished(err))
                fin = finished_in_journal(out)
                assert reported <= fin, "%s: reported done, not durable: %s" % (
                    label, sorted(reported - fin))
                assert len(fin) < N_RUNS, "%s: the disk never filled (%d runs)" % (label, len(fin))
                assert "all %d runs finished" % N_RUNS not in err, err[-2000:]
                C.log("  %s: exit 3, %d of %d runs durable, %d reported" % (
                    label, len(fin), N_RUNS, len(reported)))
                fs.resize(64 << 20)  # space is freed
                rc, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=ranks,
                                   timeout=300, tag="resume")
                assert rc == 0, "%s: resume exit %s\n%s" % (label, rc, err[-3000:])
                assert "(%d already finished)" % len(fin) in err, err[-2000:]
                v = C.View(out)
                C.assert_complete(v, N_RUNS, label)
                C.assert_same(ref, v, "reference", label + " resumed", ignore_cols=IGNORE)
            finally:
                fs.close()


def test_view_full():
    need_root()
    with C.workdir("view-full") as tmp:
        spec, ref, _ = spec_and_ref(tmp)
        fs = Tmpfs(os.path.join(tmp, "small"), 96 << 10)
        out = os.path.join(fs.path, "out.h5")
        os.makedirs(out + ".d")
        big = Tmpfs(out + ".d", 64 << 20)  # the journal has room, OUT.h5 not
        try:
            rc, _, err = C.run(["run", spec, "-o", out, "--resume", "--view-interval", "0.2"],
                               timeout=300, tag="view-full")
            check_one_line_errors(err, "view_full")
            assert rc == 1, "exit %s, expected 1 (complete, file not written)\n%s" % (
                rc, err[-3000:])
            assert "could not rebuild" in err and "No space left on device" in err, err[-2000:]
            assert "ablate view %s" % out in err, err[-2000:]
            assert len(finished_in_journal(out)) == N_RUNS
            fs.resize(32 << 20)
            rc, _, err = C.run(["view", out], expect_rc=0, tag="view")
            v = C.View(out)
            C.assert_complete(v, N_RUNS, "view_full")
            C.assert_same(ref, v, "reference", "ablate view", ignore_cols=IGNORE)
        finally:
            big.close()
            fs.close()


# ---------------------------------------------------------------- --force

def test_force_locked():
    with C.workdir("force") as tmp:
        spec, ref, _ = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        hold = os.path.join(tmp, "hold")
        with C.Job(["run", spec, "-o", out], tag="sweep", env=C.hold_env(hold, 1)) as job:
            # the test hook holds the sweep's run in progress (its lock held) until --force
            # was tried: no race with a sweep that would finish first on a fast machine
            C.wait_until(lambda: C.held(hold), job, "a run held at step 1")
            rc, _, err = C.run(["run", spec, "-o", out, "--force"], tag="force")
            C.release(hold)
            assert rc == 2, "--force during a sweep: exit %s\n%s" % (rc, err)
            assert "in use" in err and "--force refused" in err, err
            rc, serr = job.finish(300)
        assert rc == 0, "the sweep: exit %s\n%s" % (rc, serr[-3000:])
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "after --force was refused")
        C.assert_same(ref, v, "reference", "sweep", ignore_cols=IGNORE)
        # and once nothing holds it, --force does start over
        rc, _, err = C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="force2")


# ---------------------------------------------------------------- journal damage

def test_damaged_byte():
    with C.workdir("damage") as tmp:
        spec, ref, _ = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="sweep")
        jp = C.journal_path(out)
        size = os.path.getsize(jp)
        # an EVENTS record in the middle of the journal, and the run it belongs to
        offset, length, _, victim = C.damage_record(jp, 4, 30, 0x5A)
        # `ablate view` over the damage: written, but said, with status 3 and the run named
        check_view_damaged(out, offset, length, victim, "events")
        rc, _, err = C.run(["run", spec, "-o", out, "--resume"], tag="resume")
        assert rc == 0, "resume exit %s\n%s" % (rc, err[-3000:])
        assert "torn" not in err, "damage reported as a torn tail:\n" + err[-2000:]
        line = [ln for ln in err.splitlines() if "damaged bytes" in ln]
        assert line, "no damage report\n" + err[-2000:]
        saved = jp + ".damaged-%d" % offset
        assert ("offset %d" % offset) in line[0] and saved in line[0], line[0]
        assert ("re-run: %s" % victim) in line[0], line[0]
        assert os.path.getsize(saved) == length, "saved %d bytes, record is %d" % (
            os.path.getsize(saved), length)
        assert "(%d already finished)" % (N_RUNS - 1) in err, err[-2000:]
        assert os.path.getsize(jp) > size, "the journal lost its tail"
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "after damage")
        C.assert_same(ref, v, "reference", "resumed after damage", ignore_cols=IGNORE)
        # a second resume finds nothing new to report and re-runs nothing
        rc, _, err = C.run(["run", spec, "-o", out, "--resume"], expect_rc=0, tag="again")
        assert "damaged" not in err and "(%d already finished)" % N_RUNS in err, err[-2000:]
        # the damage is handled now: the view is whole and says nothing
        rc, _, err = C.run(["view", out], expect_rc=0, tag="view-after")
        assert "damaged" not in err, err
        v = C.View(out)
        assert v.attrs["status"] == "complete" and v.attrs["journal_damaged_bytes"] == 0, v.attrs


def check_view_damaged(out, offset, length, victim, rtype):
    """`ablate view` over unhandled damage exits 3, names the bytes and the run they held,
    and the file says so (status damaged, journal_damaged_bytes, journal_damage)."""
    rc, _, err = C.run(["view", out], tag="view-damaged")
    assert rc == 3, "view over damage: exit %s, expected 3\n%s" % (rc, err[-2000:])
    lines = [ln for ln in err.splitlines() if "damaged bytes %d-" % offset in ln]
    assert lines and victim in lines[0] and (" %s record" % rtype) in lines[0], err[-2000:]
    assert "--resume" in err, err[-2000:]
    v = C.View(out)
    assert v.attrs["status"] == "damaged", v.attrs.get("status")
    assert v.attrs["journal_damaged_bytes"] == length, v.attrs["journal_damaged_bytes"]
    assert victim in v.attrs["journal_damage"], v.attrs["journal_damage"]


def test_damaged_end():
    """A flipped bit in a done run's RUN_END: the view showed the run interrupted and the
    sweep complete, exit 0; it must say the journal is damaged and name the run."""
    with C.workdir("damage-end") as tmp:
        spec, ref, _ = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="sweep")
        offset, length, _, victim = C.damage_record(C.journal_path(out), 5, 20, 0x01)
        check_view_damaged(out, offset, length, victim, "run_end")
        C.run(["run", spec, "-o", out, "--resume"], expect_rc=0, tag="resume")
        C.run(["view", out], expect_rc=0, tag="view-after")
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "after damage")
        C.assert_same(ref, v, "reference", "resumed after damage", ignore_cols=IGNORE)


# ---------------------------------------------------------------- checkpoints

def checkpoint_files(out):
    d = os.path.join(out + ".d", "ckpt")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def stop_with_checkpoints(spec, out, label):
    """Runs the sweep in-process with its first run held at step 50 by the test hook
    (C.hold_env: the run stays in progress until signalled, however fast the machine), sends
    SIGUSR1 and returns the checkpointed runs. (It once raced the run's end: "the run in
    progress ended before the signal took effect" on a faster machine.)"""
    jp = C.journal_path(out)
    hold = out + ".hold"
    with C.Job(["run", spec, "-o", out], tag=label, env=C.hold_env(hold, 50)) as job:
        C.wait_until(lambda: C.held(hold), job, "%s: a run held at step 50" % label)
        os.kill(job.proc.pid, signal.SIGUSR1)
        rc, _ = job.finish(60)
    shutil.rmtree(hold)
    state, _ = C.journal_state(jp)
    ck = [r for r in state.values() if not r["finished"] and r["ckpt_step"] > 0]
    assert rc == 3 and ck, "%s: exit %s after SIGUSR1, checkpointed %s" % (label, rc, ck)
    return ck


def test_bad_checkpoint():
    with C.workdir("bad-ckpt") as tmp:
        spec, ref, _ = spec_and_ref(tmp, steps=400, stats_every=20)
        for how in ("altered", "truncated"):
            out = os.path.join(tmp, "%s.h5" % how)
            ck = stop_with_checkpoints(spec, out, how)[0]
            path = os.path.join(out + ".d", "ckpt", "%s-%d.ckpt" % (ck["id"], ck["ckpt_step"]))
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                if how == "altered":  # one float of the parameters
                    f.seek(size // 3)
                    b = f.read(1)
                    f.seek(size // 3)
                    f.write(bytes([b[0] ^ 0x01]))
                else:
                    f.truncate(size // 2)
            rc, _, err = C.run(["run", spec, "-o", out, "--resume"], tag="resume")
            assert rc == 0, "%s: resume exit %s\n%s" % (how, rc, err[-3000:])
            assert path in err and "restarts from its start" in err, \
                "%s: the bad checkpoint is not reported by path\n%s" % (how, err[-2000:])
            v = C.View(out)
            C.assert_complete(v, N_RUNS, how)
            C.assert_same(ref, v, "reference", how, ignore_cols=IGNORE)
            assert v.runs[ck["id"]]["resumed_from_step"] == 0, v.runs[ck["id"]]
            left = checkpoint_files(out)
            assert not left, "%s: checkpoints left after the sweep: %s" % (how, left)


def test_periodic():
    with C.workdir("periodic") as tmp:
        spec, ref, _ = spec_and_ref(tmp, steps=400, stats_every=20)
        out = os.path.join(tmp, "out.h5")
        # the two runs dispatched last (most expensive first, then plan order) are held from
        # step 100 by the test hook: they cannot finish, so the kill always finds them in
        # progress with a periodic checkpoint, after two other runs finished
        last = C.dispatch_order(spec)[-2:]
        hold = os.path.join(tmp, "hold")
        with C.Job(["run", spec, "-o", out, "--checkpoint-every", "0.05"], ranks=3,
                   tag="periodic", env=C.hold_env(hold, 100, last)) as job:
            def ready():
                if not os.path.exists(C.journal_path(out)):
                    return False
                st, _ = C.journal_state(C.journal_path(out))
                by = {r["id"]: r for r in st.values()}
                return sum(1 for r in st.values() if r["finished"]) >= 2 and all(
                    i in by and not by[i]["finished"] and by[i]["ckpt_step"] >= 100 for i in last)
            C.wait_until(ready, job, "two runs finished and the held ones checkpointed")
            job.kill_all(signal.SIGKILL)
            job.reap(20)
        st, _ = C.journal_state(C.journal_path(out))
        ck = {r["id"]: r["ckpt_step"] for r in st.values()
              if not r["finished"] and r["ckpt_step"] > 0}
        assert ck, "no periodic checkpoint in the journal"
        rc, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=2, tag="resume")
        assert rc == 0, "resume exit %s\n%s" % (rc, err[-3000:])
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "periodic")
        C.assert_same(ref, v, "reference", "killed and resumed", ignore_cols=IGNORE)
        resumed = {rid: v.runs[rid]["resumed_from_step"] for rid in ck}
        assert all(resumed[rid] == ck[rid] for rid in ck), (resumed, ck)
        C.log("  kill -9 with periodic checkpoints at %s; resumed from them" % sorted(
            ck.values()))


# ---------------------------------------------------------------- signals

def _usr1_state(pid):
    """(inside MPI_Init or later, SIGUSR1 blocked or caught) for a live process: Open MPI
    dlopens its mca_* components only inside MPI_Init."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            in_mpi = "/mca_" in f.read()
        with open("/proc/%d/status" % pid) as f:
            st = dict(ln.split(":", 1) for ln in f if ":" in ln)
    except OSError:
        return False, True
    bit = 1 << (signal.SIGUSR1 - 1)
    return in_mpi, bool((int(st["SigBlk"], 16) | int(st["SigCgt"], 16)) & bit)


def _early_trial(tmp, spec, ref, label, ranks, how):
    out = os.path.join(tmp, "o-%s-%s.h5" % (ranks or 1, how.split()[0]))
    ready = out + ".ready"
    env = {"ABLATE_READY_FILE": ready} if how.startswith("to mpirun") else {}
    # test hook: every run is held at step 1 until the signal, so the sweep cannot complete
    # before SIGUSR1 arrives (exit 0 instead of 3) however fast the machine
    env.update(C.hold_env(out + ".hold", 1))
    exposed = []
    with C.Job(["run", spec, "-o", out], ranks=ranks, tag="early", env=env) as job:
        if how == "in MPI_Init":
            # every rank, by its own pid, the moment it is seen inside MPI_Init
            want = ranks or 1
            hit = set()
            t_end = time.monotonic() + 60
            while len(hit) < want and time.monotonic() < t_end and job.poll() is None:
                pids = job.ablate_ranks() if ranks else {0: job.proc.pid}
                for rank, pid in pids.items():
                    if rank in hit:
                        continue
                    in_mpi, handled = _usr1_state(pid)
                    if in_mpi:
                        if not handled:
                            exposed.append(rank)
                        os.kill(pid, signal.SIGUSR1)
                        hit.add(rank)
                time.sleep(0.0005)
            assert len(hit) == want, "%s: saw %d of %d ranks in MPI_Init" % (label, len(hit),
                                                                             want)
        else:
            # what the batch scripts do: forward to mpirun once ABLATE_READY_FILE exists
            t_end = time.monotonic() + 60
            while not os.path.exists(ready) and time.monotonic() < t_end:
                time.sleep(0.005)
            assert os.path.exists(ready), "%s: no ABLATE_READY_FILE" % label
            os.kill(job.proc.pid, signal.SIGUSR1)
        rc, err = job.finish(120)
    C.log("  %s: SIGUSR1 %s -> exit %s" % (label, how, rc))
    assert not exposed, "%s: ranks %s had no SIGUSR1 handler inside MPI_Init" % (label, exposed)
    assert rc == 3, "%s: SIGUSR1 (%s) -> exit %s (3: stopped, resumable)\n%s" % (
        label, how, rc, err[-2000:])
    C.run(["run", spec, "-o", out, "--resume"], ranks=ranks, expect_rc=0, tag="resume")
    C.assert_same(ref, C.View(out), "reference", label, ignore_cols=IGNORE)


def test_usr1_early():
    """SIGUSR1 while MPI starts (MPI_Init takes 0.1-0.3 s): the handlers are in place (or the
    signal blocked) from main()'s first line, a re-exec for OpenBLAS's kernels included."""
    with C.workdir("usr1-early") as tmp:
        spec, ref, _ = spec_and_ref(tmp)
        _early_trial(tmp, spec, ref, "in-process", None, "in MPI_Init")
        _early_trial(tmp, spec, ref, "mpirun -n 3", 3, "in MPI_Init")
        _early_trial(tmp, spec, ref, "mpirun -n 3", 3, "to mpirun when ready")


def test_usr1_worker():
    with C.workdir("usr1-worker") as tmp:
        spec, ref, _ = spec_and_ref(tmp, steps=400, stats_every=20)
        out = os.path.join(tmp, "out.h5")
        # test hook: every run is held from step 50 until released, so the worker signalled
        # always holds a run in progress (it once slept 0.4 s and hoped the worker was
        # mid-run, not between runs or done); released once its checkpoint is journaled
        hold = os.path.join(tmp, "hold")
        jp = C.journal_path(out)
        with C.Job(["run", spec, "-o", out], ranks=3, tag="worker",
                   env=C.hold_env(hold, 50)) as job:
            C.wait_until(lambda: len(C.held(hold)) == 2, job, "both workers' runs held")
            ranks = job.ablate_ranks()
            assert len(ranks) == 3, ranks
            os.kill(ranks[max(ranks)], signal.SIGUSR1)
            C.wait_until(lambda: any(r["ckpt_step"] >= 50 for r in C.journal_state(jp)[0].values()),
                         job, "the worker's run checkpointed")
            C.release(hold)
            rc, err = job.finish(300)
        assert rc == 0, "exit %s after SIGUSR1 to one worker\n%s" % (rc, err[-3000:])
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "usr1_worker")
        C.assert_same(ref, v, "reference", "worker signalled", ignore_cols=IGNORE)
        moved = [r["name"] for r in v.runs.values() if r["resumed_from_step"] > 0]
        C.log("  runs continued from a checkpoint after the worker's signal: %s" % moved)
        assert moved, "no run was checkpointed and requeued"


# ---------------------------------------------------------------- stale views

def test_view_after_kill():
    with C.workdir("view-kill") as tmp:
        spec, ref, _ = spec_and_ref(tmp, steps=400, stats_every=20)
        out = os.path.join(tmp, "out.h5")
        # rebuilds every 0.1 s flush the journal, so a run in progress is on disk
        jp = C.journal_path(out)
        # test hook: the runs after the first two are held at step 1, so the sweep cannot
        # end before the journal shows two finished and one in progress
        hold = os.path.join(tmp, "hold")
        env = C.hold_env(hold, 1, C.dispatch_order(spec)[2:])
        with C.Job(["run", spec, "-o", out, "--view-interval", "0.1"], tag="kill",
                   env=env) as job:
            def ready():
                st, _ = C.journal_state(jp) if os.path.exists(jp) else ({}, 0)
                return sum(r["finished"] for r in st.values()) >= 2 and any(
                    r["attempt"] and not r["finished"] for r in st.values())
            C.wait_until(ready, job, "two runs finished and one in progress in the journal")
            job.kill_all(signal.SIGKILL)
            job.reap(20)
        rc, so, _ = C.run(["inspect", out], expect_rc=0, tag="inspect")
        assert "older than its journal" in so and "ablate view %s" % out in so, so
        rc, _, err = C.run(["view", out], expect_rc=0, tag="view")
        v = C.View(out)
        st = v.status()
        assert v.attrs["status"] == "stopped", v.attrs["status"]
        assert "running" not in st.values(), st
        assert "interrupted" in st.values(), st
        rc, so, _ = C.run(["inspect", out], expect_rc=0, tag="inspect2")
        assert "older than" not in so, so
        C.run(["run", spec, "-o", out, "--resume"], expect_rc=0, tag="resume")
        C.assert_same(ref, C.View(out), "reference", "resumed", ignore_cols=IGNORE)


# ---------------------------------------------------------------- BLAS threads

def test_blas_threads():
    """OMP_NUM_THREADS in the environment switched off the one-BLAS-thread rule silently
    (final losses moved by 1.5e-3): it is warned about, and every run records its count."""
    import json
    with C.workdir("blas-threads") as tmp:
        spec, _, _ = spec_and_ref(tmp)
        for env, want in ((None, 1), ({"OMP_NUM_THREADS": "2"}, 2),
                          ({"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}, 2)):
            rc, so, se = C.run(["train", spec, "--set", "train.steps=3", "--json"], env=env,
                               expect_rc=0, tag="train")
            start = [json.loads(ln) for ln in so.splitlines() if '"start"' in ln][0]
            assert start["blas_threads"] == want, (env, start["blas_threads"])
            warned = "warning" in se and "thread" in se
            assert warned == (env is not None), (env, se)
            if env:
                var = "OPENBLAS_NUM_THREADS" if "OPENBLAS_NUM_THREADS" in env else "OMP_NUM_THREADS"
                assert var in se, se
        # --blas-threads asks explicitly (no warning) and wins over the environment; the same
        # count gives the same bits
        ends = []
        for args, env in ((["--blas-threads", "2"], {"OMP_NUM_THREADS": "1"}),
                          ([], {"OMP_NUM_THREADS": "2"})):
            rc, so, se = C.run(["train", spec, "--set", "train.steps=30", "--json"] + args,
                               env=env, expect_rc=0, tag="train-k")
            evs = [json.loads(ln) for ln in so.splitlines()]
            assert [e for e in evs if e["event"] == "start"][0]["blas_threads"] == 2
            assert ("warning" in se) == (not args), se
            ends.append([e for e in evs if e["event"] == "end"][0]["final_val_loss"])
        assert ends[0] == ends[1], ends
        out = os.path.join(tmp, "t.h5")
        rc, _, se = C.run(["run", spec, "-o", out, "--set", "train.steps=3"],
                          env={"OMP_NUM_THREADS": "2"}, expect_rc=0, tag="run")
        assert "OMP_NUM_THREADS=2" in se, se[-1500:]
        import h5py
        with h5py.File(out, "r") as f:  # C.View leaves provenance columns out
            got = set(int(x) for x in f["runs"]["blas_threads"])
        assert got == {2}, got


if __name__ == "__main__":
    C.main([("disk_full", test_disk_full), ("view_full", test_view_full),
            ("force_locked", test_force_locked), ("damaged_byte", test_damaged_byte),
            ("damaged_end", test_damaged_end),
            ("bad_checkpoint", test_bad_checkpoint), ("periodic", test_periodic),
            ("usr1_early", test_usr1_early), ("usr1_worker", test_usr1_worker),
            ("view_after_kill", test_view_after_kill), ("blas_threads", test_blas_threads)])
