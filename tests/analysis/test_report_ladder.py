"""A ladder: sweep end to end (docs/spec.md "ladder", docs/analysis.md "Effects against
scale"), on a tiny ladder of the micro family (3 rungs, baseline and rope, 2 seeds, a few
steps each):

  plan    each rung trains ceil(tokens_per_param x non-embedding parameters / tokens a step)
          steps (non-embedding parameters of the micro block, 12 d_model^2 per layer, counted
          here independently), the same tokens with either position encoding, and
          `ablate plan` prints the rungs' table;
  report  every run trains its rung's tokens; the report has "Effects against scale" with a row per rung and a trend row whose
          slope is the weighted least squares of its own per-rung table (numpy by hand), the
          value beyond the ladder labelled extrapolation;
  study_spec  sweeps/micro-ladder-rope.yaml plans the runs and tokens its header states.
Run one case alone: test_report_ladder.py NAME.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402  (sets sys.path for ablate_analysis and common)
import common as C  # noqa: E402

RUNGS = ((16, 1), (24, 1), (32, 2))  # (d_model, n_layer)
TPP = 0.25
BATCH = 8
FILES = {}


def spec_text():
    s = C.micro_spec(C.corpus_path(), steps=1, seeds=(0, 1), eval_every=0, stats_every=0,
                     batch_size=BATCH, sample_tokens=0,
                     variants="  baseline: {}\n  rope: {model.position: rope}\n")
    s = s.replace("steps: 1, ", "")
    ladder = ("ladder:\n  rungs: {model.d_model: [%s], model.n_layer: [%s]}\n"
              "  tokens_per_param: %g\n" % (", ".join(str(d) for d, _ in RUNGS),
                                            ", ".join(str(l) for _, l in RUNGS), TPP))
    return s.replace("variants:", ladder + "variants:")


def spec():
    if "spec" not in FILES:
        FILES["spec"] = C.write(os.path.join(FILES["dir"], "ladder.yaml"), spec_text())
    return FILES["spec"]


def test_plan():
    runs = C.plan_json(spec())
    assert len(runs) == 2 * len(RUNGS) * 2, len(runs)
    by = {}
    for r in runs:
        cfg = r["config"]
        d, l = cfg["model.d_model"], cfg["model.n_layer"]
        per_step = BATCH * cfg["model.context"]
        want = math.ceil(TPP * 12 * d * d * l / per_step) * per_step
        assert r["tokens"] == want, (r["name"], r["tokens"], want)
        assert cfg["train.tokens_per_param"] == TPP and cfg["train.steps"] == 0, cfg
        by.setdefault((d, l), {})[cfg["model.position"]] = r
    assert sorted(by) == sorted(RUNGS), by.keys()
    for rung, pair in by.items():  # the rung's tokens, whatever the position encoding
        assert pair["rope"]["tokens"] == pair["learned"]["tokens"], rung
        assert pair["rope"]["params"] < pair["learned"]["params"], rung
    rc, out, err = C.run(["plan", spec()], expect_rc=0)
    assert "ladder: 3 rungs of model.d_model, model.n_layer; train.tokens_per_param 0.25" in out, \
        out
    for i, (d, l) in enumerate(RUNGS):
        line = [x for x in out.splitlines() if x.startswith("%-5d d_model=%d n_layer=%d" %
                                                           (i + 1, d, l))]
        assert len(line) == 1, out
        assert line[0].split()[3] == str(12 * d * d * l), line  # non-embedding parameters


def sweep():
    if "h5" not in FILES:
        out = os.path.join(FILES["dir"], "ladder.h5")
        C.run(["run", spec(), "-o", out, "--force"], expect_rc=0, timeout=600, tag="ladder")
        FILES["h5"] = out
    return FILES["h5"]


def test_report():
    import pandas as pd
    from ablate_analysis.load import load
    # each run trained exactly the tokens its rung planned
    planned = {r["name"]: r["tokens"] for r in C.plan_json(spec())}
    runs = load(sweep()).runs
    assert len(runs) == len(planned) and (runs["status"] == "done").all(), runs
    for _, r in runs.iterrows():
        assert int(r["tokens"]) == planned[r["name"]], (r["name"], r["tokens"])
    outdir = os.path.join(FILES["dir"], "report")
    rc, err = sweeps.report(sweep(), outdir)
    assert rc == 0, err
    md = open(os.path.join(outdir, "report.md")).read()
    assert "## Effects against scale" in md, md[:3000]
    sec = md.split("## Effects against scale", 1)[1].split("\n## ", 1)[0]
    assert "(extrapolation)" in sec and "extrapolation: fit at 10x" in sec, sec
    rungs = pd.read_csv(os.path.join(outdir, "ladder_rungs.csv"))
    trends = pd.read_csv(os.path.join(outdir, "ladder_trends.csv"))
    assert list(rungs["rung"]) == [1, 2, 3], rungs
    assert set(rungs["contrast"]) == {"rope vs baseline"}, rungs
    assert list(rungs["rung_values"]) == ["d_model=%d n_layer=%d" % r for r in RUNGS], rungs
    assert (rungs["n"] == 2).all() and (rungs["method"] == "paired").all(), rungs
    assert rungs["flops"].is_monotonic_increasing, rungs
    for _, r in rungs.iterrows():
        assert "| rope vs baseline | %d | %s |" % (r["rung"], r["rung_values"]) in sec, sec
    assert len(trends) == 1, trends
    t = trends.iloc[0]
    assert t["verdict"] in ("stable", "grows", "shrinks", "changes sign"), t
    # the trend is the weighted least squares of the per-rung table, by hand
    x, y, se = (rungs[c].to_numpy(float) for c in ("log10_flops", "diff", "se"))
    X = np.column_stack([np.ones_like(x), x])
    W = np.diag(1 / se ** 2)
    cov = np.linalg.inv(X.T @ W @ X)
    beta = cov @ X.T @ W @ y
    assert abs(t["slope"] - beta[1]) <= 1e-6 * max(1, abs(beta[1])), (t["slope"], beta)
    assert abs(t["se_slope"] - math.sqrt(cov[1, 1])) <= 1e-6 * math.sqrt(cov[1, 1])
    # its interval: t on the Welch-Satterthwaite df of the slope's combination of the rungs
    from scipy import stats as st
    w = 1 / se ** 2
    xm = np.sum(w * x) / np.sum(w)
    v = (w * (x - xm) * cov[1, 1]) ** 2 * se ** 2
    nu = v.sum() ** 2 / np.sum(v ** 2 / rungs["df"].to_numpy(float))
    h = st.t.ppf(0.975, nu) * math.sqrt(cov[1, 1])
    assert abs(t["slope_lo"] - (beta[1] - h)) <= 1e-6 * max(1, h), (t["slope_lo"], beta[1] - h)
    assert t["extrapolated_flops"] > rungs["flops"].max(), t


def test_study_spec():
    """sweeps/micro-ladder-rope.yaml plans, with the runs and the tokens per rung its
    header states (tokens do not depend on the data: non-embedding parameters)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "sweeps", "micro-ladder-rope.yaml")
    header = [l for l in open(path) if l.startswith("#")]
    stated = {}
    for l in header:
        f = l[1:].split()
        if len(f) > 5 and f[0] in ("1", "2", "3") and f[1].startswith("d_model="):
            stated[(f[1], f[2])] = int(f[5].replace(",", ""))
    assert len(stated) == 3, header
    assert any("= 30 runs" in l for l in header), header
    runs = C.plan_json(path, env={"ABLATE_DATA": C.corpus_path()})
    assert len(runs) == 30, len(runs)
    for r in runs:
        c = r["config"]
        key = ("d_model=%d" % c["model.d_model"], "n_layer=%d" % c["model.n_layer"])
        assert r["tokens"] == stated[key], (r["name"], r["tokens"], stated)


if __name__ == "__main__":
    sweeps.main_in_workdir("ladder", FILES, [("plan", test_plan), ("report", test_report),
                                             ("study_spec", test_study_spec)])
