"""ablate-report on what trying it found: figures that one
blown-up configuration cannot flatten (robust y-limits, --log-y, --only/--exclude), token
axis labels that do not run together, the verdict table on the terminal and as --json,
provenance values without trailing blanks, the curves as a long-form CSV, the forest
plot's intervals at the Holm level of each verdict, a grid's baseline found from the
base's preset defaults; runs flagged unstable by the C rule left out with "(k of n
excluded)" and the instability rate per configuration, --family, two sweeps compared,
greedy samples' repetition kinds and the near-zero fraction."""
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
    """The test sweep: tests/analysis/sweeps.py's page sweep, its committed file."""
    return W.fixture("page", FILES["dir"])


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
    # the file says the resolved base (/base_config), preset defaults included,
    # so the baseline is found without reading the spec's YAML or running ablate
    assert sw.base_config["model.n_head"] == 4 and sw.base_config["train.steps"] == 20, \
        sw.base_config
    bare = aa.load(out)
    bare.spec = ""
    bmap, why = A.baseline_map(bare)
    assert bmap == {"n_head=2": "n_head=4"}, (bmap, why)


def flag_unstable(src, dst, config, seed, step=3, loss=9.875):
    """A copy of sweep file src with the run config/seed<seed> flagged unstable in /runs as
    run_health.c records it (instability above_uniform, its step and loss), its status
    left `done`: a run that blew up and came back (tests/e2e/test_run_health.py makes a
    real one; this keeps every other number of the test sweep)."""
    import h5py
    import shutil
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        runs = f["runs"][()]
        names = [n.decode() if isinstance(n, bytes) else n for n in runs["name"]]
        i = names.index("%s/seed%d" % (config, seed))
        row = f["runs"][i]
        row["instability"] = b"above_uniform"
        row["unstable_step"] = step
        row["unstable_loss"] = loss
        f["runs"][i] = row
    return i


def test_unstable_excluded():
    """Item 2 (the report's side): a done run the C rule flagged (/runs instability) is
    listed, left out of every statistic, and each cell that left it out says "(k of n
    excluded)"; the instability rate per configuration is in the verdict table (report.md,
    contrasts.csv, the terminal, the page). The flag is the file's, not re-derived."""
    from ablate_analysis import analyze as A
    path = os.path.join(FILES["dir"], "unstable.h5")
    flag_unstable(sweep(), path, BLOWN, 1)
    sw = aa.load(path)
    why = A.run_exclusions(sw)
    flagged = sw.runs[sw.runs["instability"] != "none"]["name"].tolist()
    assert flagged == [BLOWN + "/seed1"], flagged
    assert list(sw.runs[why == "unstable"]["name"]) == flagged
    assert (why[sw.runs["name"] != flagged[0]] == "").all(), why
    d = os.path.join(FILES["dir"], "rep-unstable")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        path, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    over = md.split("### Failed, diverged and unstable runs")[1].split("## Per configuration")[0]
    assert "| %s/seed1 | done | 40 | — | above_uniform from step 3 (loss 9.88) |" % BLOWN \
        in over, over
    # the statistics: the flagged run's loss enters none of them
    import h5py
    with h5py.File(path, "r") as f:
        raw = f["runs"][()]
    loss = {n.decode() if isinstance(n, bytes) else n: v
            for n, v in zip(raw["name"], raw["final_val_loss"])}
    # round_trip: the default parser may read a float 1 ulp off what the file wrote
    cfg = pd.read_csv(os.path.join(d, "configs.csv"),
                      float_precision="round_trip").set_index("config")
    r = cfg.loc[BLOWN]
    assert (r["n"], r["excluded"], r["ended"], r["unstable"], r["trained"]) == (1, 1, 2, 1, 2), r
    assert r["instability_rate"] == 0.5 and r["val_loss_mean"] == loss[BLOWN + "/seed0"], r
    assert (cfg.drop(BLOWN)["excluded"] == 0).all() and (cfg.drop(BLOWN)["n"] == 2).all()
    row = next(ln for ln in md.split("## Per configuration")[1].splitlines()
               if ln.startswith("| %s |" % BLOWN))
    assert "(1 of 2 excluded)" in row and "| 1 of 2 |" in row, row
    con = pd.read_csv(os.path.join(d, "contrasts.csv")).set_index("config")
    c = con.loc[BLOWN]
    base = c["baseline"]
    want = loss[BLOWN + "/seed0"] - (loss[base + "/seed0"] + loss[base + "/seed1"]) / 2
    assert c["method"] == "welch" and abs(c["diff"] - want) < 1e-12, (c, want)
    assert (c["excluded"], c["ended"], c["instability_rate"],
            c["instability_rate_baseline"]) == (1, 4, 0.5, 0.0), c
    assert (con.drop(BLOWN)["excluded"] == 0).all()
    line = next(ln for ln in md.split("## Against the baseline")[1].splitlines()
                if ln.startswith("| %s |" % BLOWN))
    assert "%+.4f (1 of 4 excluded)" % want in line and "1 of 2; baseline 0 of 2" in line, line
    others = [ln for ln in md.split("## Against the baseline")[1].split("##")[0].splitlines()
              if ln.startswith("| activation=") and not ln.startswith("| %s |" % BLOWN)]
    assert len(others) == 2 and not any("excluded)" in ln for ln in others), others
    term = next(ln for ln in p.stdout.splitlines() if ln.startswith(BLOWN + " "))
    assert "(1 of 4 excluded)" in term and "1 of 2; baseline 0 of 2" in term, p.stdout
    if os.path.exists(os.path.join(d, "report.html")):
        import re as _re
        with open(os.path.join(d, "report.html")) as f:
            html = f.read()
        m = _re.search(r'<script id="data" type="application/json">(.*?)</script>', html, _re.S)
        data = json.loads(m.group(1).replace("<\\/", "</"))
        v = next(t for t in data["tables"] if t["id"] == "verdict")
        keys = [k["key"] for k in v["columns"]]
        rows = {r[keys.index("config")]: r for r in v["rows"]}
        assert rows[BLOWN][keys.index("excluded_text")] == "1 of 4", rows[BLOWN]
        assert rows[BLOWN][keys.index("instability_rate")] == 0.5


def test_family():
    """Item 7: --family chooses the Holm family (the contrasts of the configurations it
    matches; Holm over those alone), says so, refuses patterns that match nothing, and
    never re-adjusts a sweep that pre-declared its family (/contrasts)."""
    import h5py
    import shutil
    from ablate_analysis import stats as S
    d, out, _ = report("--family", "activation=gelu/*")
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert list(con["config"]) == ["activation=gelu/lr=1e-2", "activation=gelu/lr=3e-3"], con
    from ablate_analysis import analyze as A
    sw = aa.load(sweep())
    full = A.contrasts(sw, A.baseline_map(sw)[0]).set_index("config")  # every contrast
    p = full.loc[con["config"], "p"].to_numpy()
    assert np.allclose(con["p"], p, rtol=1e-12)
    assert np.allclose(con["p_holm"], S.holm(p), rtol=1e-12), (con["p_holm"], S.holm(p))
    assert not np.allclose(con["p_holm"], full.loc[con["config"], "p_holm"]), "no re-adjustment"
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    assert "Holm family chosen with --family activation=gelu/*: 2 of 3 contrasts; not " \
        "tested: `activation=relu/lr=3e-3`." in md, md
    assert "family of 2 contrasts" in md
    assert "activation=relu/lr=3e-3 " not in out, out
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        sweep(), "-o", os.path.join(FILES["dir"], "fam-none"), "--family",
                        "nothing*"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "--family nothing* matches no contrasted configuration" \
        in p.stderr, p.stderr
    declared = os.path.join(FILES["dir"], "declared.h5")
    shutil.copy(sweep(), declared)
    with h5py.File(declared, "r+") as f:
        f.create_dataset("contrasts", data=np.zeros(1))
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        declared, "-o", os.path.join(FILES["dir"], "fam-decl"), "--family",
                        "*"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "pre-declares its family of contrasts (/contrasts); its " \
        "verdicts are not re-adjusted" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(FILES["dir"], "fam-decl", "report.md"))


def edit_runs(path, fn):
    """Rewrites /runs of the sweep file at path row by row: fn(name, row) edits the row."""
    import h5py
    with h5py.File(path, "r+") as f:
        runs = f["runs"][()]
        for i in range(len(runs)):
            row = f["runs"][i]
            name = row["name"].decode() if isinstance(row["name"], bytes) else row["name"]
            fn(name, row)
            f["runs"][i] = row


def test_two_sweeps():
    """The two-sweep comparison: configurations matched by their resolved knobs; B - A
    paired by seed where the seeds and the data match (scipy's ttest_rel), Welch where the
    data differ (ttest_ind, unequal variances), Holm across configurations; a
    configuration only one sweep ran is named, not compared; the build attributes that
    differ are marked. B is A's file with known changes (its losses shifted, one
    configuration's data and another's learning rate changed)."""
    import h5py
    import shutil
    from scipy import stats as st
    from ablate_analysis import stats as S
    a = sweep()
    b = os.path.join(FILES["dir"], "b.h5")
    shutil.copy(a, b)
    shift = {"activation=relu/lr=1e-2": (0.05, 0.07), "activation=gelu/lr=1e-2": (-0.2, -0.1),
             "activation=relu/lr=3e-3": (0.01, 0.3)}
    other = "activation=relu/lr=3e-3"   # trained on other data in B
    moved = "activation=gelu/lr=3e-3"   # another learning rate in B: only in A / only in B

    def change(name, row):
        cfg, seed = name.rsplit("/seed", 1)
        if cfg in shift:
            row["final_val_loss"] += shift[cfg][int(seed)]
        if cfg == other:
            row["data_sha256"] = "0" * 64
        if cfg == moved:
            row["train.lr"] = 5e-3
            if seed == "1":  # trained on other data than the rest of its configuration
                row["data_sha256"] = "1" * 64
    edit_runs(b, change)
    with h5py.File(b, "r+") as f:
        f.attrs["git_rev"] = "0123456789ab"
    d = os.path.join(FILES["dir"], "cmp")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        a, b, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = pd.read_csv(os.path.join(d, "compare.csv")).set_index("config")
    assert sorted(rows.index) == sorted(shift), rows.index
    with h5py.File(a, "r") as f:
        raw = f["runs"][()]
    va = {(n.decode() if isinstance(n, bytes) else n): v
          for n, v in zip(raw["name"], raw["final_val_loss"])}
    ps = {}
    for cfg, (d0, d1) in shift.items():
        x = np.array([va["%s/seed0" % cfg], va["%s/seed1" % cfg]])
        y = x + np.array([d0, d1])
        r = rows.loc[cfg]
        assert abs(r["diff"] - (y - x).mean()) < 1e-12, (cfg, r["diff"])
        if cfg == other:
            want = st.ttest_ind(y, x, equal_var=False)
            assert r["method"] == "welch" and r["data"] == "different", r
        else:
            want = st.ttest_rel(y, x)
            assert r["method"] == "paired" and r["data"] == "same", r
        assert abs(r["p"] - want.pvalue) < 1e-9, (cfg, r["p"], want.pvalue)
        ps[cfg] = r["p"]
    holm = S.holm(np.array(list(ps.values())))
    for (cfg, _), h in zip(ps.items(), holm):
        assert abs(rows.loc[cfg, "p_holm"] - h) < 1e-12
    with open(os.path.join(d, "compare.md")) as f:
        md = f.read()
    assert "Configurations only in A: `%s`." % moved in md, md
    assert "Configurations only in B: `%s`." % moved in md, md
    assert "| git_rev | `%s` | `0123456789ab` | **differs** |" % \
        aa.load(a).attrs["git_rev"] in md, md
    assert "| hdf5_version |" in md and "| same |" in md
    assert "Not paired: 1 configuration(s) whose data differ" in md, md
    assert "Left out for having trained on other data than the rest of their configuration: " \
        "%s/seed1 (B)." % moved in md, md
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith(other + " "))
    assert line.rstrip().endswith("different"), p.stdout


def test_repetition_and_near_zero():
    """Items 5 and 6 (the report's side): greedy samples that repeat themselves are counted
    by the kind /samples `repetition` records, so a word loop ("the the the": longest run 1,
    not degenerate) is no longer "degenerate 0 of n" and is named `ngram_loop` with its
    period; the near-zero fraction of /acts (|h| <= 0.1 rms) is in the per-configuration and
    per-layer tables, from the file's values."""
    import h5py
    import shutil
    from ablate_analysis import analyze as A
    path = os.path.join(FILES["dir"], "loops.h5")
    shutil.copy(sweep(), path)
    with h5py.File(path, "r+") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f["runs"]["name"]]
        smp = f["samples"][()]
        for i in range(len(smp)):
            if smp["kind"][i] != b"greedy":
                continue
            row = f["samples"][i]
            name = names[row["run"]]
            loop = name.startswith(BLOWN + "/")  # both seeds of one configuration loop
            row["degenerate"] = False
            row["longest_run"] = 1 if loop else 2
            row["repetition"] = b"ngram_loop" if loop else b"none"
            row["loop_period"] = 4 if loop else 0
            row["loop_frac"] = 0.99 if loop else 0.0
            f["samples"][i] = row
        acts = f["acts"][()]
    sw = aa.load(path)
    per = A.per_config(sw).set_index("config")
    assert (per.loc[BLOWN, "repeating_greedy"], per.loc[BLOWN, "ngram_loop_greedy"],
            per.loc[BLOWN, "degenerate_greedy"], per.loc[BLOWN, "greedy_samples"]) == \
        (2, 2, 0, 2), per.loc[BLOWN]
    assert (per.drop(BLOWN)["repeating_greedy"] == 0).all()
    # near-zero: each run's last recorded step, mean over layers, then over the runs
    run_of = sw.runs.set_index("index")["config"]
    df = pd.DataFrame({c: acts[c] for c in ("run", "step", "layer", "near_zero_frac",
                                             "zero_frac")})
    df = df[df["step"] == df.groupby("run")["step"].transform("max")]
    per_run = df.groupby("run")[["near_zero_frac", "zero_frac"]].mean()
    want = per_run.groupby(run_of.reindex(per_run.index).to_numpy()).mean()
    for c in per.index:
        assert abs(per.loc[c, "mlp_near_zero_frac"] - want.loc[c, "near_zero_frac"]) < 1e-12, c
        assert per.loc[c, "mlp_near_zero_frac"] >= per.loc[c, "mlp_zero_frac"], c
    lay = A.per_layer(sw)
    assert lay["mlp_near_zero_frac"].notna().all() and len(lay) == 2 * len(per), lay
    d = os.path.join(FILES["dir"], "rep-loops")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        path, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    row = next(ln for ln in md.split("## Per configuration")[1].splitlines()
               if ln.startswith("| %s |" % BLOWN))
    assert row.rstrip().endswith("| 2 of 2 (ngram_loop 2) |"), row
    assert "%.3f" % per.loc[BLOWN, "mlp_near_zero_frac"] in row, row
    assert "MLP near-zero frac" in md.split("### Per layer")[1].split("\n")[2], md
    sec = md.split("### %s (seed 0;" % BLOWN)[1].split("### ")[0]
    assert "greedy samples repeating themselves: 2 of 2 (ngram_loop 2))" in sec, sec[:300]
    assert "greedy: distinct" in sec and "longest run 1 — **repeats: ngram_loop** (a loop " \
        "of 4 tokens over 99% of it)" in sec, sec[:600]


def main():
    W.main_in_workdir("analysis-items", FILES, [
        ("robust_limits", test_robust_limits),
        ("token_labels", test_token_labels),
        ("terminal_and_json", test_terminal_and_json),
        ("provenance_and_curves", test_provenance_and_curves),
        ("forest_levels", test_forest_levels),
        ("preset_baseline", test_preset_baseline),
        ("unstable_excluded", test_unstable_excluded),
        ("family", test_family),
        ("two_sweeps", test_two_sweeps),
        ("repetition_and_near_zero", test_repetition_and_near_zero),
    ])


if __name__ == "__main__":
    main()
