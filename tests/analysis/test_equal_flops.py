"""Contrasts at equal training FLOPs (analysis/ablate_analysis/equal_flops.py): each run's
validation loss interpolated in cumulative training FLOPs (evaluation tokens x the run's
FLOPs per token) at common values, paired by seed, beside the end-of-run difference.
hand: a two-seed contrast worked out by hand. report: ablate-report on the committed
variants sweep has the section and contrasts_equal_flops.csv, whose ctx8 row at 100% is
recomputed here from the file with h5py and numpy alone.
Run one case alone: test_equal_flops.py NAME."""
import math
import os
import sys

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
from ablate_analysis import equal_flops as EF  # noqa: E402

FILES = {}
SECTION = "## Against the baseline at equal FLOPs"


def test_hand():
    # baseline A: 10 FLOPs/token, evaluations at 100, 200, 300 tokens = 1000, 2000, 3000
    # FLOPs; configuration B: 20 FLOPs/token, evaluations at 100, 200 tokens = 2000, 4000.
    runs = pd.DataFrame({"index": [0, 1, 2, 3], "config": ["A", "A", "B", "B"],
                         "seed": [1, 2, 1, 2], "flops_per_token": [10.0, 10.0, 20.0, 20.0],
                         "final_val_loss": [1.5, 1.7, 1.0, 1.2]})
    evals = pd.DataFrame({"run": [0, 0, 0, 1, 1, 1, 2, 2, 3, 3],
                          "tokens": [100, 200, 300, 100, 200, 300, 100, 200, 100, 200],
                          "val_loss": [3.0, 2.0, 1.5, 3.2, 2.2, 1.7, 2.5, 1.0, 2.9, 1.2]})
    t = EF.table(runs, evals, {"B": "A"}, fractions=(0.25, 2 / 3, 1.0))
    # every run reaches 3000 FLOPs (A's last evaluation); 750 is before B's first (2000)
    assert list(t["fraction"]) == [2 / 3, 1.0], t
    r = t.iloc[1]
    assert r["flops"] == 3000 and r["n"] == 2 and r["split"] == "validation"
    # at 3000: A 1.5, 1.7; B halfway from 2000 to 4000: 2.5 -> 1.0 gives 1.75, 2.9 -> 1.2
    # gives 2.05; differences 0.25, 0.35: mean 0.30, sd 0.1/sqrt(2), se 0.05, t 6 on 1 df
    assert math.isclose(r["loss_baseline"], 1.6) and math.isclose(r["loss_config"], 1.9)
    assert math.isclose(r["diff"], 0.30), r["diff"]
    h = 12.706204736174698 * 0.05  # t(0.975, 1) x se
    assert math.isclose(r["lo"], 0.30 - h, rel_tol=1e-9), r["lo"]
    assert math.isclose(r["hi"], 0.30 + h, rel_tol=1e-9), r["hi"]
    assert math.isclose(r["p"], 2 * (0.5 - math.atan(6) / math.pi), rel_tol=1e-9), r["p"]
    # at 2000: both evaluated there exactly: A 2.0, 2.2; B 2.5, 2.9: differences 0.5, 0.7
    r = t.iloc[0]
    assert math.isclose(r["flops"], 2000) and math.isclose(r["diff"], 0.6), r
    # beside it, the end of the runs: B 1.0, 1.2 against A 1.5, 1.7, whatever they spent
    assert math.isclose(r["end_diff"], -0.5) and (t["end_diff"] == r["end_diff"]).all()
    # one seed only in the baseline: no pair, no row; a run without FLOPs per token: none
    assert not len(EF.table(runs[runs["index"] != 2].assign(seed=[1, 2, 3]), evals,
                            {"B": "A"}))
    assert not len(EF.table(runs.assign(flops_per_token=[10.0, 10.0, -1.0, -1.0]), evals,
                            {"B": "A"}))


def test_report():
    d = FILES["dir"]
    path = W.fixture("variants", d)
    out = os.path.join(d, "rep")
    rc, err = W.report(path, out)
    assert rc == 0, err
    md = open(os.path.join(out, "report.md")).read()
    assert SECTION in md, md[:3000]
    sec = md[md.index(SECTION):]
    sec = sec[:sec.index("\n## ", 1)]
    assert "Validation split." in sec and "| validation |" in sec, sec
    t = pd.read_csv(os.path.join(out, "contrasts_equal_flops.csv"))
    assert set(t["config"]) == {"gelu", "ctx8"}, t["config"].tolist()
    # the ctx8 row at 100%, from the file alone
    with h5py.File(path, "r") as f:
        runs, ev = f["runs"][()], f["evals"][()]
    name = {i: r["name"].decode() for i, r in enumerate(runs)}
    curve = {}
    for i, r in enumerate(runs):
        if r["status"] != b"done":
            continue
        e = ev[ev["run"] == r["index"]]
        e = e[np.argsort(e["tokens"])]
        curve[name[i]] = (e["tokens"] * r["flops_per_token"], e["val_loss"])
    pairs = [("baseline/seed%d" % s, "ctx8/seed%d" % s) for s in W.SEEDS]
    top = min(curve[n][0][-1] for p in pairs for n in p)
    diffs = [np.interp(top, *curve[c]) - np.interp(top, *curve[b]) for b, c in pairs]
    row = t[(t["config"] == "ctx8") & (t["fraction"] == 1.0)].iloc[0]
    assert math.isclose(row["flops"], top, rel_tol=1e-12), (row["flops"], top)
    assert row["n"] == 3 and math.isclose(row["diff"], np.mean(diffs), rel_tol=1e-9,
                                          abs_tol=1e-12), (row["diff"], diffs)
    finals = {r["name"].decode(): r["final_val_loss"] for r in runs}
    end = np.mean([finals[c] - finals[b] for b, c in pairs])
    assert math.isclose(row["end_diff"], end, rel_tol=1e-9, abs_tol=1e-12)
    # the cell shows the interpolated difference, signed, beside the end's
    assert ("| ctx8 | baseline | validation |" in sec), sec


if __name__ == "__main__":
    W.main_in_workdir("equal-flops", FILES, [("hand", test_hand), ("report", test_report)])
