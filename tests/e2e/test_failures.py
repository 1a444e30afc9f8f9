"""A sweep goes on past runs that diverge or fail: a diverged run is recorded `diverged` at
the step its loss stopped being finite, a run that cannot allocate its model is recorded
`failed` with the message, the other runs finish, the exit status is 1 (a run failed), and
--resume retries the failed run (it fails again here) without touching the others; so does
joining a joined sweep again (before, a failed run's done claim kept it failed for good)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

# d_model 65536 x 2 layers: ~1e11 parameters, an allocation no machine grants. The planner
# refuses it under the default memory limit, so the sweep raises the limit (NO_LIMIT) to
# reach the allocation failure inside a run.
NO_LIMIT = ["--max-run-memory", "1000000T"]
VARIANTS = ("  baseline: {}\n"
            "  explode: {train.lr: 1.0e+30, train.grad_clip: 0, train.warmup_steps: 0}\n"
            "  huge: {model.d_model: 65536, model.n_head: 64}\n")


def check_failed_row(out, name):
    """A failed run's END carries the documented sentinels (docs/hdf5-schema.md): no loss
    (NaN), no instability (unstable_step 0, unstable_loss NaN), slurm_restart_count -1 outside
    SLURM, peak_rss measured or -1. Hand-built END events had drifted to 0, 0, 0.0."""
    import h5py
    with h5py.File(out, "r") as f:
        rows = [r for r in f["runs"][()] if C._py(r["name"]) == name]
    assert len(rows) == 1, name
    r = rows[0]
    assert math.isnan(r["final_val_loss"]) and math.isnan(r["final_val_acc"]), r
    assert r["unstable_step"] == 0 and math.isnan(r["unstable_loss"]), (
        r["unstable_step"], r["unstable_loss"])
    if "SLURM_RESTART_COUNT" not in os.environ:
        assert r["slurm_restart_count"] == -1, r["slurm_restart_count"]
    assert r["peak_rss"] == -1 or r["peak_rss"] > 0, r["peak_rss"]


def test_failures():
    corpus = C.corpus_path()
    with C.workdir("failures") as d:
        spec = C.write(os.path.join(d, "f.yaml"),
                       C.micro_spec(corpus, steps=40, seeds=(1,), variants=VARIANTS))
        out = os.path.join(d, "f.h5")
        for ranks in (None, 3):
            rc, so, se = C.run(["run", spec, "-o", out, "--force"] + NO_LIMIT, ranks=ranks,
                               tag="run")
            assert rc == 1, "exit %s, expected 1 (a run failed)\n%s" % (rc, se[-3000:])
            v = C.View(out)
            by_name = {r["name"]: r for r in v.runs.values()}
            base, boom, huge = (by_name["baseline/seed1"], by_name["explode/seed1"],
                                by_name["huge/seed1"])
            assert base["status"] == "done" and math.isfinite(base["final_val_loss"]), base
            assert boom["status"] == "diverged", boom["status"]
            assert 0 < boom["steps"] < 40 and "non-finite" in boom["message"], boom
            assert huge["status"] == "failed", huge["status"]
            assert "cannot allocate" in huge["message"], huge["message"]
            check_failed_row(out, "huge/seed1")
            assert "huge/seed1 FAILED" in se and "explode/seed1 diverged" in se, se[-2000:]
        # --resume retries only the failed run
        rc, so, se = C.run(["run", spec, "-o", out, "--resume"] + NO_LIMIT, tag="resume")
        assert rc == 1, rc
        assert "(2 already finished), 1 to run" in se, se[-2000:]
        v2 = C.View(out)
        hid = [rid for rid, r in v2.runs.items() if r["name"] == "huge/seed1"][0]
        assert v2.runs[hid]["status"] == "failed" and v2.runs[hid]["attempts"] == 2, v2.runs[hid]
        C.assert_same(v, v2, "first", "resumed", ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)

        # the same under --join: joining again trains the failed run again, only it
        jout = os.path.join(d, "j.h5")
        rc, so, se = C.run(["run", spec, "-o", jout, "--join"] + NO_LIMIT, tag="join1")
        assert rc == 1 and "huge/seed1 FAILED" in se, (rc, se[-2000:])
        rc, so, se = C.run(["run", spec, "-o", jout, "--join"] + NO_LIMIT, tag="join2")
        assert rc == 1, (rc, se[-2000:])
        assert "(2 finished)" in se and "huge/seed1 had failed" in se, se[-2000:]
        assert "baseline/seed1 done" not in se and "explode/seed1" not in se, se[-2000:]
        vj = C.View(jout)
        hj = [r for r in vj.runs.values() if r["name"] == "huge/seed1"][0]
        assert hj["status"] == "failed" and hj["attempts"] == 2, hj
        C.assert_same(v, vj, "single", "joined", ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)


if __name__ == "__main__":
    C.main([("failures", test_failures)])
