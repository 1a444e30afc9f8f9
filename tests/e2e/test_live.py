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


def test_live_one_process():
    with C.workdir("live1") as d:
        watch(d, None, "1 process")


def test_live_mpi():
    with C.workdir("live2") as d:
        watch(d, 2, "mpirun -n 2")


if __name__ == "__main__":
    C.main([("live_one_process", test_live_one_process), ("live_mpi", test_live_mpi)])
