"""The live view: while runs are in progress OUT.h5 shows them (status running) with the
rows received so far, within the view interval, before any run has finished; in one
process and under mpirun. While the sweep runs the view is incremental (metric tables as
virtual datasets over segment files, h5view_live.c) and its rows are the final ones; the
final file is a full, self-contained build and the segments are gone."""
import os
import sys
import time

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402


def watch(d, ranks, label):
    corpus = C.corpus_path(d)
    # a time budget of 8 s per run, no evaluation before the end: today's batches of events
    # would reach rank 0 only at the end, and views were built only when a run ended
    spec = C.write(os.path.join(d, "live.yaml"), C.micro_spec(
        corpus, steps=0, seeds=(1,), eval_every=0, stats_every=0, sample_tokens=8)
        .replace("steps: 0,", "seconds: 8,"))
    out = os.path.join(d, "live.h5")
    job = C.Job(["run", spec, "-o", out, "--view-interval", "1"], ranks=ranks, tag=label)
    seen = None
    try:
        t0 = time.monotonic()
        while job.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.25)
            try:
                with h5py.File(out, "r") as f:
                    runs = f["runs"][:]
                    n_steps = len(f["steps"])
                    steps = f["steps"][:]
                    live = f.attrs.get("view") == "live" and f["steps"].is_virtual
            except (OSError, KeyError):
                continue
            if runs["status"][0] == b"running" and n_steps > 0 and runs["steps"][0] > 0:
                seen = (time.monotonic() - t0, n_steps, int(runs["steps"][0]))
                break
        # the live view is incremental: metric tables are virtual datasets over segment
        # files of the rows that arrived since the previous update (h5view_live.c)
        assert seen is None or live, "%s: the running view is not a live (virtual) one" % label
        rc = job.wait(120)
    finally:
        job.close()
        job.cleanup_files()
    assert rc == 0, "%s: exit %s" % (label, rc)
    assert seen, "%s: the view never showed the running run with its rows" % label
    C.log("  %s: running run visible after %.1f s with %d step rows (step %d)" % ((label,) + seen))
    with h5py.File(out, "r") as f:
        assert f["runs"]["status"][0] == b"done" and len(f["steps"]) >= seen[1]
        # the final file is a full build, self-contained; the live rows were the same rows
        assert "view" not in f.attrs and not f["steps"].is_virtual, dict(f.attrs)
        final = f["steps"][:]
    assert (final[:len(steps)] == steps).all(), "%s: live rows differ from the final ones" % label
    assert not os.path.exists(out + ".d/view"), "%s: segments left after the sweep" % label


def test_live_lost_segment():
    """A segment of the live view deleted while the sweep runs: the sweep says so (one
    warning naming it) and writes the rows it held again; the sweep ends whole."""
    with C.workdir("live-lost") as d:
        corpus = C.corpus_path(d)
        spec = C.write(os.path.join(d, "live.yaml"), C.micro_spec(
            corpus, steps=0, seeds=(1,), eval_every=0, stats_every=0, sample_tokens=8)
            .replace("steps: 0,", "seconds: 8,"))
        out = os.path.join(d, "live.h5")
        job = C.Job(["run", spec, "-o", out, "--view-interval", "1"], tag="live-lost")
        victim = None
        try:
            t0 = time.monotonic()
            # a segment that a live OUT.h5 maps (so it was complete when OUT.h5 was written)
            while job.poll() is None and victim is None and time.monotonic() - t0 < 60:
                try:
                    with h5py.File(out, "r") as f:
                        if "view_blocks" in f and len(f["view_blocks"]):
                            victim = os.path.join(d, f["view_blocks"]["file"][0].decode())
                except (OSError, KeyError):
                    pass
                if victim:
                    os.unlink(victim)
                else:
                    time.sleep(0.05)
            # the next update finds it gone (updates go on while the run trains)
            while job.poll() is None and "live view: segment" not in job.stderr():
                time.sleep(0.1)
            rc = job.wait(120)
            err = job.stderr()
        finally:
            job.close()
            job.cleanup_files()
        assert victim, "no segment appeared while the run trained"
        assert rc == 0, "exit %s: %s" % (rc, err)
        lines = [ln for ln in err.splitlines() if "live view: segment" in ln]
        assert len(lines) == 1 and os.path.basename(victim) in lines[0] and "is gone" in lines[0], \
            "the sweep did not say the segment is gone: %r" % err
        with h5py.File(out, "r") as f:
            runs, steps = f["runs"][:], f["steps"]["run"]
            assert (steps == 0).sum() == runs["rows_steps"][0] == len(steps) > 0, \
                "final rows: %d of %d" % ((steps == 0).sum(), runs["rows_steps"][0])
        C.log("  lost segment: %s" % lines[0])


def test_start_view_not_waited():
    """Rank 0 does not wait for the first view before handing out runs (a resume
    at 10^5 runs spent most of its start-up in it): with every view build held by the test
    hook, runs train and finish, fresh and resumed (in one process and under mpirun); once
    released, the final view holds every run."""
    with C.workdir("start-view") as d:
        corpus = C.corpus_path(d)
        hold = os.path.join(d, "hold")
        os.makedirs(hold)
        out = os.path.join(d, "out.h5")
        for label, seeds, ranks in (("fresh", (0, 1), None), ("resumed", (0, 1, 2, 3), 2)):
            spec = C.write(os.path.join(d, "s.yaml"), C.micro_spec(
                corpus, steps=3, seeds=seeds, eval_every=0, stats_every=0, sample_tokens=0))
            for f in ("view.held", "view.go"):
                if os.path.exists(os.path.join(hold, f)):
                    os.unlink(os.path.join(hold, f))
            args = ["run", spec, "-o", out] + (["--resume"] if label == "resumed" else [])
            with C.Job(args, ranks=ranks, tag=label,
                       env={"ABLATE_TEST_HOLD_VIEW": hold}) as job:
                C.wait_until(lambda: os.path.exists(os.path.join(hold, "view.held")) and
                             len(C.reported_finished(job.stderr())) == 2, job,
                             "%s: two runs finished while the first view is held" % label, 60)
                C.write(os.path.join(hold, "view.go"), "")
                assert job.wait(120) == 0, job.stderr()[-3000:]
            v = C.View(out)
            assert sorted(v.status().values()) == ["done"] * len(seeds), v.status()
            C.log("  %s: 2 runs finished while the first view was held" % label)


def test_live_one_process():
    with C.workdir("live1") as d:
        watch(d, None, "1 process")


def test_live_mpi():
    with C.workdir("live2") as d:
        watch(d, 2, "mpirun -n 2")


if __name__ == "__main__":
    C.main([("live_one_process", test_live_one_process), ("live_mpi", test_live_mpi),
            ("live_lost_segment", test_live_lost_segment),
            ("start_view_not_waited", test_start_view_not_waited)])
