"""SIGTERM (what mpirun and SLURM send at a time limit or scancel): finished runs are kept
and the sweep stops at once. In-process, ablate exits 3 (stopped, resumable) within a second or two; under
mpirun (which forwards SIGTERM to the ranks) the job ends just as fast. Every run reported
done before the signal is finished in the journal, and --resume completes the sweep with
metrics identical to an uninterrupted one."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = "  baseline: {}\n  gelu: {model.activation: gelu}\n"


def wait_for_done(job, n, timeout=120):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if len(C.reported_finished(job.stderr())) >= n:
            return
        if job.poll() is not None:
            raise AssertionError("sweep ended before %d runs were done:\n%s" % (n, job.stderr()))
        time.sleep(0.05)
    raise AssertionError("no %d runs done after %d s" % (n, timeout))


def test_sigterm():
    corpus = C.corpus_path()
    with C.workdir("sigterm") as d:
        spec = C.write(os.path.join(d, "t.yaml"),
                       C.micro_spec(corpus, steps=1000, seeds=(1, 2, 3), variants=VARIANTS,
                                    eval_every=250, stats_every=250))
        ref = os.path.join(d, "ref.h5")
        C.run(["run", spec, "-o", ref], expect_rc=0, tag="reference")
        for label, ranks in (("in-process", None), ("mpirun -n 3", 3)):
            out = os.path.join(d, "t%s.h5" % (ranks or 1))
            # test hook: every run but the first to start is held at step 1 until the
            # signal, so the sweep cannot complete before SIGTERM however fast it runs
            hold = os.path.join(d, "hold%s" % (ranks or 1))
            env = C.hold_env(hold, 1, C.dispatch_order(spec)[1:])
            job = C.Job(["run", spec, "-o", out], ranks=ranks, tag="sigterm", env=env)
            try:
                wait_for_done(job, 1)
                t0 = time.monotonic()
                job.signal_leader_group(signal.SIGTERM)
                rc = job.wait(30)
                took = time.monotonic() - t0
                job.reap(20)
                err = job.stderr()
            finally:
                job.close()
                job.cleanup_files()
            done = C.reported_finished(err)
            C.log("  %s: SIGTERM -> exit %s after %.2f s, %d run(s) reported done" % (
                label, rc, took, len(done)))
            assert took < 5, "%s: took %.1f s to stop" % (label, took)
            if ranks is None:
                assert rc == 3, "in-process exit %s, expected 3\n%s" % (rc, err[-2000:])
            else:
                assert rc != 0, "mpirun exit 0 after SIGTERM"
            state, _ = C.journal_state(C.journal_path(out))
            finished = {r["name"] for r in state.values() if r["finished"]}
            missing = set(done) - finished
            assert not missing, "%s: reported done but not finished in the journal: %s" % (
                label, missing)
            rc, so, se = C.run(["run", spec, "-o", out, "--resume"], ranks=ranks,
                               expect_rc=0, tag="resume")
            assert "(%d already finished)" % len(finished) in se, se[-1500:]
            C.assert_same(C.View(ref), C.View(out), "reference", label + " resumed",
                          ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)


if __name__ == "__main__":
    C.main([("sigterm", test_sigterm)])
