"""ablate-report on a sweep that crosses model.init_seed with train.data_seed: a
"Seed-to-seed spread" section splits each family's spread into the initialisation's, the
data order's and the residual, equal to a two-way analysis of variance recomputed here from
/runs with h5py and numpy (independently of analyze.seed_variance); seed_variance.csv holds
it. A sweep that does not cross them has no such section.
Run one case alone: test_report_seeds.py NAME."""
import math
import os
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
SECTION = "## Seed-to-seed spread: initialisation and data order"


def crossed(d):
    if "crossed" not in FILES:
        grid = ("  model.init_seed: [0, 1, 2]\n"
                "  train.data_seed: [0, 1, 2]\n"
                "  model.activation: [relu, gelu]\n")
        spec = C.write(os.path.join(d, "crossed.yaml"),
                       C.micro_spec(C.corpus_path(), steps=30, seeds=(0,), grid=grid,
                                    eval_every=0, stats_every=30, sample_tokens=4))
        out = os.path.join(d, "crossed.h5")
        C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="crossed")
        FILES["crossed"] = out
    return FILES["crossed"]


def report(out, d):
    p = subprocess.run([PY, W.REPORT, out, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return open(os.path.join(d, "report.md")).read()


def anova(y):
    """Variance components of a two-way layout without replication, as in any textbook:
    sums of squares from the row, column and grand means."""
    r, c = y.shape
    g = y.mean()
    ss_r = c * ((y.mean(1) - g) ** 2).sum()
    ss_c = r * ((y.mean(0) - g) ** 2).sum()
    ss_e = ((y - g) ** 2).sum() - ss_r - ss_c
    ms_e = ss_e / ((r - 1) * (c - 1))
    return (max(0.0, (ss_r / (r - 1) - ms_e) / c), max(0.0, (ss_c / (c - 1) - ms_e) / r), ms_e)


def test_crossed():
    d = FILES["dir"]
    out = crossed(d)
    md = report(out, os.path.join(d, "rep"))
    assert SECTION in md, md[:2000]
    t = pd.read_csv(os.path.join(d, "rep", "seed_variance.csv"))
    assert sorted(t["family"]) == ["activation=gelu", "activation=relu"], t["family"].tolist()
    with h5py.File(out, "r") as f:
        runs = f["runs"][()]
    for act in ("relu", "gelu"):
        y = np.full((3, 3), np.nan)
        for row in runs:
            if C._py(row["model.activation"]) == act:
                y[int(row["model.init_seed"]), int(row["train.data_seed"])] = row["final_val_loss"]
        v_i, v_d, v_e = anova(y)
        got = t[t["family"] == "activation=" + act].iloc[0]
        assert got["runs"] == 9 and got["init_values"] == 3 and got["data_values"] == 3, got
        for name, want in (("sd_init", v_i), ("sd_data", v_d), ("sd_residual", v_e)):
            assert math.isclose(got[name], math.sqrt(want), rel_tol=1e-9, abs_tol=1e-12), (
                act, name, got[name], math.sqrt(want))
        assert math.isclose(got["share_init"] + got["share_data"] + got["share_residual"], 1.0)


def test_not_crossed():
    d = FILES["dir"]
    md = report(W.fixture("page", d), os.path.join(d, "rep-page"))
    assert SECTION not in md
    assert not os.path.exists(os.path.join(d, "rep-page", "seed_variance.csv"))


if __name__ == "__main__":
    W.main_in_workdir("report-seeds", FILES, [("crossed", test_crossed),
                                              ("not_crossed", test_not_crossed)])
