"""The report's tables, computed from a loaded Sweep: per configuration (seeds pooled),
per layer, contrasts against the baseline, grid marginals and budgets.

Which runs count: a run enters the statistics when its status is `done`, its final
validation loss is finite and the instability rule did not flag it ("valid"). Failed,
diverged and unstable runs are listed, left out and counted in every cell that left them
out ("(k of n excluded)"); pending, running and interrupted runs are counted (the sweep is
partial) and left out. The instability flag is the run's own, decided in C
(src/worker/run_health.c, docs/metrics.md "Instability") and read from /runs
`instability`: it is never re-derived here.
"""

import math
import os
import re

import numpy as np
import pandas as pd

from . import stats as S
from .text import md_code

EXCLUDED = ("failed", "diverged")
# Why an ended run is left out of the statistics (run_exclusions); "" for a run that counts.
UNSTABLE = "unstable"
NO_FINAL_LOSS = "no final loss"


class BaselineError(ValueError):
    pass


def flagged_unstable(runs):
    """Boolean Series: the runs the instability rule flagged (/runs `instability` not
    `none`, as run_health.c recorded it). Files without the column (written before it
    existed) flag none: their diverged runs are left out by status all the same."""
    if "instability" not in runs:
        return pd.Series(False, index=runs.index)
    v = runs["instability"].fillna("none").astype(str).str.strip()
    return ~v.isin(("none", ""))


def run_exclusions(sw):
    """Per run of sw.runs (same index): why it is left out of the statistics: `failed`,
    `diverged`, `unstable` (done, flagged by the C rule), `no final loss` (done without a
    finite final validation loss); "" for a run that counts; None for a run that has not
    ended (pending, running, interrupted: not excluded, just not there yet)."""
    r = sw.runs
    st = r["status"].astype(str)
    out = pd.Series([None] * len(r), index=r.index, dtype=object)
    done = st == "done"
    out[done] = ""
    out[done & ~np.isfinite(r["final_val_loss"].astype(float))] = NO_FINAL_LOSS
    out[done & flagged_unstable(r)] = UNSTABLE
    for s in EXCLUDED:
        out[st == s] = s
    return out


def valid_runs(sw):
    """The runs that enter the statistics: done, a finite final validation loss, not
    flagged unstable."""
    return sw.runs[run_exclusions(sw) == ""]


def exclusion_counts(sw):
    """Per configuration (index): ended runs, excluded ones (failed, diverged, unstable,
    no final loss), runs flagged unstable (diverged ones included: the rule flags every
    diverged run) and those that trained (done or diverged: the instability rate's
    denominator; a failed run never trained)."""
    r = sw.runs
    why = run_exclusions(sw)
    st = r["status"].astype(str)
    trained = st.isin(("done", "diverged"))
    flag = (flagged_unstable(r) | (st == "diverged")) & trained
    df = pd.DataFrame({"config": r["config"], "ended": why.notna(),
                       "excluded": why.notna() & (why != ""), "unstable": flag,
                       "trained": trained})
    return df.groupby("config", sort=False)[["ended", "excluded", "unstable",
                                             "trained"]].sum().astype(int)


def excluded_note(k, n):
    """The mark of a cell whose statistic left runs out: "(k of n excluded)", or ""."""
    return "(%d of %d excluded)" % (k, n) if k else ""


def _last_step_rows(df):
    """Rows of each run's last recorded step (acts/attn at the end of training)."""
    if not len(df):
        return df
    last = df.groupby("run")["step"].transform("max")
    return df[df["step"] == last]


def _num_key(v):
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _first_valid(series, bad=-1):
    for v in series:
        if v is not None and np.isfinite(v) and v != bad:
            return v
    return math.nan


# ---------------------------------------------------------------- per configuration

def per_config(sw):
    """One row per configuration in plan order."""
    runs = sw.runs
    valid = valid_runs(sw)
    acts = _last_step_rows(sw.acts[sw.acts["run"].isin(valid["index"])])
    attn = _last_step_rows(sw.attn[sw.attn["run"].isin(valid["index"])])
    # per run: mean over layers (acts) and over layers and heads (attn)
    act_cols = ["zero_frac", "max"] + [c for c in NEAR_ZERO if c in acts]
    act_run = acts.groupby("run")[act_cols].mean() if len(acts) else None
    ent_run = attn.groupby("run")["entropy"].mean() if len(attn) else None
    amax = activation_maxima(sw, valid)
    samp = sw.samples
    greedy = samp[(samp["kind"] == "greedy") & samp["run"].isin(valid["index"])]
    rows = []
    empty = valid.iloc[:0]
    valid_by = {c: g for c, g in valid.groupby("config", sort=False)}
    exc = exclusion_counts(sw)
    for config, g in runs.groupby("config", sort=False):
        v = valid_by.get(config, empty)
        xc = exc.loc[config]
        loss = S.mean_ci(v["final_val_loss"])
        acc = S.mean_ci(v["final_val_acc"])
        tps = S.mean_ci(v["tokens_per_s"])
        idx = v["index"].to_numpy()
        zf = mx = ent = nz = math.nan
        if act_run is not None:
            a = act_run.reindex(idx).dropna(subset=["zero_frac", "max"])
            if len(a):
                zf, mx = float(a["zero_frac"].mean()), float(a["max"].mean())
                if NEAR_ZERO[0] in a:
                    nz = float(a[NEAR_ZERO[0]].mean())
        if ent_run is not None:
            e = ent_run.reindex(idx).dropna()
            if len(e):
                ent = float(e.mean())
        gs = greedy[greedy["run"].isin(idx)]
        am = amax.reindex(idx)
        counts = g["status"].value_counts()
        rows.append(dict(
            config=config, group=g["group"].iloc[0], variant=g["variant"].iloc[0],
            **{a: g[a].iloc[0] for a in sw.axes},
            planned=len(g), done=int(counts.get("done", 0)),
            excluded=int(xc["excluded"]), ended=int(xc["ended"]),
            unstable=int(xc["unstable"]), trained=int(xc["trained"]),
            instability_rate=xc["unstable"] / xc["trained"] if xc["trained"] else math.nan,
            unfinished=int(len(g) - xc["ended"]),
            n=loss["n"], seeds=" ".join(str(s) for s in sorted(v["seed"])),
            val_loss_mean=loss["mean"], val_loss_sd=loss["sd"], val_loss_lo=loss["lo"],
            val_loss_hi=loss["hi"], val_acc_mean=acc["mean"], val_acc_lo=acc["lo"],
            val_acc_hi=acc["hi"],
            params=_first_valid(g["params"]),
            # files before mixtures of experts have no active_params: every parameter is active
            active_params=_first_valid(g["active_params"] if "active_params" in g else g["params"]),
            flops_per_token=_first_valid(g["flops_per_token"]),
            kv_bytes_per_token=_first_valid(g["kv_bytes_per_token"]),
            tokens_per_s_mean=tps["mean"], tokens_per_s_lo=tps["lo"], tokens_per_s_hi=tps["hi"],
            tokens_mean=float(v["tokens"].mean()) if len(v) else math.nan,
            train_seconds_mean=float(v["train_seconds"].mean()) if len(v) else math.nan,
            mlp_zero_frac=zf, mlp_near_zero_frac=nz, mlp_max=mx, attn_entropy=ent,
            **{c: _mean(am[c]) for c in MAXIMA},
            mlp_val_max_top=float(am["mlp_val_max"].max()) if am["mlp_val_max"].notna().any()
            else math.nan,
            degenerate_greedy=int(gs["degenerate"].astype(bool).sum()), greedy_samples=len(gs),
            **repetition_counts(gs)))
    return pd.DataFrame(rows)


def _mean(series):
    s = series.dropna()
    return float(s.mean()) if len(s) else math.nan


# The activation maximum, taken over what (docs/analysis.md, "Activation maximum"): each
# per run, then the mean over its configuration's runs. mlp_max (above) is the mean over
# layers of each layer's maximum in the last recorded training batch; these take the
# largest layer instead, before (pre) or after the nonlinearity, and over the whole
# validation set of the final evaluation (stats.val), as a write-up states "the maximum".
MAXIMA = ("mlp_max_layers", "mlp_pre_max_layers", "mlp_val_max", "mlp_val_pre_max",
          "mlp_val_zero_frac")


def activation_maxima(sw, valid):
    """Per valid run (index): the MAXIMA columns (NaN where the file has no such rows)."""
    out = pd.DataFrame(index=pd.Index(valid["index"].to_numpy(), name="run"),
                       columns=list(MAXIMA), dtype=float)
    acts = _last_step_rows(sw.acts[sw.acts["run"].isin(valid["index"])])
    if len(acts):
        g = acts.groupby("run")
        out["mlp_max_layers"] = g["max"].max()
        if "pre_max" in acts:
            out["mlp_pre_max_layers"] = g["pre_max"].max()
    val = sw.val_acts
    val = _last_step_rows(val[val["run"].isin(valid["index"])]) if len(val) else val
    if len(val):
        g = val.groupby("run")
        out["mlp_val_max"] = g["max"].max()
        out["mlp_val_pre_max"] = g["pre_max"].max()
        out["mlp_val_zero_frac"] = g["zero_frac"].mean()
    return out


# /acts' share of |h| <= 0.1 x rms (docs/metrics.md): the sparsity of smooth activations
NEAR_ZERO = ("near_zero_frac",)
REPETITIONS = ("token_run", "ngram_loop")


def repetition_kind(samples):
    """Per sample: what it repeats, as /samples `repetition` records it (token_run,
    ngram_loop, none); files without the column: token_run where `degenerate`, else none."""
    if "repetition" in samples:
        return samples["repetition"].fillna("none").astype(str).str.strip()
    return samples["degenerate"].astype(bool).map({True: "token_run", False: "none"})


def repetition_counts(greedy):
    """{repeating_greedy: greedy samples that repeat themselves (any kind), token_run_greedy,
    ngram_loop_greedy}."""
    kind = repetition_kind(greedy) if len(greedy) else pd.Series([], dtype=object)
    out = {"repeating_greedy": int((kind != "none").sum())}
    for k in REPETITIONS:
        out[k + "_greedy"] = int((kind == k).sum())
    return out


def per_layer(sw):
    """MLP zero fraction, max activation and pre-activation max and attention entropy (mean
    over heads) at the last recorded step, and the max over the validation set at the final
    evaluation (stats.val), per configuration and layer, averaged over the valid runs."""
    valid = valid_runs(sw)
    acts = _last_step_rows(sw.acts[sw.acts["run"].isin(valid["index"])])
    attn = _last_step_rows(sw.attn[sw.attn["run"].isin(valid["index"])])
    cols = ["config", "layer", "n", "mlp_zero_frac", "mlp_near_zero_frac", "mlp_max",
            "mlp_pre_max", "mlp_val_max", "attn_entropy"]
    if not len(acts):
        return pd.DataFrame(columns=cols)
    extra = {"mlp_near_zero_frac": (NEAR_ZERO[0], "mean")} if NEAR_ZERO[0] in acts else {}
    if "pre_max" in acts:
        extra["mlp_pre_max"] = ("pre_max", "mean")
    a = acts.groupby(["config", "layer"], sort=False).agg(
        n=("run", "nunique"), mlp_zero_frac=("zero_frac", "mean"), mlp_max=("max", "mean"),
        **extra)
    for c in ("mlp_near_zero_frac", "mlp_pre_max"):
        if c not in a:
            a[c] = math.nan
    val = sw.val_acts
    val = _last_step_rows(val[val["run"].isin(valid["index"])]) if len(val) else val
    if len(val):
        a = a.join(val.groupby(["config", "layer"])["max"].mean().rename("mlp_val_max"))
    else:
        a["mlp_val_max"] = math.nan
    if len(attn):
        e = attn.groupby(["run", "config", "layer"])["entropy"].mean().reset_index()
        a = a.join(e.groupby(["config", "layer"])["entropy"].mean().rename("attn_entropy"))
    else:
        a["attn_entropy"] = math.nan
    return a.reset_index()[cols]


def sequential_contrasts(sw):
    """A replicate: sweep's own verdicts as a contrasts frame (config, baseline, diff, lo,
    hi, level, verdict, n), for the forest plot and the page: each contrast's interval is
    the sequential one of its last look (valid over every look and contrast), at the level
    that look spent. None for a sweep with fixed seeds."""
    con, dec = sw.replicate_contrasts, sw.replicate_decisions
    if con is None:
        return None
    level = {}
    for _, d in dec.iterrows() if len(dec) else []:
        level[int(d["contrast"])] = float(d["level"])
    out = pd.DataFrame({
        "config": con["configuration"].astype(str), "baseline": con["baseline"].astype(str),
        "method": "sequential", "n": con["n"],
        "diff": con["difference"].astype(float), "lo": con["lo"].astype(float),
        "hi": con["hi"].astype(float),
        "level": [level.get(int(c), math.nan) for c in con["contrast"]],
        "verdict": con["verdict"].astype(str), "sequential": True,
        "split": verdict_split(sw)[0]})
    # contrasts: main_effects / interactions (a file from before them: every row vs_base)
    out["kind"] = con["kind"].astype(str).to_numpy() if "kind" in con else "vs_base"
    out.attrs["delta"] = float(sw.attrs.get("replicate_delta", math.nan))
    return out


# ---------------------------------------------------------------- factorial contrasts

FACTORIAL_KINDS = ("main", "interaction")


def factorial_contrasts(sw):
    """A grid sweep's factorial contrasts (`contrasts: main_effects` or `interactions`,
    docs/spec.md): the /contrasts rows of kind main and interaction, with their factors and
    levels, each one's last look (n, diff, lo, hi: the sequential interval, valid over every
    look and contrast), look_level (the level that look spent) and verdict. None for any
    other sweep."""
    con = sw.replicate_contrasts
    if con is None or "kind" not in con:
        return None
    kind = con["kind"].astype(str)
    f = con[kind.isin(FACTORIAL_KINDS)]
    if not len(f):
        return None
    seq = sequential_contrasts(sw).set_index(con["contrast"].to_numpy())
    cols = ["factor", "level", "base_level", "factor2", "level2", "base_level2"]
    out = pd.DataFrame({"contrast": f["contrast"].astype(int).to_numpy(),
                        "kind": f["kind"].astype(str).to_numpy(),
                        "effect": f["configuration"].astype(str).to_numpy(),
                        "against": f["baseline"].astype(str).to_numpy()})
    for c in cols:
        out[c] = f[c].astype(str).to_numpy()
    rows = seq.loc[out["contrast"]]
    for c in ("n", "diff", "lo", "hi", "verdict"):
        out[c] = rows[c].to_numpy()
    out["look_level"] = rows["level"].to_numpy()  # the two-sided level its last look spent
    return out


def factor_columns(sw, factor):
    """The configs() columns of a /contrasts factor (a grid knob, a zip group's knobs
    joined by +, or `variant`); None when a knob is not an axis column of this file."""
    if factor == "variant":
        return ["variant"]
    cols = []
    for knob in factor.split("+"):
        hit = [a for a in sw.axes if _knob_of_axis(sw, a) == knob]
        if len(hit) != 1:
            return None
        cols.append(hit[0])
    return cols


def _levels(configs, cols):
    """Each configuration's level on a factor, as /contrasts writes it (values joined by +)."""
    return configs[cols].astype(str).agg("+".join, axis=1)


def interaction_cells(sw, factor, factor2, col="final_val_loss"):
    """The cell means behind an interaction plot: for each level of factor and of factor2,
    the mean over seeds of (per seed) the mean loss over the cells of the other factors, and
    its t interval over those seeds (95%). Only seeds whose every such cell has a valid run
    enter (the per-seed pairing the contrasts use). Columns level, level2, n, mean, lo, hi;
    levels in plan order. Empty when a factor is not found in /runs."""
    names = ["level", "level2", "n", "mean", "lo", "hi"]
    ca, cb = factor_columns(sw, factor), factor_columns(sw, factor2)
    if not ca or not cb:
        return pd.DataFrame(columns=names)
    cfg = sw.configs().set_index("config")
    la, lb = _levels(cfg, ca), _levels(cfg, cb)
    valid = valid_runs(sw)
    v = pd.DataFrame({"config": valid["config"].to_numpy(), "seed": valid["seed"].to_numpy(),
                      "loss": valid[col].astype(float).to_numpy()})
    v["a"] = la.reindex(v["config"]).to_numpy()
    v["b"] = lb.reindex(v["config"]).to_numpy()
    cells = pd.DataFrame({"a": la, "b": lb}).groupby(["a", "b"], sort=False).size()
    rows = []
    for a in pd.unique(la):
        for b in pd.unique(lb):
            if (a, b) not in cells.index:
                continue
            g = v[(v["a"] == a) & (v["b"] == b)]
            per = g.groupby("seed").agg(k=("config", "nunique"), m=("loss", "mean"))
            per = per[per["k"] == cells[(a, b)]]["m"].to_numpy()
            n = len(per)
            mean = float(per.mean()) if n else math.nan
            lo = hi = math.nan
            if n > 1:
                h = S.st.t.ppf(0.5 + S.LEVEL / 2, n - 1) * float(np.std(per, ddof=1)) / \
                    math.sqrt(n)
                lo, hi = mean - h, mean + h
            rows.append(dict(level=a, level2=b, n=n, mean=mean, lo=lo, hi=hi))
    return pd.DataFrame(rows, columns=names)


ROUTING_NUM = ("router_entropy", "moe_max_frac", "moe_balance", "moe_zloss", "moe_dropped",
               "moh_entropy", "moh_balance")
ROUTING_SHARES = ("expert_frac", "head_frac")


def _mean_shares(texts):
    """The element-wise mean of space-separated shares ("0.25 0.5 0.25"), formatted alike;
    "" when none of them has any."""
    rows = [[float(x) for x in str(t).split()] for t in texts if str(t).strip()]
    if not rows or len({len(r) for r in rows}) != 1:
        return ""
    return " ".join("%.4g" % v for v in np.mean(np.array(rows), axis=0))


def routing(sw, last_only=True):
    """Mixture-of-experts and mixture-of-heads routing per configuration and layer (issue
    21): each expert's and head's share of the tokens, the router's entropy, the balance and
    z-losses, the share dropped by a capacity, averaged over the valid runs, at the last
    recorded step (last_only) or at every recorded step (a column `step`). Only the blocks
    that route; empty for a sweep without MoE or MoH (or a file from before them)."""
    cols = ["config", "layer"] + ([] if last_only else ["step"]) + ["n"] + \
        list(ROUTING_NUM) + list(ROUTING_SHARES)
    acts = sw.acts
    if not len(acts) or not all(c in acts for c in ROUTING_NUM + ROUTING_SHARES):
        return pd.DataFrame(columns=cols)
    valid = valid_runs(sw)
    acts = acts[acts["run"].isin(valid["index"])]
    if last_only:
        acts = _last_step_rows(acts)
    routed = acts["expert_frac"].astype(str).str.strip().ne("") | \
        acts["head_frac"].astype(str).str.strip().ne("")
    acts = acts[routed]
    if not len(acts):
        return pd.DataFrame(columns=cols)
    keys = ["config", "layer"] + ([] if last_only else ["step"])
    g = acts.groupby(keys, sort=False)
    out = g.agg(n=("run", "nunique"), **{c: (c, "mean") for c in ROUTING_NUM})
    for c in ROUTING_SHARES:
        out[c] = g[c].agg(_mean_shares)
    return out.reset_index()[cols]


# ---------------------------------------------------------------- baseline

def calibration(sw):
    """A calibrated fixed-time sweep's trials per configuration (train.calibrate),
    in the runs' configuration order: trials n, median tokens/s with its min and max, the
    spread max/min - 1, the 1-minute load averages seen when the trials ended (min, max),
    the hosts and BLAS cores, and the step budget its runs got (/runs calibrated_steps: min
    and max over its runs, 0 while not all trials are in) with the tokens that means
    (steps x batch_size x context). Empty for a file without /calibration."""
    cal = sw.calibration
    cols = ["config", "group", "trials", "tokens_per_s_median", "tokens_per_s_min",
            "tokens_per_s_max", "spread", "load1_min", "load1_max", "hosts", "blas_core",
            "calibrated_steps_min", "calibrated_steps_max", "tokens_per_step",
            "calibrated_tokens_min", "calibrated_tokens_max"]
    if cal is None or not len(cal):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    runs = sw.runs
    order = list(runs["config"].drop_duplicates())
    order += [c for c in cal["configuration"].drop_duplicates() if c not in order]
    rows = []
    for cfg in order:
        t = cal[cal["configuration"] == cfg]
        if not len(t):
            continue
        tps = t["tokens_per_s"].astype(float).to_numpy()
        load = t["load1"].astype(float).to_numpy()
        load = load[np.isfinite(load)]
        r = runs[runs["config"] == cfg]
        steps = r["calibrated_steps"].astype(float) if "calibrated_steps" in r else \
            pd.Series(dtype=float)
        per_step = np.nan
        if len(r) and "train.batch_size" in r and "model.context" in r:
            per_step = float(r["train.batch_size"].iloc[0]) * float(r["model.context"].iloc[0])
        smin = steps.min() if len(steps) else np.nan
        smax = steps.max() if len(steps) else np.nan
        rows.append({
            "config": cfg, "group": t["group"].iloc[0], "trials": len(t),
            "tokens_per_s_median": float(np.median(tps)), "tokens_per_s_min": tps.min(),
            "tokens_per_s_max": tps.max(), "spread": tps.max() / tps.min() - 1,
            "load1_min": load.min() if len(load) else np.nan,
            "load1_max": load.max() if len(load) else np.nan,
            "hosts": " ".join(sorted(set(t["host"]))),
            "blas_core": " ".join(sorted(set(t["blas_core"]))),
            "calibrated_steps_min": smin, "calibrated_steps_max": smax,
            "tokens_per_step": per_step,
            "calibrated_tokens_min": smin * per_step, "calibrated_tokens_max": smax * per_step})
    return pd.DataFrame(rows, columns=cols)


def _canon(v):
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return str(v).strip().strip("'\"")


def _spec_base_value(spec, knob):
    """The value the spec's base writes for knob (dotted `model.n_head: 4`, or the section
    form `model: {n_head: 4}` / block `n_head: 4`), or None. A reading of the common
    spellings, not a YAML parser: grid lists (`[...]` or a block list) are not values."""
    section, _, short = knob.rpartition(".")
    pats = [r"(?<![\w.])%s\s*:\s*([^\s,{}\[\]#]+|\"[^\"]*\"|'[^']*')" % re.escape(knob)]
    if section:
        pats.append(r"(?<![\w.])%s\s*:\s*([^\s,{}\[\]#]+|\"[^\"]*\"|'[^']*')"
                    % re.escape(short))
    for pat in pats:
        for m in re.finditer(pat, spec):
            line_start = spec.rfind("\n", 0, m.start()) + 1
            line = spec[line_start:m.start()]
            if line.lstrip().startswith("#"):
                continue
            return m.group(1)
    return None


def _ablate_binary():
    import shutil
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for c in (os.environ.get("ABLATE_BIN"), shutil.which("ablate"),
              os.path.join(repo, "build", "ablate")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def resolved_base(sw):
    """The spec's base configuration as ablate resolves it, preset defaults included
    ({knob: value}): the file's /base_config (sw.base_config). For files without it
    (written before it was added) it is re-resolved, or None when that cannot be had (no
    `ablate` binary: $ABLATE_BIN, `ablate` on PATH or <repo>/build/ablate; no PyYAML; a
    base ablate refuses). It runs
    `ablate plan --json` on the spec's `base:` alone, with the grid, variants and seeds
    left out and the data replaced by a generated corpus of every printable ASCII
    character (the data set no knob a grid names, and the plan must not depend on the
    data being where they were)."""
    if getattr(sw, "base_config", None) is not None:
        return sw.base_config
    if hasattr(sw, "_resolved_base"):
        return sw._resolved_base
    sw._resolved_base = None
    binary = _ablate_binary()
    try:
        import yaml
        spec = yaml.safe_load(sw.spec)
    except Exception:  # no PyYAML, or not YAML it reads: keep the spec's own values only
        return None
    if not binary or not isinstance(spec, dict) or not isinstance(spec.get("base"), dict):
        return None
    import json
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="ablate-report-base-") as d:
        corpus = os.path.join(d, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(("".join(chr(i) for i in range(32, 127)) + "\n\t") * 200)
        path = os.path.join(d, "base.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"data": {"path": corpus, "tokenizer": "char"},
                            "base": spec["base"], "seeds": 1}, f)
        try:
            p = subprocess.run([binary, "plan", path, "--json"], capture_output=True,
                               text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
    if p.returncode != 0:
        return None
    try:
        sw._resolved_base = json.loads(p.stdout.splitlines()[0])["config"]
    except (ValueError, KeyError, IndexError):
        return None
    return sw._resolved_base


def label_of(column):
    """The run-name label of a grid-axis column (`axis.lr` -> `lr`)."""
    return column[5:] if column.startswith("axis.") else column


def _knob_of_axis(sw, column):
    label = label_of(column)
    if label in sw.knobs:
        return label
    cands = [k for k in sw.knobs if k.endswith("." + label)]
    return cands[0] if len(cands) == 1 else None


def baseline_map(sw, name=None):
    """{config: its baseline config} for every contrasted configuration, and a sentence
    saying how the baseline was chosen (or why there is none: then the map is empty).

    --baseline NAME: a configuration's label (`baseline`, `n_head=4/activation=gelu`), a
    variant name (each configuration is compared with that variant at the same grid point),
    or `key=value` parts that single out one configuration. Without NAME: the `baseline`
    variant (at the same grid point); for grids without variants, the configuration whose
    axis values are the ones the spec's base writes."""
    cfg = sw.configs()
    labels = list(cfg["config"])
    variants = [v for v in cfg["variant"].unique() if v]
    axes = sw.axes

    def by_variant(var, why):
        base = cfg[cfg["variant"] == var]
        key = {tuple(r[a] for a in axes): r["config"] for _, r in base.iterrows()}
        m = {}
        for _, r in cfg.iterrows():
            b = key.get(tuple(r[a] for a in axes))
            if r["variant"] != var and b is not None:
                m[r["config"]] = b
        return m, why

    def single(b, why):
        return {c: b for c in labels if c != b}, why

    if name is not None:
        if name in labels:
            return single(name, "%s (--baseline)" % md_code(name))
        if name in variants:
            return by_variant(name, "the %s variant at the same grid point (--baseline)"
                              % md_code(name))
        parts = dict(p.partition("=")[::2] for p in name.split("/") if "=" in p)
        cols = sw.axis_columns
        if parts and all(k in cols for k in parts):
            hit = cfg[np.logical_and.reduce([cfg[cols[k]] == v for k, v in parts.items()])]
            if len(hit) == 1:
                return single(hit["config"].iloc[0], "%s (--baseline %s)"
                              % (md_code(hit["config"].iloc[0]), name))
        raise BaselineError("--baseline %s matches no single configuration (configurations: %s%s)"
                            % (name, ", ".join(labels[:12]), ", ..." if len(labels) > 12 else ""))
    if "baseline" in variants and len(variants) > 1:
        if axes:
            return by_variant("baseline", "the `baseline` variant at the same grid point")
        return single("baseline", "the `baseline` variant")
    if axes and not (len(variants) > 1):
        want, preset = {}, False
        for a in axes:
            k = _knob_of_axis(sw, a)
            # the file's resolved base; older files: what the spec writes, else re-resolved
            in_file = getattr(sw, "base_config", None) is not None
            v = _spec_base_value(sw.spec, k) if k and not in_file else None
            if v is None and k:  # the resolved base: the preset's default (or ablate's own)
                v = (resolved_base(sw) or {}).get(k)
                if isinstance(v, bool):
                    v = "true" if v else "false"
                preset = preset or v is not None
            if v is None:
                return {}, ("the spec's base does not write a value for grid axis "
                            "%s (pass --baseline, e.g. --baseline %s=%s)"
                            % (md_code(label_of(a)), label_of(a), cfg[a].iloc[0]))
            want[a] = _canon(v)
        hit = cfg[np.logical_and.reduce([cfg[a].map(_canon) == want[a] for a in axes])]
        if len(hit) == 1:
            return single(hit["config"].iloc[0], "the base configuration %s (the spec's base "
                          "values of the grid axes%s)" % (md_code(hit["config"].iloc[0]),
                                                          ", its preset's defaults included"
                                                          if preset else ""))
        return {}, ("the base configuration (%s) is not in the grid (pass "
                    "--baseline)" % ", ".join("%s=%s" % kv for kv in want.items()))
    if len(variants) > 1:
        return {}, "the sweep has no `baseline` variant (pass --baseline)"
    return {}, "the sweep has a single configuration"


# ---------------------------------------------------------------- contrasts

def family_map(sw, bmap, patterns):
    """(bmap restricted to the contrasts of the Holm family, sentence): --family PATTERN
    (shell patterns on the configuration's label, as --only) chooses which contrasts form
    the family that Holm adjusts over; without patterns the family is every contrast of
    the file. Raises BaselineError for a sweep that pre-declared its family (/contrasts:
    an adaptive sweep's verdicts are made in the sweep, at its family's levels, and are
    never re-adjusted) and for patterns that select no contrast."""
    import fnmatch
    if not patterns:
        return dict(bmap), ""
    if getattr(sw, "declared_family", False):
        raise BaselineError("--family: %s pre-declares its family of contrasts (/contrasts); "
                            "its verdicts are not re-adjusted" % os.path.basename(sw.path))
    fam = {c: b for c, b in bmap.items()
           if any(fnmatch.fnmatchcase(c, p) for p in patterns)}
    if bmap and not fam:
        raise BaselineError("--family %s matches no contrasted configuration (%s%s)"
                            % (",".join(patterns), ", ".join(list(bmap)[:12]),
                               ", ..." if len(bmap) > 12 else ""))
    left = [c for c in bmap if c not in fam]
    return fam, ("Holm family chosen with --family %s: %d of %d contrasts%s."
                 % (",".join(patterns), len(fam), len(bmap),
                    "; not tested: %s" % ", ".join(md_code(c) for c in left) if left else ""))


SPLITS = {"test": "final_test_loss", "validation": "final_val_loss"}


def verdict_split(sw):
    """(split, column) the verdicts are on: ("test", "final_test_loss") when the sweep has a
    held-out test split, else ("validation", "final_val_loss"). A replicate: sweep's is the
    one its rule used (root attribute replicate_split); otherwise test when every run has
    data.test_fraction > 0 and the file has final_test_loss. Tuning and selection read the
    validation split; verdicts the test split, which nothing selected on."""
    at = str(sw.attrs.get("replicate_split", "")).strip()
    if sw.replicate_contrasts is not None and at in SPLITS:
        return at, SPLITS[at]
    r = sw.runs
    if len(r) and "data.test_fraction" in r and "final_test_loss" in r and \
            bool((r["data.test_fraction"].astype(float) > 0).all()):
        return "test", SPLITS["test"]
    return "validation", SPLITS["validation"]


def _by_seed(df, config, col):
    g = df[df["config"] == config]
    return dict(zip(g["seed"], g[col].astype(float)))


def contrasts(sw, bmap, values=None, col="final_val_loss", alpha=S.ALPHA):
    """One row per configuration with a baseline: b - a of `col` over seeds (paired where
    seeds match, else Welch), its t interval, p, Holm-adjusted p over the family, the
    verdict, the smallest difference the current n resolves (80% power) and the seeds the
    observed difference needs. Power figures use the family's strictest Holm level
    alpha / m, so a difference of that size is resolved whatever its rank."""
    df = valid_runs(sw) if values is None else values
    rows = []
    for config, base in bmap.items():
        a, b = _by_seed(df, base, col), _by_seed(df, config, col)
        a = {s: v for s, v in a.items() if np.isfinite(v)}
        b = {s: v for s, v in b.items() if np.isfinite(v)}
        if not a or not b:  # nothing to compare (no valid run on one side)
            continue
        res = S.contrast(a, b)
        rows.append(dict(config=config, baseline=base, **res))
    cols = ["config", "baseline", "method", "n", "na", "nb", "diff", "lo", "hi", "t", "df",
            "p", "p_holm", "verdict", "mdd", "seeds_needed"]
    if not rows:
        return pd.DataFrame(columns=cols + ["excluded", "ended", "instability_rate",
                                            "instability_rate_baseline"])
    out = pd.DataFrame(rows)
    out["p_holm"] = S.holm(out["p"])
    m = max(1, int(np.isfinite(out["p"]).sum()))
    level = alpha / m
    verdicts, mdd, need = [], [], []
    for _, r in out.iterrows():
        n_label = str(r["n"]) if r["method"] == "paired" or r["na"] == r["nb"] else \
            "%d+%d" % (r["nb"], r["na"])
        verdicts.append(S.verdict(r["diff"], r["p_holm"], n_label, alpha))
        res = r.to_dict()
        mdd.append(S.min_detectable(res, level))
        k = S.seeds_needed(res, alpha=level)
        need.append(math.nan if k is None else k)
    out["verdict"] = verdicts
    out["mdd"] = mdd
    out["seeds_needed"] = need
    out["alpha_power"] = level
    # the split the compared numbers are on (a /runs column or loss_at_tokens: validation)
    out["split"] = "test" if col == SPLITS["test"] else "validation"
    out = out[cols + ["sd_diff", "sd_a", "sd_b", "alpha_power", "split"]]
    for annotate in CONTRAST_ANNOTATIONS:
        out = annotate(sw, out)
    return out


def exclusion_columns(sw, con):
    """The contrast rows' exclusions, as outcomes next to the verdict: `excluded` of
    `ended` runs of the configuration and its baseline together (the cell's "(k of n
    excluded)"), each side's own counts (`excluded_config`, `excluded_baseline`), and each
    side's instability rate (`unstable` of `trained` runs: flagged by the C rule, diverged
    included)."""
    con = con.copy()
    exc = exclusion_counts(sw)

    def col(configs, what):
        return [int(exc[what].get(c, 0)) for c in configs]
    for side, key in (("config", "config"), ("baseline", "baseline")):
        con["excluded_" + side] = col(con[key], "excluded")
        con["ended_" + side] = col(con[key], "ended")
        u, t = col(con[key], "unstable"), col(con[key], "trained")
        suffix = "" if side == "config" else "_baseline"
        con["unstable" + suffix] = u
        con["trained" + suffix] = t
        con["instability_rate" + suffix] = [a / b if b else math.nan for a, b in zip(u, t)]
    con["excluded"] = con["excluded_config"] + con["excluded_baseline"]
    con["ended"] = con["ended_config"] + con["ended_baseline"]
    return con


# Functions (sw, contrasts DataFrame) -> DataFrame that add columns to every contrast table
# (the verdicts and the equal-tokens table alike), in order: a new outcome next to the
# verdict is one more entry here and its columns in report.CONTRAST_COLUMNS.
CONTRAST_ANNOTATIONS = [exclusion_columns]


def not_compared(sw, bmap, con):
    """[(config, baseline, excluded, ended)] of the pairs in bmap with no contrast row
    because one side has no valid run, and some runs of theirs were excluded."""
    exc = exclusion_counts(sw)
    have = set(zip(con["config"], con["baseline"])) if len(con) else set()
    out = []
    for c, b in bmap.items():
        if (c, b) in have:
            continue
        k = int(exc["excluded"].get(c, 0) + exc["excluded"].get(b, 0))
        n = int(exc["ended"].get(c, 0) + exc["ended"].get(b, 0))
        if k:
            out.append((c, b, k, n))
    return out


# ---------------------------------------------------------------- grids

SEED_KNOBS = ("model.init_seed", "train.data_seed")


def seed_variance(sw, col="final_val_loss"):
    """The seed-to-seed spread of each configuration split into its initialisation and its
    data order, where a sweep crosses them (model.init_seed x train.data_seed, each -1
    meaning the run's seed): the runs that differ only in those two knobs (and the seed) form
    a family; with at least two values of each and every pair present, a two-way analysis of
    variance without replication over the pairs' means gives each factor's variance
    component, (MS_factor - MS_residual) / (levels of the other), floored at 0, and the
    residual's (their interaction and what else varies). Returns one row per family:
    family, init_values, data_values, runs, sd_init, sd_data, sd_residual, share_init,
    share_data, share_residual (shares of the summed components)."""
    cols = ["family", "init_values", "data_values", "runs", "sd_init", "sd_data",
            "sd_residual", "share_init", "share_data", "share_residual"]
    r = valid_runs(sw)
    if not len(r) or any(k not in r.columns for k in SEED_KNOBS):
        return pd.DataFrame(columns=cols)
    r = r.copy()
    r["_init"] = np.where(r["model.init_seed"] >= 0, r["model.init_seed"], r["seed"])
    r["_data"] = np.where(r["train.data_seed"] >= 0, r["train.data_seed"], r["seed"])
    others = [c for c in sw.knobs if c in r.columns and c not in SEED_KNOBS]
    rows = []
    for _, fam in r.groupby([r[c].astype(str) for c in others], sort=False):
        cell = fam.groupby(["_init", "_data"])[col].mean().unstack()
        n_i, n_d = cell.shape
        if n_i < 2 or n_d < 2 or cell.isna().to_numpy().any():
            continue
        y = cell.to_numpy(dtype=float)
        m = y.mean()
        a, b = y.mean(axis=1), y.mean(axis=0)
        ms_i = n_d * np.sum((a - m) ** 2) / (n_i - 1)
        ms_d = n_i * np.sum((b - m) ** 2) / (n_d - 1)
        ms_r = np.sum((y - a[:, None] - b[None, :] + m) ** 2) / ((n_i - 1) * (n_d - 1))
        v_i, v_d, v_r = max(0.0, (ms_i - ms_r) / n_d), max(0.0, (ms_d - ms_r) / n_i), ms_r
        total = v_i + v_d + v_r
        name = "/".join(seg for seg in str(fam["config"].iloc[0]).split("/")
                        if seg.split("=")[0] not in ("init_seed", "data_seed") and
                        seg.split("=")[0] not in SEED_KNOBS) or "(base)"
        rows.append(dict(family=name, init_values=n_i, data_values=n_d, runs=len(fam),
                         sd_init=math.sqrt(v_i), sd_data=math.sqrt(v_d),
                         sd_residual=math.sqrt(v_r),
                         share_init=v_i / total if total > 0 else math.nan,
                         share_data=v_d / total if total > 0 else math.nan,
                         share_residual=v_r / total if total > 0 else math.nan))
    return pd.DataFrame(rows, columns=cols)


def marginals(sw, col="final_val_loss"):
    """For each grid axis (and the variant, when a grid has variants), each value's mean
    over the configurations that have it, with equal weight per configuration, and its
    t interval: var = sum(s_c^2 / n_c) / k^2 with Welch-Satterthwaite df (the other axes
    are held as fixed effects; seeds are the noise)."""
    valid = valid_runs(sw)
    dims = list(sw.axes)
    if dims and sw.runs["variant"].nunique() > 1:
        dims = ["variant"] + dims
    rows = []
    if not dims or not len(valid):
        return pd.DataFrame(columns=["axis", "value", "configs", "runs", "mean", "lo", "hi"])
    per = valid.groupby("config", sort=False).agg(
        mean=(col, "mean"), var=(col, lambda x: np.var(x, ddof=1) if len(x) > 1 else np.nan),
        n=(col, "size"))
    per = per.join(sw.configs().set_index("config")[dims])
    for a in dims:
        for value in sorted(per[a].unique(), key=_num_key):
            g = per[per[a] == value]
            k = len(g)
            mean = float(g["mean"].mean())
            q = (g["var"] / g["n"]).to_numpy()
            lo = hi = math.nan
            if k and np.all(np.isfinite(q)) and q.sum() > 0:
                se = math.sqrt(q.sum()) / k
                df = q.sum() ** 2 / np.sum(q * q / (g["n"].to_numpy() - 1))
                h = S.st.t.ppf(0.5 + S.LEVEL / 2, df) * se
                lo, hi = mean - h, mean + h
            rows.append(dict(axis=label_of(a), value=value, configs=k, runs=int(g["n"].sum()),
                             mean=mean, lo=lo, hi=hi))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- budgets

def is_fixed_time(sw):
    return "train.seconds" in sw.runs and bool((sw.runs["train.seconds"].astype(float) > 0).any())


def loss_at_tokens(sw, tokens):
    """Each valid run's validation loss at `tokens` training tokens, linearly interpolated
    between its evaluations (NaN when the run's evaluations do not reach that far)."""
    valid = valid_runs(sw)
    ev = sw.evals[sw.evals["run"].isin(valid["index"])]
    out = {}
    for r, g in ev.groupby("run"):
        g = g.sort_values("tokens")
        x, y = g["tokens"].to_numpy(float), g["val_loss"].to_numpy(float)
        ok = np.isfinite(x) & np.isfinite(y)
        out[r] = float(np.interp(tokens, x[ok], y[ok], left=np.nan, right=np.nan)) \
            if ok.any() else math.nan
    v = valid[["index", "config", "seed"]].copy()
    v["val_loss_at_tokens"] = v["index"].map(out).astype(float)
    return v


def budgets(sw):
    """(table, equal_tokens, values): tokens processed per configuration (mean and t
    interval over seeds) and the validation loss at equal tokens, at the largest token
    count every valid run evaluated at or beyond (its last evaluation), interpolated."""
    valid = valid_runs(sw)
    ev = sw.evals[sw.evals["run"].isin(valid["index"])]
    if not len(ev):
        return pd.DataFrame(), math.nan, None
    t_star = float(ev.groupby("run")["tokens"].max().min())
    vals = loss_at_tokens(sw, t_star)
    rows = []
    for config, g in valid.groupby("config", sort=False):
        tok = S.mean_ci(g["tokens"])
        sec = S.mean_ci(g["train_seconds"])
        at = S.mean_ci(vals[vals["config"] == config]["val_loss_at_tokens"])
        fin = S.mean_ci(g["final_val_loss"])
        rows.append(dict(config=config, n=tok["n"], tokens_mean=tok["mean"], tokens_lo=tok["lo"],
                         tokens_hi=tok["hi"], train_seconds_mean=sec["mean"],
                         final_val_loss=fin["mean"], equal_tokens=t_star,
                         val_loss_at_tokens=at["mean"], val_loss_at_tokens_lo=at["lo"],
                         val_loss_at_tokens_hi=at["hi"]))
    return pd.DataFrame(rows), t_star, vals


# ---------------------------------------------------------------- overview

def overview(sw):
    r = sw.runs
    status = r["status"].value_counts().reindex(
        ["done", "running", "pending", "interrupted", "diverged", "failed"]).dropna()
    extra = r["status"].value_counts().drop(status.index, errors="ignore")
    status = pd.concat([status, extra]).astype(int)
    tokens = r["tokens"].clip(lower=0).astype(float)
    flops = (r["flops_per_token"].astype(float).where(r["flops_per_token"] > 0, 0) * tokens)
    compute = dict(train_seconds=float(r["train_seconds"].clip(lower=0).fillna(0).sum()),
                   tokens=float(tokens.sum()), flops=float(flops.sum()),
                   steps=float(r["steps"].clip(lower=0).sum()))
    why = run_exclusions(sw)
    bad = r[why.notna() & (why != "")].copy()
    bad["excluded"] = why[bad.index]
    for c, fill in (("instability", "none"), ("unstable_step", -1), ("unstable_loss", math.nan)):
        if c not in bad:
            bad[c] = fill
    return status, compute, bad[["name", "status", "excluded", "instability", "unstable_step",
                                 "unstable_loss", "steps", "message"]]
