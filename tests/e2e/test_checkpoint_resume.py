"""SIGUSR1 checkpoints the runs in progress; --resume continues them bit-identically.

Variants:
  mpi:        mpirun -n 3 (2 workers); SIGUSR1 to mpirun's process group (mpirun forwards
              it to the ranks) once the first run is done and others are mid-run; resumed
              on mpirun -n 2 (a different rank count).
  mpi-rank0:  the same with SIGUSR1 to rank 0 only: rank 0 relays the request to the
              busy workers over MPI; resumed on mpirun -n 3.
  in-process: ablate alone; kill -USR1 to the process mid-run; resumed in-process.
  chain:      in-process SIGUSR1, resume, SIGUSR1 again in the resumed run, resume,
              SIGKILL, resume to the end.
All must exit 3 (stopped, resumable) within a few seconds, leave checkpoint files and a readable OUT.h5 whose
unfinished runs are pending/interrupted, and after --resume equal an uninterrupted
reference in every metric (timing columns aside), checkpointed runs included.
"""
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

STEPS = 400
SEEDS = (0, 1, 2, 3, 4)


def setup(tmp):
    corpus = C.corpus_path(tmp)
    spec = C.write(os.path.join(tmp, "spec.yaml"), C.micro_spec(corpus, steps=STEPS, seeds=SEEDS))
    return spec


_REF = {}


def reference(tmp, spec):
    """The uninterrupted sweep of spec, in-process (computed once for every case:
    C.shared_sweep)."""
    if "view" not in _REF:
        with open(spec) as f:
            _, out = C.shared_sweep("ckpt-ref", f.read(), timeout=300)
        v = C.View(out)
        C.assert_complete(v, len(SEEDS), "reference")
        _REF["view"] = v
    return _REF["view"]


def hold_after_first(tmp, spec):
    """Test hook (C.hold_env): every run but the first to start is held in progress from
    step 0.4 * STEPS until the signal; the first runs to the end. So the signal always
    finds one run finished and the others mid-run, whatever the machine's speed (this once
    slept for 40% of the first run's time and hoped)."""
    order = C.dispatch_order(spec)
    hold = os.path.join(tmp, "hold")
    return hold, C.hold_env(hold, int(0.4 * STEPS), order[1:])


def wait_first_done_and_held(job, hold, n_held, timeout=120):
    C.wait_until(lambda: C.reported_finished(job.stderr()) and len(C.held(hold)) >= n_held,
                 job, "the first run done and %d held mid-run" % n_held, timeout)


def interrupt_and_resume(label, ranks, resume_ranks, send):
    with C.workdir("ckpt-" + label) as tmp:
        spec = setup(tmp)
        ref = reference(tmp, spec)
        out = os.path.join(tmp, "out.h5")
        hold, env = hold_after_first(tmp, spec)
        job = C.Job(["run", spec, "-o", out], ranks=ranks, tag="usr1", env=env)
        try:
            # one run done; the others (one per worker) held at 40%
            wait_first_done_and_held(job, hold, 1 if ranks is None else ranks - 1)
            t_sig = time.monotonic()
            send(job)
            rc = job.wait(timeout=20)
            took = time.monotonic() - t_sig
            job.reap(20)
        finally:
            job.kill_all()
        err = job.stderr()
        job.cleanup_files()
        C.log("  %s: SIGUSR1 -> exit %s after %.2f s" % (label, rc, took))
        assert rc == 3, "%s: exit %s after SIGUSR1, expected 3\nstderr:\n%s" % (label, rc,
                                                                                err[-3000:])
        assert took < 10, "%s: took %.1f s to stop after SIGUSR1" % (label, took)
        done_names = set(C.reported_finished(err))

        # The journal: the checkpointed runs and their files.
        js, torn = C.journal_state(C.journal_path(out))
        assert torn == 0, "%s: journal has a torn tail of %d bytes after a clean stop" % (
            label, torn)
        ckpt = {r["id"]: r for r in js.values() if not r["finished"] and r["ckpt_step"] > 0}
        assert ckpt, "%s: no run was checkpointed (journal: %s)\nstderr:\n%s" % (
            label, {r["name"]: (r["finished"], r["ckpt_step"]) for r in js.values()}, err)
        for rid, r in ckpt.items():
            p = os.path.join(out + ".d", "ckpt", "%s-%d.ckpt" % (rid, r["ckpt_step"]))
            assert os.path.isfile(p), "%s: checkpoint file %s missing" % (label, p)
            assert 0 < r["ckpt_step"] < STEPS, "%s: checkpoint step %d" % (label, r["ckpt_step"])
        finished = {r["name"] for r in js.values() if r["finished"]}
        assert done_names <= finished, "%s: reported done but not finished in the journal: %s" \
            % (label, done_names - finished)
        C.log("  %s: %d finished, checkpointed %s" % (
            label, len(finished), {r["name"]: r["ckpt_step"] for r in ckpt.values()}))

        # OUT.h5 right after the stop: readable; unfinished runs pending/interrupted.
        v = C.View(out)
        assert len(v.order) == len(SEEDS), "%s: %d runs in the stopped view" % (label, len(v.order))
        bad = {}
        for rid, r in v.runs.items():
            want = ("done",) if r["name"] in finished else ("pending", "interrupted")
            if r["status"] not in want:
                bad[r["name"]] = r["status"]
            if rid in ckpt and r["last_checkpoint_step"] != ckpt[rid]["ckpt_step"]:
                bad[r["name"] + ".last_checkpoint_step"] = r["last_checkpoint_step"]
        # the finished runs are already complete and equal to the reference
        fin_ids = [rid for rid in v.order if v.runs[rid]["name"] in finished]
        diffs = C.compare_views(ref, v, "reference", "stopped", only_ids=fin_ids,
                                ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)

        # Resume to completion.
        t0 = time.monotonic()
        rc, so, err2 = C.run(["run", spec, "-o", out, "--resume"], ranks=resume_ranks,
                             timeout=300, tag="resume")
        C.log("  %s: resume exit %s in %.1f s" % (label, rc, time.monotonic() - t0))
        assert rc == 0, "%s: resume exit %s\n%s" % (label, rc, err2[-3000:])
        after = C.View(out)
        C.assert_complete(after, len(SEEDS), label + " resumed")
        C.assert_same(ref, after, "reference", "resumed", ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        for rid, r in ckpt.items():
            a = after.runs[rid]
            assert a["resumed_from_step"] == r["ckpt_step"], \
                "%s: run %s resumed_from_step %r, expected %d (it restarted?)" % (
                    label, r["name"], a["resumed_from_step"], r["ckpt_step"])
        for rid in fin_ids:
            assert after.runs[rid]["attempts"] == 1, "%s: finished run %s was run again" % (
                label, after.runs[rid]["name"])
        assert not bad, "%s: status in OUT.h5 after SIGUSR1: %s (journal finished: %s)" % (
            label, bad, sorted(finished))
        assert not diffs, "%s: finished runs differ from the reference:\n  %s" % (
            label, "\n  ".join(diffs))


def test_mpi():
    interrupt_and_resume("mpi", 3, 2, lambda job: job.signal_leader_group(signal.SIGUSR1))


def _usr1_rank0_only(job):
    ranks = job.ablate_ranks()
    assert 0 in ranks, "rank 0 not found among %s" % ranks
    os.kill(ranks[0], signal.SIGUSR1)


def test_mpi_rank0_only():
    """SIGUSR1 to rank 0 alone (not forwarded to the workers): rank 0 asks the busy workers
    to checkpoint over MPI (TAG_STOP), the path a worker takes when rank 0's request
    arrives before (or without) its own signal."""
    interrupt_and_resume("mpi-rank0", 3, 3, _usr1_rank0_only)


def test_in_process():
    interrupt_and_resume("inproc", None, None, lambda job: os.kill(job.proc.pid, signal.SIGUSR1))


def test_chain():
    """In-process: SIGUSR1 mid-run, resume, SIGUSR1 again while the resumed run continues
    (its checkpoint then holds replayed and new events), resume, SIGKILL mid-run (the
    checkpoint must survive a killed resumed attempt), resume to the end."""
    with C.workdir("ckpt-chain") as tmp:
        spec = setup(tmp)
        ref = reference(tmp, spec)
        out = os.path.join(tmp, "out.h5")
        steps_seen = []
        for stage, action in enumerate(("usr1", "usr1", "kill", None)):
            args = ["run", spec, "-o", out] + (["--resume"] if stage else [])
            hold, env = hold_after_first(tmp, spec)
            if stage:  # the resumed run held 15% of the steps into its new attempt
                shutil.rmtree(hold, ignore_errors=True)
                env = C.hold_env(hold, int(0.15 * STEPS)) if action else {}
            job = C.Job(args, tag="chain", env=env)
            try:
                if action:
                    if stage == 0:  # the second run held 40% through
                        wait_first_done_and_held(job, hold, 1)
                    else:
                        C.wait_until(lambda: C.held(hold), job, "the resumed run held")
                    if action == "usr1":
                        os.kill(job.proc.pid, C.signal.SIGUSR1)
                        rc = job.wait(timeout=20)
                        assert rc == 3, "stage %d: SIGUSR1 -> exit %s\n%s" % (stage, rc,
                                                                               job.stderr())
                    else:
                        job.kill_all(C.signal.SIGKILL)
                else:
                    rc = job.wait(timeout=300)
                    assert rc == 0, "final resume: exit %s\n%s" % (rc, job.stderr())
                job.reap(20)
            finally:
                job.kill_all()
                job.cleanup_files()
            js, torn = C.journal_state(C.journal_path(out))
            steps_seen.append({r["name"]: r["ckpt_step"] for r in js.values()
                               if not r["finished"] and r["ckpt_step"]})
        C.log("  checkpoints after each stage: %s" % steps_seen)
        assert steps_seen[0], "the first SIGUSR1 checkpointed nothing"
        after = C.View(out)
        C.assert_complete(after, len(SEEDS), "chain")
        C.assert_same(ref, after, "reference", "chain", ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        # the last checkpoint before the final resume is where that run continued from
        for name, step in steps_seen[2].items():
            rid = after.names()[name]
            assert after.runs[rid]["resumed_from_step"] == step, \
                "run %s: resumed_from_step %r, expected %d" % (
                    name, after.runs[rid]["resumed_from_step"], step)


if __name__ == "__main__":
    C.main([("checkpoint_mpi", test_mpi), ("checkpoint_mpi_rank0_only", test_mpi_rank0_only),
            ("checkpoint_in_process", test_in_process),
            ("checkpoint_chain", test_chain)])
