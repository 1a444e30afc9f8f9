"""A live view never reads as zeros: where a reader cannot get a segment's
rows, HDF5 gives the fill value (run = -1, step = -1, NaN), and the loader, `ablate inspect`
and the report name the runs and tables whose rows are unavailable instead of using them.

The live view is `test_h5view --live-fixture` (the fixture journal of tests/test_h5view.c
brought up in many updates: OUT.h5 maps a dozen segment files). Cases: every segment there;
a reader under a low open-file limit (RLIMIT_NOFILE, in a subprocess); a segment deleted; a
segment replaced by another view's under the same name (same rows, another generation); a
handle opened on the live view and read after the final build removed the segments; a load
whose file is replaced by the final build between its open and its reads.

Usage: python3 test_live_gaps.py PATH/TO/test_h5view   (ABLATE_BIN, ABLATE_SOURCE_DIR set)
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import h5py
import numpy as np

SOURCE = os.environ.get("ABLATE_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "analysis"))
import ablate_analysis as aa  # noqa: E402
L = sys.modules["ablate_analysis.load"]  # the module (aa.load is the function)

ABLATE = os.environ.get("ABLATE_BIN", "ablate")
ROWS = {"steps": {0: 50, 1: 50, 2: 7, 4: 3}}  # the fixture's step rows per run
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("CHECK failed:", what, file=sys.stderr)


def fixture(exe, d, updates=24, runs_page=None):
    os.makedirs(d)
    subprocess.run([exe, "--live-fixture", d, str(updates)] +
                   ([str(runs_page)] if runs_page else []), check=True)
    out = os.path.join(d, "out.h5")
    with h5py.File(out, "r") as f:
        check(f.attrs["view"] == "live" and f["steps"].is_virtual, "the fixture is a live view")
    return out


def segments(out):
    return sorted(glob.glob(out + ".d/view/seg-*.h5"),
                  key=lambda p: int(p.rsplit("-", 1)[1][:-3]))


def steps_runs(out):
    with h5py.File(out, "r") as f:
        return f["steps"]["run"]


def load_quiet(out):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sw = aa.load(out)
    return sw, [str(x.message) for x in w if issubclass(x.category, aa.UnavailableRowsWarning)]


def inspect_warnings(out):
    r = subprocess.run([ABLATE, "inspect", out], capture_output=True, text=True)
    check(r.returncode == 0, "inspect exit %d: %s" % (r.returncode, r.stderr))
    return [line for line in r.stderr.splitlines() if "warning" in line]


def whole(out, label):
    run = steps_runs(out)
    check((run >= 0).all() and len(run) == 110, "%s: h5py reads every row" % label)
    sw, warned = load_quiet(out)
    check(not warned and not sw.unavailable, "%s: loader warned %r" % (label, warned))
    check(sw.steps.groupby("run").size().to_dict() == ROWS["steps"], "%s: rows per run" % label)
    check(not inspect_warnings(out), "%s: inspect warned" % label)


def test_intact(exe, tmp):
    out = fixture(exe, os.path.join(tmp, "intact"))
    check(len(segments(out)) >= 8, "%d segments" % len(segments(out)))
    with h5py.File(out, "r") as f:
        runs = f["runs"][:]
        check(list(runs["rows_steps"]) == [50, 50, 7, 0, 3], "/runs rows_steps %r"
              % list(runs["rows_steps"]))
        check(list(runs["rows_attn"]) == [16, 16, 0, 0, 0], "/runs rows_attn %r"
              % list(runs["rows_attn"]))
        gen = f.attrs["view_generation"]
        for seg in segments(out):
            with h5py.File(seg, "r") as g:
                check(g.attrs["view_generation"] == gen, "segment generation")
                for t in ("steps", "runs"):  # a segment may hold pages of /runs alone
                    if t in g:
                        check(g.attrs["rows_" + t] == len(g[t]), "segment rows_" + t)
    whole(out, "intact")


def test_missing(exe, tmp):
    out = fixture(exe, os.path.join(tmp, "missing"))
    with h5py.File(out, "r") as f:
        blocks = f["view_blocks"][:]
    steps_blocks = blocks[blocks["table"] == b"steps"]
    victim = steps_blocks["file"][len(steps_blocks) // 2].decode()
    hit = steps_blocks[steps_blocks["file"] == victim.encode()]
    runs_hit = sorted(set(r for a, b in zip(hit["run"], hit["last_run"])
                          for r in range(int(a), int(b) + 1)))
    os.unlink(os.path.join(tmp, "missing", victim))
    with h5py.File(out, "r") as f:
        steps = f["steps"][:]
    fill = steps[steps["run"] == -1]
    check(len(fill) > 0, "a missing segment reads as fill rows")
    check((fill["step"] == -1).all() and np.isnan(fill["loss"]).all(), "fill: step -1, loss NaN")
    ok = steps[steps["run"] >= 0]
    check(np.bincount(ok["run"], minlength=5)[0] <= 50, "no zero rows counted as run 0")
    sw, warned = load_quiet(out)
    check(len(warned) >= 1 and "/steps" in warned[0] and "unavailable" in warned[0]
          and os.path.basename(victim) in warned[0], "loader warning %r" % warned)
    check(sw.unavailable.get("steps") == runs_hit, "unavailable %r, want %r"
          % (sw.unavailable, runs_hit))
    check(not (sw.steps["run"] < 0).any(), "no fill rows in the loaded table")
    check(not sw.steps["run"].isin(runs_hit).any(), "no partial rows of the runs hit")
    try:
        aa.load(out, unavailable="raise")
        check(False, "unavailable='raise' did not raise")
    except aa.UnavailableRowsError as e:
        check("/steps" in str(e), "raise names the table: %s" % e)
    iw = inspect_warnings(out)
    check(any("/steps" in w and "unavailable" in w and os.path.basename(victim) in w
              and ("run %d" % runs_hit[0] in w or "runs %d" % runs_hit[0] in w) for w in iw),
          "inspect warning %r" % iw)
    # the report says so
    from ablate_analysis import report as R
    os.makedirs(os.path.join(tmp, "report"))
    rep = R.Report(sw, os.path.join(tmp, "report"))
    rep.header()  # the note leads the report, above the verdicts
    rep.overview()
    text = "\n".join(rep.md)
    check("Rows unavailable" in text and "/steps" in text, "report notes the rows")


def test_runs_missing(exe, tmp):
    """A segment holding pages of /runs deleted: those rows read as fill rows (index -1); the
    loader leaves those runs out and says so, and so does `ablate inspect`."""
    out = fixture(exe, os.path.join(tmp, "runs-missing"), runs_page=1)
    with h5py.File(out, "r") as f:
        blocks = f["view_blocks"][:]
        check(f["runs"].is_virtual, "/runs is a virtual dataset")
    mine = blocks[(blocks["table"] == b"runs") & (blocks["file"] != b".")]
    check(len(mine) > 0, "pages of /runs in segments")
    if not len(mine):
        return
    victim = mine["file"][0].decode()
    one = mine[mine["file"] == victim.encode()]
    hit = sorted(set(r for a, b in zip(one["run"], one["last_run"]) for r in range(a, b + 1)))
    sw, warned = load_quiet(out)
    check(not warned and len(sw.runs) == 5, "before: loader warned %r" % warned)
    os.unlink(os.path.join(tmp, "runs-missing", victim))
    with h5py.File(out, "r") as f:
        index = f["runs"]["index"]
    check((index == -1).sum() >= 1 and (index[index >= 0] == np.nonzero(index >= 0)[0]).all(),
          "a missing page of /runs reads as fill rows: %r" % list(index))
    lost = sorted(int(i) for i in np.nonzero(index == -1)[0])
    check(set(hit) <= set(lost), "the pages of %s: %r lost" % (victim, lost))
    sw, warned = load_quiet(out)
    check(any("/runs" in w and "unavailable" in w and os.path.basename(victim) in w
              for w in warned), "loader warning %r" % warned)
    check(sw.unavailable.get("runs") == lost, "unavailable %r, want runs %r" % (sw.unavailable, lost))
    check(sorted(sw.runs["index"]) == [i for i in range(5) if i not in lost],
          "the Sweep leaves those runs out: %r" % list(sw.runs["index"]))
    check(not sw.steps["run"].isin(lost).any(), "and their rows")
    iw = inspect_warnings(out)
    check(any("/runs" in w and "unavailable" in w for w in iw), "inspect warning %r" % iw)


def test_repacked(exe, tmp):
    """A live view copied elsewhere with its rows (`h5repack -l CONTI`, as the docs say)
    reads whole: its /view_blocks still names segments that are not next to the copy, and
    no reader may take that for rows unavailable."""
    if not shutil.which("h5repack"):
        check(False, "h5repack not found (hdf5-tools, scripts/install-deps.sh)")
        return
    out = fixture(exe, os.path.join(tmp, "repack-src"), runs_page=1)
    os.makedirs(os.path.join(tmp, "repack-dst"))
    copy = os.path.join(tmp, "repack-dst", "copy.h5")
    r = subprocess.run(["h5repack", "-l", "CONTI", out, copy], capture_output=True, text=True)
    check(r.returncode == 0, "h5repack: %s" % r.stderr)
    with h5py.File(copy, "r") as f:
        check(not f["steps"].is_virtual and not f["runs"].is_virtual, "the copy holds its rows")
    shutil.rmtree(os.path.join(tmp, "repack-src"))  # the segments are gone: the copy is whole
    whole(copy, "repacked")


CHILD = r"""
import json, os, resource, sys, warnings
sys.path.insert(0, sys.argv[2])
import h5py, numpy as np
import ablate_analysis as aa
n = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with h5py.File(sys.argv[1], "r") as f:
    run = f["steps"]["run"]
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    sw = aa.load(sys.argv[1])
print(json.dumps({"fill": int((run == -1).sum()), "zero": int((run == 0).sum()),
                  "unavailable": sw.unavailable, "warned": [str(x.message) for x in w]}))
"""


def test_open_file_limit(exe, tmp):
    out = fixture(exe, os.path.join(tmp, "ulimit"))
    r = subprocess.run([sys.executable, "-c", CHILD, out, os.path.join(SOURCE, "analysis")],
                       capture_output=True, text=True)
    check(r.returncode == 0, "child: %s" % r.stderr[-2000:])
    if r.returncode:
        return
    got = json.loads(r.stdout)
    check(got["fill"] > 0, "under a low open-file limit some rows are fill rows: %r" % got)
    check(got["zero"] <= 50, "no fill row reads as run 0: %r" % got)
    check(got["unavailable"].get("steps") and got["warned"], "the loader says so: %r" % got)


def test_stale_generation(exe, tmp):
    a = fixture(exe, os.path.join(tmp, "gen-a"))
    b = fixture(exe, os.path.join(tmp, "gen-b"))
    sa, sb = segments(a), segments(b)
    check(len(sa) == len(sb), "both views have the same segments")
    k = len(sa) // 2
    shutil.copyfile(sb[k], sa[k])  # the same rows, under the name, from another view
    run = steps_runs(a)
    check((run >= 0).all(), "another view's segment reads as data (why a generation is needed)")
    sw, warned = load_quiet(a)
    check(warned and "another view's" in " ".join(warned), "loader: %r" % warned)
    check(any(sw.unavailable.values()), "loader marks the runs of that segment")
    iw = inspect_warnings(a)
    check(any("another view's" in w for w in iw), "inspect: %r" % iw)


def test_handle_after_final_build(exe, tmp):
    out = fixture(exe, os.path.join(tmp, "final"))
    f = h5py.File(out, "r")  # opened on the live view, read after the final build
    r = subprocess.run([ABLATE, "view", out], capture_output=True, text=True)
    check(r.returncode == 0 and not os.path.exists(out + ".d/view"), "ablate view: %s" % r.stderr)
    run = f["steps"]["run"]
    f.close()
    check((run == -1).all(), "a handle kept past the final build reads fill rows, not zeros")
    whole(out, "final build")


def test_replaced_while_loading(exe, tmp):
    out = fixture(exe, os.path.join(tmp, "replaced"))
    real_open = L._open
    calls = []

    def open_then_final_build(path):
        f = real_open(path)
        if not calls:  # the sweep's final view lands between the open and the reads
            subprocess.run([ABLATE, "view", out], check=True, capture_output=True)
        calls.append(path)
        return f

    L._open = open_then_final_build
    try:
        sw, warned = load_quiet(out)
    finally:
        L._open = real_open
    check(not warned and not sw.unavailable, "loader read the final file again: %r" % warned)
    check(sw.steps.groupby("run").size().to_dict() == ROWS["steps"], "rows after the reload")
    check("view" not in sw.attrs, "the Sweep is the final build's")


def main():
    exe = sys.argv[1]
    # segments are fsynced: on a tmpfs the fixtures take a fraction of a second, not seconds
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="ablate-live-gaps-", dir=shm)
    try:
        for name, fn in [("intact", test_intact), ("missing", test_missing),
                         ("runs_missing", test_runs_missing), ("repacked", test_repacked),
                         ("open_file_limit", test_open_file_limit),
                         ("stale_generation", test_stale_generation),
                         ("handle_after_final_build", test_handle_after_final_build),
                         ("replaced_while_loading", test_replaced_while_loading)]:
            before = len(failures)
            try:
                fn(exe, tmp)
            except Exception as e:  # noqa: BLE001 (a missing column, attribute: a failure)
                check(False, "%s: %s: %s" % (name, type(e).__name__, e))
            print("%s: %s" % (name, "ok" if len(failures) == before else "FAILED"),
                  file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("test_live_gaps.py: %d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("test_live_gaps.py: all checks passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
