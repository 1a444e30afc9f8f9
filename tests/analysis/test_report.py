"""analysis/ablate-report and the loader on real sweep files made by the ablate binary:
the report's numbers against independent numpy/scipy computations on the raw HDF5
(means, t intervals, paired differences, Holm-adjusted p, power figures), every figure
written and non-empty, every table as CSV, and the edge cases: failed and diverged runs,
one seed, no baseline, a fixed-time grid (marginals, budgets), a stopped sweep, a bad
--baseline, a file that is not a sweep."""
import math
import os
import re
import sys

import h5py
import numpy as np
import pandas as pd
from scipy import stats as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis.load import fnv1a64  # noqa: E402
from test_stats import power_by_integration  # noqa: E402

TOL = 1e-10
FILES = {}


def raw(path):
    """/runs and /evals straight from h5py, decoded by hand (no ablate_analysis)."""
    with h5py.File(path, "r") as f:
        r = f["runs"][()]
        runs = pd.DataFrame({"index": r["index"], "seed": r["seed"].astype(int),
                             "name": [x.decode() for x in r["name"]],
                             "status": [x.decode() for x in r["status"]],
                             "loss": r["final_val_loss"], "tokens": r["tokens"],
                             "batch": r["train.batch_size"], "ctx": r["model.context"]})
        e = f["evals"][()]
        evals = pd.DataFrame({"run": e["run"], "step": e["step"], "val_loss": e["val_loss"]})
        plan = [x.decode() for x in f["plan_text"][()]]
    runs["config"] = [n.rsplit("/", 1)[0] for n in runs["name"]]
    runs["valid"] = (runs["status"] == "done") & np.isfinite(runs["loss"])
    return runs, evals, plan


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

def test_loader():
    path = make("variants", W.variants_sweep)
    sw = aa.load(path)
    runs, evals, plan = raw(path)
    assert len(sw.runs) == 15 and (sw.runs["status"] == "done").sum() == 9, sw.runs["status"]
    assert all(isinstance(v, str) for v in sw.runs["name"]) and \
        all(isinstance(v, str) for v in sw.samples["text"]), "text not decoded"
    assert set(sw.runs["variant"]) == {"baseline", "gelu", "ctx8", "explode", "huge"}
    assert sw.axes == [] and not sw.partial and sw.description == "ablate e2e test"
    # group: one per configuration, shared by its seeds, = FNV-1a of the run's knob lines
    g = sw.runs.groupby("config")["group"].nunique()
    assert (g == 1).all() and sw.runs["group"].nunique() == 5, sw.runs[["config", "group"]]
    assert list(sw.runs["group"]) == [fnv1a64(t) for t in plan]
    # every metric row carries its run's identity
    for t in ("steps", "evals", "acts", "attn", "samples"):
        df = getattr(sw, t)
        assert len(df), t
        m = df.merge(runs[["index", "name", "seed"]], left_on="run", right_on="index")
        assert (m["name_x"] == m["name_y"]).all() and (m["seed_x"] == m["seed_y"]).all(), t
        assert df["config"].notna().all() and df["group"].notna().all(), t
    # /evals tokens (schema 1: derived) = step x batch x context
    e = sw.evals.merge(runs[["index", "batch", "ctx"]], left_on="run", right_on="index")
    assert np.array_equal(e["tokens"], e["step"] * e["batch"] * e["ctx"]), "eval tokens"
    assert np.isfinite(sw.evals["time"]).all() and (sw.evals["time"] > 0).all()


def as_schema2(src, dst):
    """A copy of a schema 1 file with what schema 2 adds, as issue 9 describes it: /runs
    `variant`, `group` (here deliberately not the derived hash), `overrides`, text as
    variable-length UTF-8 strings and the status as an enum; /evals `tokens` and `time` (here marked by an offset)."""
    import shutil
    shutil.copy(src, dst)
    vstr = h5py.string_dtype("utf-8")
    with h5py.File(dst, "r+") as f:
        r = f["runs"][()]
        names = [x.decode() for x in r["name"]]
        codes = {"pending": 0, "running": 1, "interrupted": 2, "done": 3, "diverged": 4,
                 "failed": 5}
        fields = [(n, h5py.enum_dtype(codes, basetype="i1") if n == "status" else
                   vstr if r.dtype[n].kind == "S" else r.dtype[n]) for n in r.dtype.names]
        fields += [("variant", vstr), ("group", vstr), ("overrides", vstr)]
        new = np.empty(len(r), dtype=fields)
        for n in r.dtype.names:
            if n == "status":
                new[n] = [codes[x.decode()] for x in r[n]]
            else:
                new[n] = [x.decode() for x in r[n]] if r.dtype[n].kind == "S" else r[n]
        new["variant"] = [n.split("/")[0] for n in names]
        new["group"] = ["g-" + n.split("/")[0] for n in names]
        new["overrides"] = ""
        del f["runs"]
        f["runs"] = new
        e = f["evals"][()]
        fields = list(e.dtype.descr) + [("tokens", "<i8"), ("time", "<f8")]
        ne = np.empty(len(e), dtype=fields)
        for n in e.dtype.names:
            ne[n] = e[n]
        ne["tokens"] = e["step"] * 1000 + 7
        ne["time"] = e["step"] + 0.5
        del f["evals"]
        f["evals"] = ne
        f.attrs["ablate_schema_version"] = 2
    return dst


def test_loader_schema2():
    path = make("variants", W.variants_sweep)
    v2 = as_schema2(path, os.path.join(FILES["dir"], "v2.h5"))
    sw = aa.load(v2)
    assert sw.schema_version == 2
    assert set(sw.runs["group"]) == {"g-baseline", "g-gelu", "g-ctx8", "g-explode", "g-huge"}
    assert all(isinstance(x, str) for x in sw.runs["status"]) and \
        (sw.runs["status"] == "done").sum() == 9
    assert (sw.acts["group"].str.startswith("g-")).all()
    assert (sw.evals["tokens"] == sw.evals["step"] * 1000 + 7).all(), "v2 eval tokens unused"
    assert (sw.evals["time"] == sw.evals["step"] + 0.5).all(), "v2 eval time unused"
    d, md = run_report(v2, "v2")
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    assert sorted(con["config"]) == ["ctx8", "gelu"], con
    with h5py.File(v2, "r+") as f:
        f.attrs["ablate_schema_version"] = 3
    rc, err = W.report(v2, os.path.join(FILES["dir"], "rep-v3"))
    assert rc == 2 and "schema version 3" in err and err.count("\n") == 1, err


def test_variants_report():
    path = make("variants", W.variants_sweep)
    d, md = run_report(path, "variants", cli=True)
    runs, _, _ = raw(path)
    v = runs[runs["valid"]]
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
    assert configs.loc["explode", "n"] == 0 and configs.loc["huge", "n"] == 0
    # failed and diverged runs listed with their messages
    over = md.split("### Failed and diverged runs")[1].split("## Per configuration")[0]
    for s in range(3):
        assert re.search(r"explode/seed%d \| diverged \| \d+ \| non-finite" % s, over), over
        assert re.search(r"huge/seed%d \| failed \| .*cannot allocate" % s, over), over
    # contrasts: paired t on the seeds, Holm over the family of two, power figures
    con = pd.read_csv(os.path.join(d, "contrasts.csv")).set_index("config")
    assert sorted(con.index) == ["ctx8", "gelu"], con.index
    base = v[v["config"] == "baseline"].set_index("seed")["loss"]
    ps = {}
    for c in ("gelu", "ctx8"):
        b = v[v["config"] == c].set_index("seed")["loss"].reindex(base.index)
        t = st.ttest_rel(b, base)
        dd = (b - base).to_numpy()
        lo, hi = st.t.interval(0.95, len(dd) - 1, loc=dd.mean(), scale=st.sem(dd))
        r = con.loc[c]
        assert r["method"] == "paired" and r["n"] == 3, r
        close(r["diff"], dd.mean(), c + " diff")
        close(r["lo"], lo, c + " diff lo")
        close(r["hi"], hi, c + " diff hi")
        close(r["p"], t.pvalue, c + " p")
        ps[c] = t.pvalue
        assert "%+.4f" % dd.mean() in md and "[%.4f, %.4f]" % (lo, hi) in md, c
        # smallest resolvable: 80% power at alpha/m by integration; seeds needed: boundary
        se = dd.std(ddof=1) / math.sqrt(3)
        close(power_by_integration(r["mdd"], se, 2, 0.025), 0.8, c + " mdd power", 1e-6)
        k = int(r["seeds_needed"])
        sd = dd.std(ddof=1)
        pw = lambda n: power_by_integration(dd.mean(), sd / math.sqrt(n), n - 1, 0.025)  # noqa
        # (1e-6: the noncentral t and the integral agree to ~1e-8, not to the last bit)
        assert pw(k) >= 0.8 - 1e-6 and (k == 2 or pw(k - 1) < 0.8 + 1e-6), (c, k)
    lo_c, hi_c = sorted(ps, key=ps.get)
    holm = {lo_c: min(1, 2 * ps[lo_c])}
    holm[hi_c] = max(holm[lo_c], min(1, ps[hi_c]))
    for c in ps:
        close(con.loc[c, "p_holm"], holm[c], c + " Holm p")
        want = "not resolved with 3 seeds" if holm[c] >= 0.05 else \
            ("better" if con.loc[c, "diff"] < 0 else "worse")
        assert con.loc[c, "verdict"] == want, (c, con.loc[c, "verdict"], want)
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png",
                   "throughput.png", "forest.png"])
    assert set(check_csvs(d, md)) >= {"configs.csv", "contrasts.csv", "layers.csv",
                                      "samples.csv", "failures.csv", "runs.csv"}
    for s in ("## Overview", "### Provenance", "### Runs by status", "### Compute spent",
              "## Per configuration", "### Per layer", "## Against the baseline", "## Figures",
              "## Samples", "git_rev"):
        assert s in md, "report.md lacks %r" % s
    assert "Partial" not in md and "## Budgets" not in md


def test_baseline_option():
    path = make("variants", W.variants_sweep)
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
    assert list(sw.runs["config"]) == ["relu2/lr=2e-2", "gelu/lr=2e-2"], sw.runs["config"]
    assert sw.axes == ["axis.lr"] and sw.axis_columns == {"lr": "axis.lr"}, sw.axes
    assert (sw.steps["axis.lr"] == "2e-2").all() and sw.steps["lr"].dtype.kind == "f"
    assert sw.steps["lr"].max() == 2e-2, "the /steps lr column was shadowed"
    d, md = run_report(path, "one")
    assert "One seed per configuration: no standard deviations, intervals or tests" in md
    assert "No baseline: the sweep has no `baseline` variant (pass --baseline)" in md, md
    assert "No forest plot" in md
    assert not os.path.exists(os.path.join(d, "forest.png"))
    configs = pd.read_csv(os.path.join(d, "configs.csv"))
    assert (configs["n"] == 1).all() and configs["val_loss_lo"].isna().all()
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
    runs, evals, _ = raw(path)
    v = runs[runs["valid"]].copy()
    assert len(v) == 8, runs
    v["n_head"] = [n.split("/")[0].split("=")[1] for n in v["name"]]
    v["activation"] = [n.split("/")[1].split("=")[1] for n in v["name"]]
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
    e["tokens"] = e["step"] * e["batch"] * e["ctx"]
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
    path = make("stopped", W.stopped_sweep)
    sw = aa.load(path)
    assert sw.partial and (sw.runs["status"] == "done").sum() >= 1, sw.runs["status"]
    assert (sw.runs["status"] != "done").any()
    d, md = run_report(path, "stopped")
    done = int((sw.runs["status"] == "done").sum())
    assert "> **Partial:** the sweep is `%s`; %d of 6 runs are done" % (sw.status, done) in md
    configs = pd.read_csv(os.path.join(d, "configs.csv")).set_index("config")
    assert configs["n"].sum() == done, configs["n"]
    check_pngs(d, ["val_loss.png", "mlp_activations.png", "attention_entropy.png"])


def main():
    """All tests in one temp dir (removed when they pass, kept when one fails)."""
    with C.workdir("analysis") as d:
        FILES["dir"] = d
        try:
            C.main([("loader", test_loader), ("loader_schema2", test_loader_schema2),
                    ("variants_report", test_variants_report),
                    ("baseline_option", test_baseline_option),
                    ("one_seed_no_baseline", test_one_seed_no_baseline),
                    ("grid_fixed_time", test_grid_fixed_time),
                    ("stopped_sweep", test_stopped_sweep)])
        except SystemExit as e:
            if e.code:
                raise
    sys.exit(0)


if __name__ == "__main__":
    main()
