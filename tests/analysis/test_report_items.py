"""ablate-report on what trying it found (issue 19, items 1, 3, 4, 7, 8, 9): figures that one
blown-up configuration cannot flatten (robust y-limits, --log-y, --only/--exclude), token
axis labels that do not run together, the verdict table on the terminal and as --json,
provenance values without trailing blanks, the curves as a long-form CSV, the forest
plot's intervals at the Holm level of each verdict, and a grid's baseline found from the
base's preset defaults."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis import figures as F  # noqa: E402

FILES = {}
BLOWN = "activation=gelu/lr=3e-3"


def sweep():
    if "page" not in FILES:
        FILES["page"] = W.page_sweep(FILES["dir"])
    return FILES["page"]


def report(*extra):
    """ablate-report on the test sweep into rep-<n>; (dir, stdout, stderr)."""
    d = os.path.join(FILES["dir"], "rep-%d" % len(FILES))
    FILES[d] = True
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        sweep(), "-o", d] + list(extra), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return d, p.stdout, p.stderr


def blown_up():
    """The test sweep with one configuration's validation loss blown up to 13,000 after
    its first evaluation (as lr 5 without clipping does)."""
    sw = aa.load(sweep())
    ev = sw.evals
    hit = (ev["config"] == BLOWN) & (ev["step"] > ev["step"].min())
    assert hit.any()
    ev.loc[hit, "val_loss"] = 13000.0
    return sw


def test_robust_limits():
    """Item 1: the other configurations' curves stay readable (the y range ends near their
    losses, not at 13,000); --log-y draws a log scale; --exclude/--only leave
    configurations out of the figures."""
    from ablate_analysis.report import select_configs
    sw = blown_up()
    order = list(sw.runs["config"].drop_duplicates())
    fig = F.val_loss_figure(sw, order)
    top = fig.axes[0].get_ylim()[1]
    others = sw.evals[sw.evals["config"] != BLOWN]["val_loss"].max()
    assert top < 2 * others, "y range up to %g: the blown-up curve flattens the others" % top
    fig = F.val_loss_figure(sw, order, log_y=True)
    assert fig.axes[0].get_yscale() == "log"
    assert select_configs(order, exclude=["*gelu/lr=3e-3"]) == [c for c in order if c != BLOWN]
    assert select_configs(order, only=["activation=relu/*"]) == \
        [c for c in order if c.startswith("activation=relu/")]
    d, _, _ = report("--exclude", BLOWN, "--log-y")
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    assert "3 of 4 configurations drawn (--only/--exclude)" in md, md
    assert os.path.getsize(os.path.join(d, "val_loss.png")) > 5000


def test_token_labels():
    """Item 3: at millions of tokens the tokens axis has few, short labels that do not
    overlap."""
    sw = aa.load(sweep())
    sw.evals["tokens"] = sw.evals["tokens"] * 1000.0  # ~ 1e6 .. 1e7 tokens
    fig = F.val_loss_figure(sw, list(sw.runs["config"].drop_duplicates()))
    ax = fig.axes[1]
    fig.canvas.draw()
    labels = [t for t in ax.get_xticklabels() if t.get_text()
              and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    texts = [t.get_text() for t in labels]
    assert labels and all(len(t) <= 6 for t in texts), texts
    boxes = sorted((t.get_window_extent().x0, t.get_window_extent().x1) for t in labels)
    for (a0, a1), (b0, b1) in zip(boxes, boxes[1:]):
        assert a1 < b0, "tick labels overlap: %s" % texts


def test_terminal_and_json():
    """Item 7: the verdict table on stdout; --json for scripts, equal to contrasts.csv."""
    d, out, err = report()
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert len(con) == 3
    lines = out.splitlines()
    assert lines[0].startswith("Baseline: "), out
    assert lines[1].split()[:2] == ["configuration", "baseline"], out
    for _, r in con.iterrows():
        row = next(ln for ln in lines if ln.startswith(r["config"] + " "))
        assert "%+.4f" % r["diff"] in row and r["verdict"] in row, (row, r)
    assert "report.md" in err and "report.html" in err, err
    d, out, _ = report("--json")
    j = json.loads(out)
    assert j["report"] == os.path.join(d, "report.md") and j["page"].endswith("report.html")
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert [c["config"] for c in j["contrasts"]] == list(con["config"])
    for c, (_, r) in zip(j["contrasts"], con.iterrows()):
        for k in ("diff", "lo", "hi", "p", "p_holm"):
            assert abs(c[k] - r[k]) <= 1e-12 * max(1, abs(r[k])), (k, c[k], r[k])
        assert c["verdict"] == r["verdict"]


def test_provenance_and_curves():
    """Items 7 and 8: provenance values without trailing blanks (`sets` ends in a newline
    in the file); curves.csv has every /steps and /evals value in long form."""
    d, _, _ = report()
    prov = pd.read_csv(os.path.join(d, "provenance.csv"), keep_default_na=False)
    sets = prov[prov["attribute"] == "sets"]["value"]
    assert list(sets) == ["sample.tokens=32"], list(sets)
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    assert "| sets | `sample.tokens=32` |" in md, [ln for ln in md.splitlines() if "sets" in ln]
    cur = pd.read_csv(os.path.join(d, "curves.csv"))
    sw = aa.load(sweep())
    assert list(cur.columns) == ["run", "name", "config", "seed", "step", "tokens", "time",
                                 "metric", "value"]
    want = {"loss": sw.steps, "lr": sw.steps, "grad_norm": sw.steps,
            "val_loss": sw.evals, "val_acc": sw.evals}
    assert sorted(cur["metric"].unique()) == sorted(want)
    for m, df in want.items():
        c = cur[cur["metric"] == m].sort_values(["run", "step"])
        r = df.sort_values(["run", "step"])
        assert len(c) == len(r), m
        assert np.allclose(c["value"].to_numpy(float), r[m].to_numpy(float), rtol=1e-6,
                           equal_nan=True), m
        assert (c["config"].to_numpy() == r["config"].to_numpy()).all(), m


def test_forest_levels():
    """Item 4: the forest plot's intervals are at the level each Holm verdict used
    (alpha / (m - j + 1) at step j), so an interval excludes 0 exactly when p is below
    its step's level, and every resolved verdict's interval excludes 0."""
    from scipy import stats as st
    sw = aa.load(sweep())
    from ablate_analysis import analyze as A
    con = A.contrasts(sw, A.baseline_map(sw)[0])
    # a family where Holm resolves some: p 0.001, 0.02, 0.04 (m = 3) from t with df 4
    df = 4.0
    ps = [0.001, 0.02, 0.04]
    fam = pd.DataFrame({"config": ["a", "b", "c"], "baseline": "base", "p": ps, "df": df,
                        "diff": [-0.1, -0.05, 0.03], "verdict": ["better", "better", "worse"]})
    t = [st.t.isf(p / 2, df) for p in ps]
    se = [abs(dv) / tv for dv, tv in zip(fam["diff"], t)]
    h95 = [st.t.ppf(0.975, df) * s for s in se]
    fam["lo"] = fam["diff"] - h95
    fam["hi"] = fam["diff"] + h95
    for c in (con, fam):
        iv = F.forest_intervals(c)
        order = np.argsort(c["p"].to_numpy(float), kind="stable")
        m = len(c)
        for j, i in enumerate(order):
            assert abs(iv["level"].iloc[i] - 0.05 / (m - j)) < 1e-15, (j, iv)
            lo, hi = iv["lo"].iloc[i], iv["hi"].iloc[i]
            excludes = lo > 0 or hi < 0
            assert excludes == (c["p"].iloc[i] < iv["level"].iloc[i]), (i, lo, hi, c["p"].iloc[i])
            assert lo < c["diff"].iloc[i] < hi
    iv = F.forest_intervals(fam)
    # 0.001 < 0.05/3, 0.02 < 0.05/2, 0.04 < 0.05: all three resolved, all exclude 0
    assert all((iv["lo"] > 0) | (iv["hi"] < 0)), iv
    # the 95% interval of the first contrast is narrower than its Holm-level one
    assert iv["hi"].iloc[0] - iv["lo"].iloc[0] > fam["hi"].iloc[0] - fam["lo"].iloc[0]
    assert F.forest(fam, os.path.join(FILES["dir"], "forest.png"))


def test_preset_baseline():
    """Item 9: a grid over a knob the spec's base leaves to its preset (study A: `preset:
    book`, grid model.n_head) finds its baseline from the resolved base: micro's 4 heads."""
    from ablate_analysis import analyze as A
    spec = C.write(os.path.join(FILES["dir"], "heads.yaml"),
                   C.micro_spec(C.corpus_path(), steps=20, seeds=(0, 1), eval_every=10,
                                stats_every=10, grid="  model.n_head: [2, 4]\n"))
    assert "n_head" not in spec.split("grid:")[0]
    out = os.path.join(FILES["dir"], "heads.h5")
    C.run(["run", spec, "-o", out, "--force"], expect_rc=0, tag="heads")
    sw = aa.load(out)
    bmap, why = A.baseline_map(sw)
    assert bmap == {"n_head=2": "n_head=4"}, (bmap, why)
    assert "preset's defaults" in why, why
    con = A.contrasts(sw, bmap)
    assert list(con["config"]) == ["n_head=2"] and np.isfinite(con["p"].iloc[0]), con
    # issue 16: the file says the resolved base (/base_config), preset defaults included,
    # so the baseline is found without reading the spec's YAML or running ablate
    assert sw.base_config["model.n_head"] == 4 and sw.base_config["train.steps"] == 20, \
        sw.base_config
    bare = aa.load(out)
    bare.spec = ""
    bmap, why = A.baseline_map(bare)
    assert bmap == {"n_head=2": "n_head=4"}, (bmap, why)


def main():
    W.main_in_workdir("analysis-items", FILES, [
        ("robust_limits", test_robust_limits),
        ("token_labels", test_token_labels),
        ("terminal_and_json", test_terminal_and_json),
        ("provenance_and_curves", test_provenance_and_curves),
        ("forest_levels", test_forest_levels),
        ("preset_baseline", test_preset_baseline),
    ])


if __name__ == "__main__":
    main()
