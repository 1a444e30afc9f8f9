"""analysis/ablate-report and the loader on real sweep files made by the ablate binary
(schema 2) and on the committed schema-1 file of ablate 0.1.0 (tests/fixtures/v1): the
report's numbers against independent numpy/scipy computations on the raw HDF5 (means,
t intervals, paired differences, Holm-adjusted p, power figures), every figure written and
non-empty, every table as CSV, and the edge cases: failed and diverged runs, one seed, no
baseline, a fixed-time grid (marginals, budgets), a stopped sweep (its last view as left,
then rebuilt by `ablate view`), a bad --baseline, a file that is not a sweep, a schema
version newer than the reader."""
import math
import os
import re
import shutil
import sys

import h5py
import numpy as np
import pandas as pd
from scipy import stats as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from test_stats import power_by_integration  # noqa: E402

TOL = 1e-10
FILES = {}
V1 = os.path.join(C.SOURCE_DIR, "tests", "fixtures", "v1")


def _str(x):
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def raw(path, steps_col="steps"):
    """/runs and /evals straight from h5py, decoded by hand (no ablate_analysis): schema 2's
    columns (variant, group, the axis columns its `axes` attribute lists, /evals tokens and
    time) as they are, and for schema 1 only what schema 1 has (/plan_text for the group
    test). steps_col: the /runs column of the steps taken. Returns (runs, evals, extra):
    extra has `axes`, and for schema 1 `plan` and `steps` (/steps run, step, tokens, time)."""
    with h5py.File(path, "r") as f:
        v2 = f.attrs["ablate_schema_version"] == 2
        r = f["runs"][()]
        runs = pd.DataFrame({"index": r["index"], "seed": r["seed"].astype(int),
                             "name": [_str(x) for x in r["name"]],
                             "status": [_str(x) for x in r["status"]],
                             "loss": r["final_val_loss"], "tokens": r["tokens"],
                             "steps": r[steps_col],
                             "batch": r["train.batch_size"], "ctx": r["model.context"]})
        e = f["evals"][()]
        evals = pd.DataFrame({"run": e["run"], "step": e["step"], "val_loss": e["val_loss"]})
        extra = {"axes": []}
        if v2:
            for c in ("variant", "group"):
                runs[c] = [_str(x) for x in r[c]]
            extra["axes"] = [a for a in _str(f["runs"].attrs["axes"]).split("\n") if a]
            for a in extra["axes"]:
                runs["ax:" + a] = [_str(x) for x in r[a]]
            evals["tokens"], evals["time"] = e["tokens"], e["time"]
        else:
            extra["plan"] = [_str(x) for x in f["plan_text"][()]]
            s = f["steps"][()]
            extra["steps"] = pd.DataFrame({"run": s["run"], "step": s["step"],
                                           "tokens": s["tokens"], "time": s["time"]})
    runs["config"] = [n.rsplit("/", 1)[0] for n in runs["name"]]
    runs["valid"] = (runs["status"] == "done") & np.isfinite(runs["loss"])
    return runs, evals, extra


def fnv(text):
    """FNV-1a 64 of the UTF-8 text as 16 hex digits, written out again here (the test
    does not take the loader's)."""
    h = 14695981039346656037
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 1099511628211) % 2 ** 64
    return format(h, "016x")


def close(a, b, what, tol=TOL):
    assert abs(a - b) <= tol * max(1.0, abs(b)), "%s: report %r, independent %r" % (what, a, b)


def check_pngs(d, names):
    import matplotlib.image as mpimg
    for n in names:
        p = os.path.join(d, n)
        assert os.path.isfile(p), "missing figure %s" % n
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % n
        assert os.path.getsize(p) > 5000, "%s is tiny (%d bytes)" % (n, os.path.getsize(p))
        img = mpimg.imread(p)
        assert img.shape[0] > 200 and img.shape[1] > 300 and float(img[..., :3].std()) > 0.02, \
            "%s looks blank" % n


def check_csvs(d, md):
    listed = re.findall(r"`([a-z_]+\.csv)`", md.split("## Files")[-1])
    assert listed, "no CSV listed"
    for n in listed:
        pd.read_csv(os.path.join(d, n))  # exists and parses
    return listed


def make(name, builder):
    """The sweep `name` built once in this process (the variants sweep is a committed
    file: W.fixture)."""
    if name not in FILES:
        FILES[name] = builder(FILES["dir"])
    return FILES[name]


def run_report(path, name, *extra, cli=False):
    """The report of path into rep-NAME: by the command (cli) or in this process."""
    d = os.path.join(FILES["dir"], "rep-" + name)
    if cli:
        rc, err = W.report(path, d, *extra)
        assert rc == 0, "ablate-report exit %s:\n%s" % (rc, err)
    else:
        from ablate_analysis.report import main as report_main
        assert report_main([path, "-o", d] + list(extra)) == 0
    with open(os.path.join(d, "report.md")) as f:
        return d, f.read()


# ---------------------------------------------------------------- tests

def check_identity(sw, runs):
    """Every metric row carries its run's name, seed, config and group (from the raw file)."""
    for t in ("steps", "evals", "acts", "attn", "samples"):
        df = getattr(sw, t)
        assert len(df), t
        m = df.merge(runs[["index", "name", "seed"]], left_on="run", right_on="index")
        assert len(m) == len(df), t
        assert (m["name_x"] == m["name_y"]).all() and (m["seed_x"] == m["seed_y"]).all(), t
        assert df["config"].notna().all() and df["group"].notna().all(), t
        assert (df["group"] == df["run"].map(sw.runs.set_index("index")["group"])).all(), t


def test_loader():
    """Schema 2 as the binary writes it: group, variant, axes and /evals tokens and time
    are the file's columns."""
    path = W.fixture("variants", FILES["dir"])
    sw = aa.load(path)
    runs, evals, extra = raw(path)
    assert sw.schema_version == 2 and extra["axes"] == []
    assert len(sw.runs) == 15 and (sw.runs["status"] == "done").sum() == 9, sw.runs["status"]
    assert all(isinstance(v, str) for v in sw.runs["name"]) and \
        all(isinstance(v, str) for v in sw.samples["text"]) and \
        all(isinstance(v, str) for v in sw.runs["group"]), "text not decoded"
    assert list(sw.runs["variant"]) == list(runs["variant"])
    assert set(sw.runs["variant"]) == {"baseline", "gelu", "ctx8", "explode", "huge"}
    assert sw.axes == [] and not sw.partial and sw.description == "ablate e2e test"
    # group: the file's column, one per configuration, shared by its seeds
    assert list(sw.runs["group"]) == list(runs["group"])
    assert all(re.fullmatch(r"[0-9a-f]{16}", g) for g in sw.runs["group"]), sw.runs["group"]
    g = sw.runs.groupby("config")["group"].nunique()
    assert (g == 1).all() and sw.runs["group"].nunique() == 5, sw.runs[["config", "group"]]
    check_identity(sw, runs)
    # /evals tokens and time: the file's columns (tokens = step x batch x context)
    assert np.array_equal(sw.evals["tokens"], evals["tokens"]) and \
        np.array_equal(sw.evals["time"], evals["time"]), "v2 eval tokens/time not used"
    e = sw.evals.merge(runs[["index", "batch", "ctx"]], left_on="run", right_on="index")
    assert np.array_equal(e["tokens"], e["step"] * e["batch"] * e["ctx"]), "eval tokens"
    assert np.isfinite(sw.evals["time"]).all() and (sw.evals["time"] > 0).all()
    # a schema version newer than the reader: one line naming the file, exit 2
    v3 = os.path.join(FILES["dir"], "v3.h5")
    shutil.copy(path, v3)
    with h5py.File(v3, "r+") as f:
        f.attrs["ablate_schema_version"] = 3
    rc, err = W.report(v3, os.path.join(FILES["dir"], "rep-v3"))
    assert rc == 2 and "schema version 3" in err and "v3.h5" in err and \
        err.count("\n") == 1, err


def v1_copy():
    """The committed schema-1 sweep (ablate 0.1.0) in a directory of its own: v1.h5, its
    journal as v1.h5.d/journal, spec.yaml and corpus.txt (the spec's relative data path)."""
    d = os.path.join(FILES["dir"], "v1")
    if not os.path.isdir(d):
        os.mkdir(d)
        for n in ("corpus.txt", "spec.yaml", "v1.h5"):
            shutil.copy(os.path.join(V1, n), d)
        os.mkdir(os.path.join(d, "v1.h5.d"))
        shutil.copy(os.path.join(V1, "journal"), os.path.join(d, "v1.h5.d", "journal"))
    return d


def test_loader_schema1():
    """The schema-1 file ablate 0.1.0 wrote (2 variants x an activation grid x 2 seeds,
    log_every 2): variant and axes parsed from run names, group derived from /plan_text,
    /evals tokens and time derived from /steps; then the same journal rebuilt as schema 2
    by this release loads to the same table."""
    path = os.path.join(v1_copy(), "v1.h5")
    sw = aa.load(path)
    runs, evals, extra = raw(path)
    assert sw.schema_version == 1 and sw.status == "complete" and not sw.partial
    assert len(sw.runs) == 8 and (sw.runs["status"] == "done").all(), sw.runs["status"]
    assert sw.axes == ["activation"] and sw.axis_columns == {"activation": "activation"}
    assert list(sw.runs["variant"]) == [n.split("/")[0] for n in runs["name"]]
    assert list(sw.runs["activation"]) == [n.split("/")[1][len("activation="):]
                                           for n in runs["name"]]
    assert list(sw.runs["config"]) == list(runs["config"])
    # group: FNV-1a 64 of each run's /plan_text (every knob, no seed)
    assert list(sw.runs["group"]) == [fnv(t) for t in extra["plan"]]
    assert sw.runs.groupby("config")["group"].nunique().eq(1).all() and \
        sw.runs["group"].nunique() == 4
    check_identity(sw, runs)
    # /evals tokens = step x batch x context; time from /steps (logged every 2 steps:
    # interpolated linearly at odd steps)
    e = sw.evals.merge(runs[["index", "batch", "ctx"]], left_on="run", right_on="index")
    assert np.array_equal(e["tokens"], e["step"] * e["batch"] * e["ctx"]), "eval tokens"
    steps = extra["steps"]
    assert sorted(set(steps["step"])) == [2, 4, 6] and sorted(set(evals["step"])) == [3, 6]
    for (r, k), t in zip(zip(sw.evals["run"], sw.evals["step"]), sw.evals["time"]):
        st_r = steps[steps["run"] == r].set_index("step")["time"]
        want = st_r[k] if k in st_r.index else (st_r[k - 1] + st_r[k + 1]) / 2
        close(t, want, "run %d step %d eval time" % (r, k), 1e-12)
    assert list(sw.evals.columns[:6]) == ["run", "step", "val_loss", "val_acc", "tokens",
                                          "time"], sw.evals.columns
    # the same journal as a schema 2 view (what `--resume` with this release makes): the
    # file's group and variant partition the runs as the derived ones do, its axes are
    # the parsed ones, and its /evals time (NaN for a version-1 journal) is filled in
    d = os.path.dirname(path)
    shutil.copy(path, os.path.join(d, "v1-orig.h5"))
    C.run(["run", "spec.yaml", "-o", "v1.h5", "--resume"], cwd=d, expect_rc=0, tag="v1-to-v2")
    _, ev2, ex2 = raw(path)
    assert ex2["axes"] == ["activation"] and np.isnan(ev2["time"]).all()
    sw2 = aa.load(path)
    assert sw2.schema_version == 2 and sw2.axes == sw.axes
    for c in ("name", "seed", "status", "config", "variant", "activation", "final_val_loss"):
        assert list(sw2.runs[c]) == list(sw.runs[c]), c
    assert (sw2.runs.groupby("group")["config"].nunique() == 1).all() and \
        sw2.runs["group"].nunique() == 4
    for c in ("run", "step", "val_loss", "tokens", "time"):
        assert np.array_equal(sw2.evals[c], sw.evals[c]), "evals " + c
    shutil.move(os.path.join(d, "v1-orig.h5"), path)


def test_schema1_report():
    """The report of the schema-1 file: per-configuration statistics and the contrasts of
    `post` against `baseline` at each grid point, against scipy on the raw file."""
    path = os.path.join(v1_copy(), "v1.h5")
    d, md = run_report(path, "v1", cli=True)
    runs, _, _ = raw(path)
    v = runs[runs["valid"]]
    assert len(v) == 8
    configs = check_config_stats(d, md, v)
    assert (configs["n"] == 2).all() and len(configs) == 4
    check_paired_contrasts(d, md, v, {"post/activation=relu": "baseline/activation=relu",
                                      "post/activation=gelu": "baseline/activation=gelu"}, 2)
    assert "File `v1.h5` (schema version 1), sweep status **complete**, 8 runs in 4 " \
        "configurations." in md, md[:600]
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png",
                   "throughput.png", "forest.png"])
    assert "## Grid marginals" in md and "Partial" not in md


def check_config_stats(d, md, v):
    """configs.csv and report.md against mean, sd and t interval of the valid runs' final
    validation loss per configuration, computed here from the raw file."""
    configs = pd.read_csv(os.path.join(d, "configs.csv")).set_index("config")
    for c, g in v.groupby("config"):
        x = g["loss"].to_numpy()
        lo, hi = st.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=st.sem(x))
        r = configs.loc[c]
        close(r["val_loss_mean"], x.mean(), c + " mean")
        close(r["val_loss_lo"], lo, c + " lo")
        close(r["val_loss_hi"], hi, c + " hi")
        assert "%.4f ± %.4f" % (x.mean(), x.std(ddof=1)) in md, c + " mean ± sd in report.md"
        assert "[%.4f, %.4f]" % (lo, hi) in md, c + " CI in report.md"
    return configs


def check_paired_contrasts(d, md, v, pairs, n):
    """contrasts.csv and report.md against paired t tests on the seeds (every pair shares
    its n seeds), Holm over the family, and the power figures at alpha / m by numerical
    integration; pairs is {configuration: its baseline}."""
    con = pd.read_csv(os.path.join(d, "contrasts.csv")).set_index("config")
    assert sorted(con.index) == sorted(pairs) and \
        all(con.loc[c, "baseline"] == b for c, b in pairs.items()), con
    m = len(pairs)
    alpha = 0.05 / m
    ps = {}
    for c, bname in pairs.items():
        base = v[v["config"] == bname].set_index("seed")["loss"]
        b = v[v["config"] == c].set_index("seed")["loss"].reindex(base.index)
        t = st.ttest_rel(b, base)
        dd = (b - base).to_numpy()
        lo, hi = st.t.interval(0.95, len(dd) - 1, loc=dd.mean(), scale=st.sem(dd))
        r = con.loc[c]
        assert r["method"] == "paired" and r["n"] == n == len(dd), r
        close(r["diff"], dd.mean(), c + " diff")
        close(r["lo"], lo, c + " diff lo")
        close(r["hi"], hi, c + " diff hi")
        close(r["p"], t.pvalue, c + " p")
        ps[c] = t.pvalue
        assert "%+.4f" % dd.mean() in md and "[%.4f, %.4f]" % (lo, hi) in md, c
        # smallest resolvable: 80% power at alpha/m by integration; seeds needed: boundary
        sd = dd.std(ddof=1)
        close(power_by_integration(r["mdd"], sd / math.sqrt(n), n - 1, alpha), 0.8,
              c + " mdd power", 1e-6)
        k = int(r["seeds_needed"])
        pw = lambda k: power_by_integration(dd.mean(), sd / math.sqrt(k), k - 1, alpha)  # noqa
        # (1e-6: the noncentral t and the integral agree to ~1e-8, not to the last bit)
        assert pw(k) >= 0.8 - 1e-6 and (k == 2 or pw(k - 1) < 0.8 + 1e-6), (c, k)
    # Holm: the i-th smallest p times (m - i), made monotone, capped at 1
    holm, run = {}, 0.0
    for i, c in enumerate(sorted(ps, key=ps.get)):
        run = max(run, min(1.0, (m - i) * ps[c]))
        holm[c] = run
    for c in ps:
        close(con.loc[c, "p_holm"], holm[c], c + " Holm p")
        want = "not resolved with %d seeds" % n if holm[c] >= 0.05 else \
            ("better" if con.loc[c, "diff"] < 0 else "worse")
        assert con.loc[c, "verdict"] == want, (c, con.loc[c, "verdict"], want)
    return con


def test_variants_report():
    path = W.fixture("variants", FILES["dir"])
    d, md = run_report(path, "variants", cli=True)
    runs, _, _ = raw(path)
    v = runs[runs["valid"]]
    configs = check_config_stats(d, md, v)
    assert configs.loc["explode", "n"] == 0 and configs.loc["huge", "n"] == 0
    # failed and diverged runs listed with their messages
    over = md.split("### Failed, diverged and unstable runs")[1].split("## Per configuration")[0]
    for s in range(3):
        assert re.search(r"explode/seed%d \| diverged \| \d+ \| non-finite" % s, over), over
        assert re.search(r"huge/seed%d \| failed \| .*cannot allocate" % s, over), over
    # contrasts: paired t on the seeds, Holm over the family of two, power figures
    check_paired_contrasts(d, md, v, {"gelu": "baseline", "ctx8": "baseline"}, 3)
    # provenance: the data file's size and checksum as schema 2's /data_files records them
    # (the file is the corpus the fixture was made from: that the record is the file's is
    # e2e_data_identity's to check)
    with h5py.File(path, "r") as f:
        data = [(_str(r["path"]), int(r["bytes"]), _str(r["sha256"])) for r in f["data_files"]]
    assert len(data) == 1 and re.fullmatch(r"[0-9a-f]{64}", data[0][2]), data
    assert "| %s | {:,} | `%s` |".format(data[0][1]) % (data[0][0], data[0][2]) in md, \
        "data checksum"
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png",
                   "throughput.png", "forest.png"])
    assert set(check_csvs(d, md)) >= {"configs.csv", "contrasts.csv", "layers.csv",
                                      "samples.csv", "failures.csv", "runs.csv",
                                      "data_files.csv"}
    for s in ("## Overview", "## Provenance", "### Runs by status", "### Compute spent",
              "## Per configuration", "### Per layer", "## Against the baseline", "## Figures",
              "## Samples", "git_rev"):
        assert s in md, "report.md lacks %r" % s
    assert "Partial" not in md and "## Budgets" not in md


def test_baseline_option():
    path = W.fixture("variants", FILES["dir"])
    d, md = run_report(path, "variants-gelu", "--baseline", "gelu")
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert set(con["baseline"]) == {"gelu"} and set(con["config"]) == {"baseline", "ctx8"}, con
    # a name that matches nothing: one line, exit 2, nothing written
    out = os.path.join(FILES["dir"], "rep-bad")
    rc, err = W.report(path, out, "--baseline", "nosuch")
    assert rc == 2 and err.count("\n") == 1 and "nosuch" in err, (rc, err)
    assert not os.path.exists(os.path.join(out, "report.md"))
    junk = C.write(os.path.join(FILES["dir"], "junk.h5"), "not hdf5\n")
    rc, err = W.report(junk, out)
    assert rc == 2 and err.count("\n") == 1 and "junk.h5" in err, (rc, err)


def test_one_seed_no_baseline():
    path = make("one", W.one_seed_sweep)
    sw = aa.load(path)
    assert list(sw.runs["config"]) == ["relu2/lr=2e-2/steps=30", "gelu/lr=2e-2/steps=30"], \
        sw.runs["config"]
    assert sw.axes == ["axis.lr", "axis.steps"] and \
        sw.axis_columns == {"lr": "axis.lr", "steps": "axis.steps"}, sw.axes
    assert (sw.steps["axis.lr"] == "2e-2").all() and sw.steps["lr"].dtype.kind == "f"
    assert sw.steps["lr"].max() == 2e-2, "the /steps lr column was shadowed"
    # /runs `steps` is the grid axis in the file and the steps taken are `end.steps`:
    # the loader gives `steps` its meaning back
    runs, _, extra = raw(path, steps_col="end.steps")
    assert extra["axes"] == ["lr", "steps"], extra
    assert (sw.runs["axis.steps"] == "30").all() and "end.steps" not in sw.runs
    assert sw.runs["steps"].dtype.kind == "i" and (sw.runs["steps"] == 30).all(), \
        sw.runs["steps"]
    assert list(sw.runs["steps"]) == list(runs["steps"])
    d, md = run_report(path, "one")
    assert "One seed per configuration: no standard deviations, intervals or tests" in md
    assert "No baseline: the sweep has no `baseline` variant (pass --baseline)" in md, md
    assert "No forest plot" in md
    assert not os.path.exists(os.path.join(d, "forest.png"))
    configs = pd.read_csv(os.path.join(d, "configs.csv"))
    assert (configs["n"] == 1).all() and configs["val_loss_lo"].isna().all()
    assert "| {:,} | {:,} |".format(runs["steps"].sum(), runs["tokens"].sum()) in \
        md.split("### Compute spent")[1], "compute spent"
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png",
                   "throughput.png"])
    d, md = run_report(path, "one-b", "--baseline", "gelu")
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert len(con) == 1 and con["verdict"][0] == "not resolved with 1 seed", con
    assert con["lo"].isna().all() and con["p"].isna().all()


def test_grid_fixed_time():
    path = make("grid", W.grid_time_sweep)
    sw = aa.load(path)
    assert sw.axes == ["n_head", "activation"] and set(sw.runs["variant"]) == {""}
    d, md = run_report(path, "grid")
    assert "Baseline: the base configuration `n_head=4/activation=relu`" in md
    runs, evals, extra = raw(path)
    assert extra["axes"] == ["n_head", "activation"], extra
    for a in extra["axes"]:  # the file's axis columns, as the run names write them
        assert list(sw.runs[a]) == list(runs["ax:" + a]), a
        assert list(runs["ax:" + a]) == [n.split("/")[extra["axes"].index(a)].split("=")[1]
                                         for n in runs["name"]], a
    v = runs[runs["valid"]].copy()
    assert len(v) == 8, runs
    v["n_head"], v["activation"] = v["ax:n_head"], v["ax:activation"]
    marg = pd.read_csv(os.path.join(d, "marginals.csv"), dtype={"value": str})
    for axis in ("n_head", "activation"):
        for value, g in v.groupby(axis):
            per = g.groupby("config")["loss"]
            q = (per.var(ddof=1) / per.size()).to_numpy()
            k = len(q)
            se = math.sqrt(q.sum()) / k
            df = q.sum() ** 2 / np.sum(q ** 2 / (per.size().to_numpy() - 1))
            r = marg[(marg["axis"] == axis) & (marg["value"] == value)].iloc[0]
            close(r["mean"], g["loss"].mean(), "%s=%s mean" % (axis, value))  # balanced
            close(r["hi"] - r["mean"], st.t.ppf(0.975, df) * se, "%s=%s CI" % (axis, value))
    # budgets: tokens processed, and the loss at equal tokens by interpolation
    assert "## Budgets" in md and "### Against the baseline at equal tokens" in md
    bud = pd.read_csv(os.path.join(d, "budgets.csv")).set_index("config")
    e = evals.merge(v[["index", "config", "batch", "ctx"]], left_on="run", right_on="index")
    assert (e["tokens"] == e["step"] * e["batch"] * e["ctx"]).all(), "/evals tokens"
    t_star = e.groupby("run")["tokens"].max().min()
    at = {r: np.interp(t_star, g["tokens"], g["val_loss"]) for r, g in e.groupby("run")}
    v["at"] = v["index"].map(at)
    for c, g in v.groupby("config"):
        close(bud.loc[c, "tokens_mean"], g["tokens"].mean(), c + " tokens")
        close(bud.loc[c, "equal_tokens"], t_star, "equal tokens")
        close(bud.loc[c, "val_loss_at_tokens"], g["at"].mean(), c + " loss at equal tokens")
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png",
                   "throughput.png", "forest.png", "budget.png"])
    assert "## Grid marginals" in md


def test_stopped_sweep():
    """A sweep stopped by SIGTERM after its first run was done. SIGTERM makes `ablate run`
    sync the journal and exit at once, without a last view (docs/architecture.md): OUT.h5
    is the latest periodic view, which shows the sweep `running` and may predate that run's
    end. The report reads it as a running sweep. `ablate view OUT.h5` (what a user runs,
    docs/analysis.md) rebuilds it from the journal: the sweep `stopped`, the done run done,
    the run in progress `interrupted`, the rest pending."""
    path = make("stopped", W.stopped_sweep)
    for tag in ("as-left", "rebuilt"):
        if tag == "rebuilt":
            C.run(["view", path], expect_rc=0, tag="view-stopped")
        sw = aa.load(path)
        runs, _, _ = raw(path)
        st_ = sw.runs["status"]
        assert list(st_) == list(runs["status"]), tag
        assert sw.partial and st_.isin(["pending", "running", "interrupted"]).any(), (tag, st_)
        if tag == "as-left":
            assert sw.status == "running" and not st_.isin(["interrupted"]).any(), (tag, st_)
        else:
            assert sw.status == "stopped", sw.status
            assert (st_ == "done").sum() >= 1 and (st_ == "interrupted").sum() == 1 and \
                not (st_ == "running").any() and (st_ == "pending").any(), st_
        d, md = run_report(path, "stopped-" + tag)
        done = int((st_ == "done").sum())
        assert "> **Partial:** the sweep is `%s`; %d of 6 runs are done" % (sw.status, done) \
            in md, md[:800]
        configs = pd.read_csv(os.path.join(d, "configs.csv")).set_index("config")
        assert configs["n"].sum() == done, configs["n"]
        check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png"])
        if done:  # the statistics use the done runs only
            v = runs[runs["valid"]]
            close(configs.loc["baseline", "val_loss_mean"],
                  v[v["config"] == "baseline"]["loss"].mean(), tag + " baseline mean")


def main():
    """All tests in one temp dir (removed when they pass, kept when one fails)."""
    W.main_in_workdir("analysis", FILES, [
        ("loader", test_loader),
        ("loader_schema1", test_loader_schema1),
        ("schema1_report", test_schema1_report),
        ("variants_report", test_variants_report),
        ("baseline_option", test_baseline_option),
        ("one_seed_no_baseline", test_one_seed_no_baseline),
        ("grid_fixed_time", test_grid_fixed_time),
        ("stopped_sweep", test_stopped_sweep),
    ])


if __name__ == "__main__":
    main()
