"""Reads the HDF5 view written by `test_h5view --fixture DIR` with h5py and pandas, the
way analysis code does, and checks the values (same formulas as tests/test_h5view.c).

Usage: python3 test_h5view.py PATH/TO/test_h5view
"""
import math
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "analysis"))

SPEC = "sweep:\n  name: fixture\nbase:\n  model.n_head: 4\n"
NAMES = ["baseline", "heads=2", "lr=0.01", "pending", "diverge"]
STATUS = ["done", "done", "running", "pending", "failed"]


def f_loss(run, step, attempt):
    return 5.0 - step / 1000.0 + run / 8.0 + (attempt - 1) * 100.0


TYPE_NAMES = {"i4": "int32", "i8": "int64", "u8": "uint64", "f8": "float64", "b1": "bool"}


def type_name(dt):
    """The /schema type name of a column's numpy dtype."""
    if dt.kind == "O":
        return "str (UTF-8)"
    if dt.kind == "S":
        return "S%d" % dt.itemsize
    return TYPE_NAMES[dt.str[1:]]


def check_schema(f, check, what):
    """/schema lists exactly the columns of every table in the file, in order, with the type
    the table has and the units and description of its attributes."""
    check("schema" in f, "%s: /schema exists" % what)
    if "schema" not in f:
        return
    rows = [tuple(v.decode() for v in r) for r in f["schema"][:]]
    listed = {}
    for table, column, typ, units, desc in rows:
        listed.setdefault(table, []).append((column, typ, units, desc))
    tables = [n for n in f if isinstance(f[n], h5py.Dataset) and f[n].dtype.names]
    check(sorted(listed) == sorted(tables), "%s: /schema tables %s != %s" % (what, sorted(listed), sorted(tables)))
    for n in tables:
        d = f[n]
        want = [(c, type_name(d.dtype[c]), d.attrs.get("units." + c, ""), d.attrs.get("doc." + c, ""))
                for c in d.dtype.names]
        check(listed.get(n) == want, "%s: /schema rows of /%s: %r != %r" % (what, n, listed.get(n), want))


def check_declared(path, tmp, check):
    """What the loader needs of /runs and of absent tables is in the file (the
    `knobs` and `unfinished` attributes of /runs, /schema), so that a new knob section, a
    new run status or a new column needs no Python edit."""
    import ablate_analysis as aa
    with h5py.File(path, "r") as f:
        runs = f["runs"]
        knobs = [k for k in runs.attrs["knobs"].split("\n") if k]
        check("model.n_head" in knobs and "save_weights" in knobs, "knobs attribute: %r" % knobs)
        check(all(k in runs.dtype.names for k in knobs), "knobs are /runs columns")
        check(not {"name", "status", "params", "final_val_loss"} & set(knobs), "knobs only")
        check(runs.attrs["unfinished"] == "pending\nrunning\ninterrupted\n",
              "unfinished attribute: %r" % runs.attrs["unfinished"])
        samples = [r["column"].decode() for r in f["schema"][()] if r["table"] == b"samples"]
    sw = aa.load(path)
    check(sw.knobs == knobs, "loader's knobs from the attribute")
    # a copy with a knob of a section the loader has never heard of, a run status of its
    # own (listed as unfinished), and no /samples (its columns are taken from /schema)
    cp = os.path.join(tmp, "declared.h5")
    shutil.copy(path, cp)
    with h5py.File(cp, "r+") as f:
        old = f["runs"]
        attrs = dict(old.attrs)
        rows = old[()]
        dt = np.dtype([(c, rows.dtype.fields[c][0]) for c in rows.dtype.names]
                      + [("eval.every", "<i4")])
        new = np.zeros(len(rows), dtype=dt)
        for c in rows.dtype.names:
            new[c] = rows[c]
        new["eval.every"] = 7
        new["status"] = [b"queued" if s in (b"pending", b"running") else s for s in rows["status"]]
        del f["runs"]
        d = f.create_dataset("runs", data=new)
        for k, v in attrs.items():
            d.attrs[k] = v
        d.attrs["knobs"] = attrs["knobs"] + "eval.every\n"
        d.attrs["unfinished"] = "queued\n"
        f.attrs["status"] = "complete"
        del f["samples"]
    sw = aa.load(cp)
    check("eval.every" in sw.knobs, "a knob of a new section is a knob: %r" % sw.knobs)
    check(sw.partial and sw.unfinished == ("queued",), "a status the file lists as unfinished")
    check(list(sw.samples.columns)[:len(samples)] == samples and "ids" in samples,
          "absent /samples has /schema's columns: %r" % list(sw.samples.columns))


def main():
    exe = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ablate-h5view-py-")
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("CHECK failed:", what, file=sys.stderr)

    try:
        subprocess.run([exe, "--fixture", tmp], check=True)
        path = os.path.join(tmp, "out.h5")
        with h5py.File(path, "r") as f:
            a = f.attrs
            check(a["ablate_schema_version"] == 2, "schema version")
            check(a["status"] == "running", "status attr: %r" % a["status"])
            check(a["ranks"] == 3, "ranks")
            check(a["hostnames"] == "node-a,node-b,node-c", "hostnames")
            check(a["start_time"] == "2024-05-01T12:00:00Z", "start_time")
            check(a["end_time"] == "", "end_time empty while running")
            check(f["spec"][()].decode() == SPEC, "spec text")
            check(bytes(f["vocab"][:]) == b"\n !abc", "vocab (bytes)")
            check(f["steps"].attrs["units.loss"] == "nats/token", "units attribute")
            check("description" in f["runs"].attrs, "description attribute")

            # The runs table straight into pandas.
            runs = pd.DataFrame(f["runs"][:])
            check(len(runs) == 5, "5 runs")
            check(list(runs["index"]) == [0, 1, 2, 3, 4], "index column")
            check([n.decode() for n in runs["name"]] == NAMES, "names")
            check([s.decode() for s in runs["status"]] == STATUS, "statuses %r" % list(runs["status"]))
            check(runs["id"][0] == b"abcdef0000000000", "id")
            check(list(runs["seed"]) == [100, 101, 102, 103, 104], "seeds")
            check(list(runs["model.n_head"]) == [4, 2, 4, 4, 4], "knob column model.n_head")
            check(runs["model.activation"][1] == b"swiglu", "enum knob as string")
            check(runs["model.qk_norm"].dtype == np.bool_, "bool knob dtype %s" % runs["model.qk_norm"].dtype)
            check(list(runs["model.qk_norm"]) == [False, False, False, False, True], "bool knob")
            check(runs["final_val_loss"][0] == f_loss(0, 50, 1) + 0.125, "final loss run 0")
            check(runs["final_val_loss"][1] == f_loss(1, 50, 2) + 0.125, "final loss run 1")
            check(runs["final_val_loss"][2:].isna().all(), "NaN final loss for unfinished runs")
            check(list(runs["attempts"]) == [1, 2, 1, 0, 1], "attempts")
            check(runs["message"][4] == b"loss is NaN at step 3", "message")
            check(runs["host"][1] == b"node-a" and runs["rank"][3] == -1, "host/rank")
            done = runs[runs["status"] == b"done"]
            check(len(done) == 2, "filter on status")

            # Metric tables.
            steps = pd.DataFrame(f["steps"][:])
            check(len(steps) == 110, "110 step rows")
            check(steps.groupby("run").size().to_dict() == {0: 50, 1: 50, 2: 7, 4: 3}, "rows per run")
            attempt = np.where(steps["run"] == 1, 2, 1)
            want = 5.0 - steps["step"] / 1000.0 + steps["run"] / 8.0 + (attempt - 1) * 100.0
            check((steps["loss"] == want).all(), "loss values (run 1 from its 2nd attempt)")
            check((steps["tokens"] == steps["step"] * 64).all(), "tokens")
            check((steps["time"] == steps["step"] * 0.25).all(), "time")
            curves = steps.merge(runs[["index", "name"]], left_on="run", right_on="index")
            check(len(curves) == 110 and curves["name"].iloc[0] == b"baseline", "merge with runs")
            check(len(f["evals"]) == 10 and len(f["acts"]) == 8 and len(f["attn"]) == 32, "row counts")
            attn = pd.DataFrame(f["attn"][:])
            last = attn[(attn.run == 1) & (attn.step == 50) & (attn.layer == 1)]
            check(list(last["entropy"]) == [1 + h / 4.0 + 0.05 for h in range(4)], "attn entropy")
            samples = pd.DataFrame(f["samples"][:])
            check(samples["text"][0].decode() == "run 0 greedy\nthe king", "sample text")
            check(samples["text"][3].decode() == 'run 1 sampled: "quoted" \u00e9', "utf-8 sample text")
            check(list(samples["degenerate"]) == [True, False, True, False], "degenerate flags")
            check(list(samples["kind"]) == [b"greedy", b"temperature"] * 2, "sample kinds")
            check("plan_text" not in f, "no /plan_text in schema 2")
            check(f["runs"].attrs["units.train.lr"] == "1", "units on knob columns")
            check(f["runs"].attrs["units.model.context"] == "tokens", "units on knob columns")
            check(math.isnan(runs["flops_per_token"][3]), "NaN flops for the pending run")
            check_schema(f, check, "full view")
        check_declared(path, tmp, check)
        live = os.path.join(tmp, "live")
        os.mkdir(live)
        subprocess.run([exe, "--live-fixture", live, "3"], check=True)
        with h5py.File(os.path.join(live, "out.h5"), "r") as lf:
            check(lf.attrs["view"] == "live", "live fixture is a live view")
            check("view_blocks" in lf, "live view has /view_blocks")
            check_schema(lf, check, "live view")
        if shutil.which("h5dump"):
            r = subprocess.run(["h5dump", "-H", path], capture_output=True)
            check(r.returncode == 0, "h5dump -H")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("test_h5view.py: %d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("test_h5view.py: all checks passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
