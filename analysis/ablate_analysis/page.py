"""report.html: the report as one self-contained interactive page (docs/analysis.md, "The
page"). Everything the page shows is embedded as JSON next to uPlot (MIT), the charting
library scripts/install-deps.sh installs from npm, pinned by version and SHA-256; nothing
is fetched when the page is opened.

Curves are downsampled here, per run, to a point budget that keeps a 1,000-run sweep's
page under 10 MB: each bucket of consecutive points keeps its minimum and its maximum (in
their order), so a spike survives any budget; the page buckets again the same way for the
width it draws at."""

import datetime
import hashlib
import json
import math
import os

import numpy as np
import pandas as pd

from . import analyze as A

UPLOT_VERSION = "1.6.32"
# the same hashes as scripts/install-deps.sh's UPLOT_*_SHA256
UPLOT_FILES = {
    "uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
    "uPlot.min.css": "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page.html")

# Numbers embedded for all curves together (~8 bytes each as JSON): the budget that keeps
# the page under 10 MB whatever the number of runs, and the bounds per curve.
CURVE_NUMBERS = 400000
MIN_POINTS, MAX_POINTS = 16, 600
SAMPLE_CHARS = 1500


class PageUnavailable(Exception):
    """uPlot is not installed (or not the pinned files): the page cannot be written."""


PACKAGED_UPLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "uplot")


def uplot_dir():
    """Where uPlot is: $ABLATE_UPLOT; else the copy `pip install ./analysis` puts in the
    package (analysis/setup.py); else the checkout's data/uplot (scripts/install-deps.sh)."""
    if os.environ.get("ABLATE_UPLOT"):
        return os.environ["ABLATE_UPLOT"]
    if os.path.isfile(os.path.join(PACKAGED_UPLOT, "uPlot.iife.min.js")):
        return PACKAGED_UPLOT
    return os.path.join(REPO, "data", "uplot")


def library():
    """(js, css) of the pinned uPlot, checked against UPLOT_FILES."""
    d = uplot_dir()
    out = []
    for name, sha in UPLOT_FILES.items():
        path = os.path.join(d, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            raise PageUnavailable("report.html not written: uPlot %s is not installed in %s "
                                  "(scripts/install-deps.sh installs it; ABLATE_UPLOT=DIR "
                                  "points elsewhere)" % (UPLOT_VERSION, d)) from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise PageUnavailable("report.html not written: %s is not uPlot %s's (SHA-256 "
                                  "differs; run scripts/install-deps.sh)" % (path, UPLOT_VERSION))
        out.append(data.decode("utf-8"))
    return out[0], out[1]


# ---------------------------------------------------------------- encoding

def _nums(a, sig=5):
    """A float array as a JSON-ready list, rounded to `sig` significant digits; non-finite
    values become null (a gap)."""
    out = []
    for v in np.asarray(a, dtype=float):
        out.append(float("%.*g" % (sig, v)) if math.isfinite(v) else None)
    return out


def _ints(a):
    return [int(v) for v in np.asarray(a)]


def minmax_keep(y, budget):
    """Indices of y to keep for at most ~budget points: every point when it fits, else the
    first and last point and, in each of budget/2 buckets of consecutive points, the
    minimum and the maximum (non-finite values are kept too: they are the blow-ups)."""
    n = len(y)
    if n <= budget:
        return np.arange(n)
    b = max(1, budget // 2)
    edges = np.linspace(0, n, b + 1).astype(int)
    bid = np.repeat(np.arange(b), np.diff(edges))
    y = np.asarray(y, dtype=float)
    fin = np.isfinite(y)
    lo = np.lexsort((np.where(fin, y, np.inf), bid))[edges[:-1]]
    hi = np.lexsort((np.where(fin, -y, np.inf), bid))[edges[:-1]]
    keep = [lo, hi, [0, n - 1], np.flatnonzero(~fin)[:budget]]
    return np.unique(np.concatenate(keep).astype(int))


def _table(df, cols, ident="config"):
    """{columns: [{key, label, digits}], rows: [[...]]} from df; cols: [(key, label,
    digits)], digits None for text, -1 for integers."""
    cols = [c for c in cols if c[0] in df.columns]
    rows = []
    for vals in df[[c[0] for c in cols]].itertuples(index=False):
        row = []
        for v, (key, _, digits) in zip(vals, cols):
            if digits is None:
                row.append("" if v is None or (isinstance(v, float) and math.isnan(v))
                           else str(v))
            else:
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    v = math.nan
                row.append(float("%.10g" % v) if math.isfinite(v) else None)
        rows.append(row)
    return {"columns": [{"key": k, "label": lab, "digits": d} for k, lab, d in cols],
            "rows": rows}


# ---------------------------------------------------------------- curves

def _budget(lines, numbers_per_point):
    if not lines:
        return MAX_POINTS
    k = CURVE_NUMBERS / (lines * numbers_per_point)
    return int(min(MAX_POINTS, max(MIN_POINTS, k)))


def _split(df, key, cols):
    """{key value: {col: numpy array}} of df sorted by (key, step), with no per-group
    pandas work (a 1,000-run sweep has millions of rows)."""
    df = df.sort_values([key, "step"], kind="stable")
    keys = df[key].to_numpy()
    arrs = {c: df[c].to_numpy() for c in cols if c in df}
    if not len(keys):
        return {}
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    return {keys[a]: {c: v[a:b] for c, v in arrs.items()} for a, b in zip(starts, ends)}


def _run_lines(df, ycol, run_pos, budget):
    """Per run of df: {r, step, tokens, time, y} downsampled by minmax_keep."""
    out = []
    if not len(df) or ycol not in df:
        return out
    for r, g in _split(df, "run", ["step", "tokens", "time", ycol]).items():
        r = int(r)
        if r not in run_pos:
            continue
        y = g[ycol].astype(float)
        if not np.isfinite(y).any():
            continue
        k = minmax_keep(y, budget)
        line = {"r": run_pos[r], "step": _ints(g["step"][k]), "y": _nums(y[k])}
        for x in ("tokens", "time"):
            if x in g:
                line[x] = _nums(g[x].astype(float)[k], 6)
        out.append(line)
    return out


def _throughput(steps, run_pos, budget):
    """Training tokens/s over training: the rate between consecutive kept points of each
    run's /steps (windows of equal step count)."""
    out = []
    if not len(steps):
        return out
    for r, g in _split(steps, "run", ["step", "tokens", "time"]).items():
        r = int(r)
        if r not in run_pos or len(g["step"]) < 2:
            continue
        t, tok = g["time"].astype(float), g["tokens"].astype(float)
        n = len(t)
        idx = np.unique(np.linspace(0, n - 1, min(n, budget // 2 + 1)).astype(int))
        if len(idx) < 2:
            continue
        dt, dk = np.diff(t[idx]), np.diff(tok[idx])
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(dt > 0, dk / dt, np.nan)
        j = idx[1:]
        out.append({"r": run_pos[r], "step": _ints(g["step"][j]),
                    "tokens": _nums(tok[j], 6), "time": _nums(t[j], 6), "y": _nums(rate)})
    return out


LAYER_SKIP = {"run", "step", "layer", "head", "seed", "index"}


def _layer_lines(sw, config_pos, budget_numbers):
    """Per configuration and layer: each activation statistic of /acts (whatever numeric
    columns the file has) and the attention entropy (mean over heads), each the mean over
    the configuration's runs that are not failed or diverged, against step."""
    bad = set(sw.runs[sw.runs["status"].isin(A.EXCLUDED)]["index"])
    acts = sw.acts[~sw.acts["run"].isin(bad)] if len(sw.acts) else sw.acts
    attn = sw.attn[~sw.attn["run"].isin(bad)] if len(sw.attn) else sw.attn
    ident = set(sw.axes) | set(["name", "status", "config", "group", "variant"])
    stats = [c for c in acts.columns if c not in LAYER_SKIP and c not in ident
             and pd.api.types.is_numeric_dtype(acts[c])] if len(acts) else []
    frames = []
    if stats:
        frames.append(acts.groupby(["config", "layer", "step"])[stats].mean())
    if len(attn):
        per_run = attn.groupby(["run", "config", "layer", "step"])["entropy"].mean()
        frames.append(per_run.groupby(["config", "layer", "step"]).mean()
                      .rename("attn_entropy").to_frame())
        stats.append("attn_entropy")
    if not frames:
        return [], [], []
    m = frames[0].join(frames[1], how="outer") if len(frames) == 2 else frames[0]
    m = m.reset_index()
    m["key"] = m["config"].map(config_pos).fillna(-1).astype(np.int64) * 1000000 + m["layer"]
    groups = _split(m[m["key"] >= 0], "key", ["step"] + stats)
    budget = _budget(len(groups) * len(stats), 1)
    lines = []
    for key, g in groups.items():
        n = len(g["step"])
        keep = np.arange(n) if n <= budget else \
            np.unique(np.linspace(0, n - 1, budget).astype(int))
        # statistics per layer are logged every stats.every steps (tens of points): the
        # budget above binds only for very large sweeps, where these are averages anyway
        line = {"c": int(key) // 1000000, "layer": int(key) % 1000000,
                "step": _ints(g["step"][keep])}
        for st in stats:
            line[st] = _nums(g[st].astype(float)[keep])
        lines.append(line)
    layers = sorted(int(v) for v in m["layer"].unique())
    return stats, layers, lines


# ---------------------------------------------------------------- the data

CONTRAST_COLS = [("config", "configuration", None), ("baseline", "baseline", None),
                 ("method", "test", None), ("split", "split", None), ("n", "n", -1),
                 ("diff", "difference", 4), ("lo", "95% CI lo", 4), ("hi", "95% CI hi", 4), ("p", "p", 4),
                 ("p_holm", "p (Holm)", 4), ("verdict", "verdict", None),
                 ("excluded_text", "excluded", None),
                 ("instability_rate", "unstable rate", 3),
                 ("instability_rate_baseline", "baseline unstable rate", 3),
                 ("mdd", "smallest resolvable", 4), ("seeds_needed", "seeds needed", -1)]
SEQUENTIAL_COLS = [("config", "configuration", None), ("baseline", "baseline", None),
                   ("method", "test", None), ("split", "split", None), ("n", "n", -1),
                   ("diff", "difference", 4), ("lo", "interval lo", 4), ("hi", "interval hi", 4),
                   ("level", "level", 4), ("verdict", "verdict", None)]
CONFIG_COLS = [("config", "configuration", None), ("n", "n", -1), ("planned", "planned", -1),
               ("excluded", "excluded (failed, diverged, unstable)", -1),
               ("instability_rate", "unstable rate", 3), ("val_loss_mean", "val loss", 4),
               ("val_loss_sd", "sd", 4), ("val_loss_lo", "95% CI lo", 4),
               ("val_loss_hi", "95% CI hi", 4), ("val_acc_mean", "val acc", 4),
               ("params", "params", -1), ("active_params", "active params", -1),
               ("flops_per_token", "FLOPs/token", -1),
               ("tokens_per_s_mean", "tokens/s", -1), ("mlp_zero_frac", "MLP zero frac", 3),
               ("mlp_near_zero_frac", "MLP near-zero frac", 3),
               ("mlp_max", "MLP max", 3), ("mlp_max_layers", "MLP max, largest layer", 3),
               ("mlp_pre_max_layers", "MLP pre-act max, largest layer", 3),
               ("mlp_val_max", "MLP max, val set, largest layer", 3),
               ("mlp_val_zero_frac", "MLP zero frac, val set", 3),
               ("attn_entropy", "attn entropy", 3),
               ("degenerate_greedy", "degenerate greedy", -1),
               ("repeating_greedy", "repeating greedy", -1),
               ("ngram_loop_greedy", "greedy n-gram loops", -1)]
LAYER_COLS = [("config", "configuration", None), ("layer", "layer", -1), ("n", "n", -1),
              ("mlp_zero_frac", "MLP zero frac", 3),
              ("mlp_near_zero_frac", "MLP near-zero frac", 3), ("mlp_max", "MLP max", 3),
              ("mlp_pre_max", "MLP pre-act max", 3), ("mlp_val_max", "MLP max, val set", 3),
              ("attn_entropy", "attn entropy", 3)]
RUN_COLS = [("name", "run", None), ("config", "configuration", None), ("seed", "seed", -1),
            ("status", "status", None), ("steps", "steps", -1), ("tokens", "tokens", -1),
            ("train_seconds", "train s", 1), ("tokens_per_s", "tokens/s", -1),
            ("final_val_loss", "final val loss", 4), ("final_val_acc", "final val acc", 4),
            ("host", "host", None), ("message", "message", None)]
MARGINAL_COLS = [("axis", "axis", None), ("value", "value", None), ("configs", "configs", -1),
                 ("runs", "runs", -1), ("mean", "mean val loss", 4), ("lo", "95% CI lo", 4),
                 ("hi", "95% CI hi", 4)]


# Where the page places each section of the report's recorded tables (Report.record):
# "lead" ahead of "Against the baseline" (report.md leads with it too), "verdicts" after
# it, "configs" after "Per configuration"; any other section after the verdicts.
SECTION_PLACE = {"factorial": "lead", "scale": "verdicts", "equal_flops": "verdicts",
                 "tuning": "configs"}


def sections(rep):
    """The report's recorded tables (Report.record) grouped by section, in report order:
    [{id, title, place, tables: [{id, heading, note, columns, rows}]}]."""
    out = []
    for t in getattr(rep, "tables", []):
        if not out or out[-1]["id"] != t["section"]:
            out.append({"id": t["section"], "title": t["title"],
                        "place": SECTION_PLACE.get(t["section"], "verdicts"), "tables": []})
        df = pd.DataFrame(t["rows"], columns=[c[0] for c in t["columns"]])
        out[-1]["tables"].append(dict(id=t["id"], heading=t.get("heading"), note=t["note"],
                                      **_table(df, t["columns"])))
    return out


def page_data(rep):
    """The JSON the page draws, from a Report whose sections have been computed."""
    sw = rep.sw
    order = list(sw.runs["config"].drop_duplicates())
    config_pos = {c: i for i, c in enumerate(order)}
    cfg = sw.configs().set_index("config")
    axes = [{"key": a, "label": A.label_of(a)} for a in sw.axes]
    # FLOPs per token of each configuration, the plan's exact count (/runs flops_per_token):
    # the page's FLOPs axis is training tokens times it
    fpt = (sw.runs.groupby("config")["flops_per_token"].first()
           if "flops_per_token" in sw.runs else pd.Series(dtype=float))
    configs = [{"name": c, "variant": str(cfg.loc[c, "variant"]),
                "axes": {a: str(cfg.loc[c, a]) for a in sw.axes},
                "flops": _flops(fpt.get(c))} for c in order]
    runs = sw.runs
    run_pos = {int(r): i for i, r in enumerate(runs["index"])}
    # each run's final validation loss where it enters the statistics (else null): the
    # grid's scatter and parallel coordinates draw these
    valid = set(A.valid_runs(sw)["index"])
    final = [float(v) if i in valid and np.isfinite(v) else None
             for i, v in zip(runs["index"], runs["final_val_loss"].astype(float))]
    run_list = [{"name": n, "c": config_pos[c], "seed": int(s), "status": st, "loss": f}
                for n, c, s, st, f in zip(runs["name"], runs["config"], runs["seed"],
                                          runs["status"], final)]
    # per-run curves: validation loss, training loss, gradient norm, throughput
    n_runs = max(1, len(runs))
    budget = _budget(n_runs * 4, 4)
    steps = sw.steps
    figures = []

    # smooth: whether EMA smoothing applies. Not to the validation loss (one point per
    # evaluation: a few dozen points, where an EMA lags by whole evaluations and reorders
    # configurations) nor to the learning rate (a schedule, not a noisy measurement).
    def fig(fid, title, ylabel, lines, smooth, xs=("step", "tokens", "time", "flops")):
        for ln in lines:
            ln["c"] = run_list[ln["r"]]["c"]
        figures.append({"id": fid, "title": title, "ylabel": ylabel, "xs": list(xs),
                        "lines": lines, "smooth": smooth})

    fig("val_loss", "Validation loss", "validation loss (nats/token)",
        _run_lines(sw.evals, "val_loss", run_pos, budget), False)
    fig("train_loss", "Training loss", "training loss (nats/token)",
        _run_lines(steps, "loss", run_pos, budget), True)
    fig("grad_norm", "Gradient norm", "gradient norm (before clipping)",
        _run_lines(steps, "grad_norm", run_pos, budget), True)
    # the learning rate is a function of the configuration: its first run's schedule
    first = steps.drop_duplicates("config")["run"] if len(steps) else []
    fig("lr", "Learning rate", "learning rate",
        _run_lines(steps[steps["run"].isin(first)], "lr", run_pos, budget) if len(steps)
        else [], False)
    fig("throughput", "Throughput", "training tokens/s", _throughput(steps, run_pos, budget),
        True)
    stats, layers, layer_lines = _layer_lines(sw, config_pos, CURVE_NUMBERS // 4)

    con = rep.contrasts
    seq = A.sequential_contrasts(rep.sw)  # a replicate: sweep: its own sequential verdicts
    fcon = con if seq is None else seq
    given = getattr(rep, "forest_frame", None)  # intervals given as they are (two sweeps)
    if given is not None:
        fcon = given
    forest = []
    if len(fcon):
        from .figures import forest_intervals
        # at the level each Holm verdict (or look) used
        iv = given[["lo", "hi", "level"]] if given is not None else forest_intervals(fcon)
        for (_, r), lo, hi, lv in zip(fcon.iterrows(), iv["lo"], iv["hi"], iv["level"]):
            if np.isfinite(float(r["diff"])):
                forest.append({"config": r["config"], "baseline": r["baseline"],
                               "diff": float(r["diff"]),
                               "lo": float(lo) if np.isfinite(lo) else None,
                               "hi": float(hi) if np.isfinite(hi) else None,
                               "level": float(lv) if np.isfinite(lv) else None,
                               "verdict": r["verdict"]})
    if seq is None:
        tables = [dict(id="verdict", title="Against the baseline",
                       **_table(_with_excluded_text(con), CONTRAST_COLS))]
    else:  # the sweep's own verdicts lead; the fixed-sample re-test follows, named so
        tables = [dict(id="verdict", title="Sequential verdicts (the sweep's own)",
                       **_table(seq, SEQUENTIAL_COLS)),
                  dict(id="fixed", title="Fixed-sample re-test (not the sweep's test)",
                       **_table(_with_excluded_text(con), CONTRAST_COLS))]
    tables += [
        dict(id="configs", title="Per configuration", **_table(rep.configs, CONFIG_COLS)),
        dict(id="layers", title="Per layer (last recorded step)",
             **_table(A.per_layer(sw), LAYER_COLS)),
    ]
    if sw.axes:
        tables.append(dict(id="marginals", title="Grid marginals",
                           **_table(A.marginals(sw), MARGINAL_COLS)))
    tables.append(dict(id="runs", title="Runs", **_table(runs, RUN_COLS)))

    samples = {}
    s = sw.samples
    rep_kind = A.repetition_kind(s) if len(s) else None
    for r, g in s.groupby("run", sort=False):
        if int(r) not in run_pos:
            continue
        period = g["loop_period"] if "loop_period" in g else [0] * len(g)
        samples[run_pos[int(r)]] = [
            {"kind": k, "t": float(t) if np.isfinite(t) else None,
             "text": str(x)[:SAMPLE_CHARS], "distinct": float(d), "longest": int(lr_),
             "degenerate": bool(dg), "repetition": rk, "period": int(pe)}
            for k, t, x, d, lr_, dg, rk, pe in zip(g["kind"], g["temperature"].astype(float),
                                                  g["text"], g["distinct_ratio"].astype(float),
                                                  g["longest_run"], g["degenerate"],
                                                  rep_kind[g.index], period)]
    attrs = dict(sw.attrs)
    prov = [[k, str(attrs[k]).strip()] for k in
            [k for k in rep_known_attrs() if k in attrs] +
            sorted(k for k in attrs if k not in rep_known_attrs())]
    return {
        "meta": {"title": sw.description or os.path.basename(sw.path),
                 "file": os.path.basename(sw.path), "status": sw.status,
                 "partial": bool(sw.partial), "runs": len(runs), "configs": len(order),
                 "baseline": getattr(rep, "baseline_why", ""),
                 "generated": datetime.datetime.now(datetime.timezone.utc)
                 .strftime("%Y-%m-%d %H:%M:%S UTC"),
                 "uplot": UPLOT_VERSION, "live": live_note(rep), "sequential": seq is not None,
                 "summary": getattr(rep, "summary", ""), "stamp": _stamp(rep),
                 "live_interval": (rep.watch or {}).get("interval")
                 if getattr(rep, "watch", None) else None},
        "axes": axes, "configs": configs, "runs": run_list, "figures": figures,
        "layers": {"stats": stats, "layers": layers, "lines": layer_lines},
        "forest": forest, "tables": tables, "sections": sections(rep), "samples": samples,
        "provenance": prov,
    }


def _flops(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _stamp(rep):
    """What identifies the data the page shows: the sweep file's identity (inode, mtime,
    size) when written. `--watch` writes it to report-live.js too; the page reloads itself
    only when that file names another (docs/analysis.md, "Live")."""
    try:
        st = os.stat(rep.sw.path)
        return "%d-%d-%d" % (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        return ""


def _with_excluded_text(con):
    """con with `excluded_text`: "k of n" runs of the configuration and its baseline left
    out (the markdown's "(k of n excluded)"), "" when none were."""
    con = con.copy()
    if "excluded" in con and len(con):
        con["excluded_text"] = [("%d of %d" % (k, n)) if k else ""
                                for k, n in zip(con["excluded"], con["ended"])]
    return con


def live_note(rep):
    """While `ablate-report --watch` keeps the page current: the sentence saying how fresh
    it is and that the sweep is still running (or None)."""
    w = getattr(rep, "watch", None)
    if not w or not w.get("running"):
        return None
    try:
        t = os.stat(rep.sw.path).st_mtime
        when = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    except OSError:
        when = "unknown"
    return ("Live: the sweep is still running. Data as of the view written %s; this page "
            "checks every %g s while ablate-report --watch runs and reloads itself when the "
            "data changed, keeping its zoom and toggles." % (when, w["interval"]))


def rep_known_attrs():
    from .report import KNOWN_ATTRS
    return KNOWN_ATTRS


# What JSON may not show raw inside a <script> element, and the escapes that say the same
# in JSON: "<" and ">" ("<!--" then "<script" puts the HTML parser in its double-escaped
# state, where "</script>" no longer ends the element and the rest of the page becomes
# script: a blank page), "&" for good measure, and U+2028/U+2029 (line ends to older
# JavaScript). Outside strings JSON has none of these characters, so replacing them all
# keeps the JSON's meaning exactly.
_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(obj):
    """obj as JSON that is safe as the text of a <script> element: no "<", ">" or "&"
    anywhere (each written \\u003c, \\u003e, \\u0026), so no string in it (a description,
    a run name, a sample) can end or re-open the element."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_ESCAPES)


class PageError(Exception):
    """The page would not show what it holds (a bug in its writer): not written."""


def check_script(text, what):
    """Raises PageError when text, the content of a <script> element, holds what the HTML
    standard forbids there ("<!--", "<script", "</script", any case): the browser would
    end the element elsewhere and show a blank or broken page."""
    low = text.lower()
    for bad in ("<!--", "<script", "</script"):
        if bad in low:
            raise PageError("report.html not written: %s holds %r, which would break the "
                            "page's <script> element (a bug in ablate-report)" % (what, bad))


def write_page(rep, path):
    """Writes the page for Report rep to path (atomically); returns path. Raises
    PageUnavailable without uPlot, PageError (nothing written) for a page that would not
    show its content."""
    js, css = library()
    data = script_json(page_data(rep))
    with open(TEMPLATE) as f:
        html = f.read()
    w = getattr(rep, "watch", None)
    if w:
        # --watch: the page loads report-live.js every interval and reloads itself only
        # when the stamp in it is another (the data changed), keeping its state; the final
        # page's stamp too, so that an open page reloads to it (and stops checking)
        stamp = json.loads(data)["meta"]["stamp"]
        live = os.path.join(os.path.dirname(os.path.abspath(path)), "report-live.js")
        with open(live + ".tmp", "w") as f:
            f.write("window.ablateLive && window.ablateLive(%s);\n" % script_json(stamp))
        os.replace(live + ".tmp", live)
    js = js.replace("</", "<\\/")
    check_script(js, "uPlot's script")
    check_script(data, "the page's data")
    html = (html.replace("/*UPLOT_CSS*/", css).replace("/*UPLOT_JS*/", js)
            .replace("/*DATA*/", data))
    with open(path + ".tmp", "w") as f:
        f.write(html)
    os.replace(path + ".tmp", path)
    return path
