"""ablate-report --watch: started before the sweep, it waits for the file;
while the sweep runs (its last run held by the test hook of run_exec.c) it writes the report
from the live view, the page reloads itself when the data changed and says the sweep is still running and how
fresh it is; when the sweep ends it writes the final report (no reload, no live note),
prints the verdict table and exits 0. Every wait is for a state: a line in the watcher's
log, a .held file, the process's exit."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"


def log_text(path):
    with open(path, errors="replace") as f:
        return f.read()


class Watcher:
    """The ablate-report process as C.wait_until watches a job: it fails at once when the
    watcher ended before the state came."""

    def __init__(self, proc, err_path):
        self.proc, self.err_path, self.rc = proc, err_path, None

    def poll(self):
        self.rc = self.proc.poll()
        return self.rc

    def stderr(self):
        return log_text(self.err_path)


def test_watch():
    d = FILES["dir"]
    spec = C.write(os.path.join(d, "live.yaml"),
                   C.micro_spec(C.corpus_path(), steps=20, seeds=(0, 1),
                                variants="  baseline: {}\n  gelu: {model.activation: gelu}\n",
                                eval_every=10, stats_every=10))
    out = os.path.join(d, "live.h5")
    rep = os.path.join(d, "rep")
    hold = os.path.join(d, "hold")
    err_path = os.path.join(d, "watch.err")
    with open(err_path, "w") as err, open(os.path.join(d, "watch.out"), "w") as so:
        watcher = subprocess.Popen([PY, W.REPORT, out, "-o", rep, "--watch", "0.1"],
                                   stdout=so, stderr=err, env=dict(C.ENV, MPLBACKEND="Agg"))
    job = None
    try:
        C.wait_until(lambda: "no such file yet, waiting for the sweep" in log_text(err_path),
                     Watcher(watcher, err_path), "the watcher waiting for the file")
        assert watcher.poll() is None, log_text(err_path)
        # two ranks: rank 0 keeps the view current while rank 1 trains (one rank trains
        # in-process, and a held run would hold the view too); the last run to start is held
        last = C.dispatch_order(spec)[-1]
        job = C.Job(["run", spec, "-o", out, "--force", "--view-interval", "0.05"], ranks=2,
                    tag="live", env=C.hold_env(hold, step=5, runs=[last]))
        C.wait_until(lambda: C.held(hold) == [last], job, "the last run held at step 5")
        # a report of the live view that shows the three others done, the last running
        C.wait_until(lambda: re.search(r"refreshed \S+report\.md \(sweep running, 3 of 4 runs "
                                       r"done", log_text(err_path)), job,
                     "a refresh showing 3 of 4 runs done", timeout=300)
        assert watcher.poll() is None, log_text(err_path)
        with open(os.path.join(rep, "report.md")) as f:
            md = f.read()
        assert "**Live: the sweep is still running. Data as of the view written " in md, md[:800]
        assert "Partial:" in md
        page = os.path.join(rep, "report.html")
        if os.path.exists(page):  # (uPlot installed)
            with open(page) as f:
                html = f.read()
            # the page checks report-live.js at --watch's interval and reloads itself only when
            # the stamp there is another than its own (the page reloads only on a change)
            assert "http-equiv=\"refresh\"" not in html and '"live_interval":0.1' in html
            assert '"live":"Live: the sweep is still running.' in html
            with open(os.path.join(rep, "report-live.js")) as f:
                live = f.read()
            stamp = re.search(r'"stamp":("[^"]*")', html).group(1)
            assert live == "window.ablateLive && window.ablateLive(%s);\n" % stamp, (live, stamp)
        C.release(hold)
        rc, se = job.finish(180)
        assert rc == 0, se[-2000:]
        rc = watcher.wait(300)  # a hang guard: it ends by itself once the sweep has ended
        text = log_text(err_path)
        assert rc == 0, text
        assert re.search(r"final report \S+report\.md \(sweep complete, 4 of 4 runs done",
                         text), text
        with open(os.path.join(rep, "report.md")) as f:
            md = f.read()
        assert "Live:" not in md and "Partial:" not in md, md[:800]
        if os.path.exists(page):
            with open(page) as f:
                html = f.read()
            assert "http-equiv=\"refresh\"" not in html and '"live":null' in html
            # an open live page finds the final page's stamp and reloads to it
            stamp = re.search(r'"stamp":("[^"]*")', html).group(1)
            with open(os.path.join(rep, "report-live.js")) as f:
                assert stamp in f.read()
        with open(os.path.join(d, "watch.out")) as f:
            stdout = f.read()
        assert stdout.startswith("Baseline: the `baseline` variant") and "gelu" in stdout, stdout
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        if job is not None:
            job.kill_all()
            job.close()
            job.cleanup_files()


def main():
    W.main_in_workdir("analysis-watch", FILES, [("watch", test_watch)])


if __name__ == "__main__":
    main()
