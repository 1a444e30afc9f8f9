"""A tune: sweep's choices (the file's /tuning, docs/spec.md "tune"): each configuration's
tuning curve (the selection metric against the tuned knob, on the tuning seeds) and, for a
contrast between two configurations, whether its sign holds at every candidate near each
side's optimum.

Pure functions over the /tuning table (a DataFrame with its columns: configuration,
candidate, knobs, values, value, rung, fraction, seeds, val_loss, chosen); the report
(report.py) writes them.

Successive halving: a candidate stopped at a rung before the last has its metric at that
rung (fraction < 1), not comparable with the full budget's; the curves and the sign near the
optima use the candidates that reached the last rung (fraction 1) only. The file's
/tuning_rungs (every candidate's result at every rung, and whether it went on) is what
rung_table() lays out."""
import math


def configurations(tuning):
    """The configurations of /tuning, in the order of their config index."""
    if tuning is None or not len(tuning):
        return []
    first = tuning.sort_values(["config", "candidate"]).drop_duplicates("configuration")
    return list(first["configuration"])


def full(tuning):
    """The rows of /tuning whose candidate reached the last rung (the full budget)."""
    if "fraction" not in tuning.columns:
        return tuning
    return tuning[tuning["fraction"] >= 1 - 1e-9]


def curve(tuning, config):
    """[(value, val_loss, chosen, values_text), ...] of one configuration's candidates that
    reached the full budget, by value (the first tuned knob as a number; candidates whose
    value is not numeric keep their order)."""
    t = full(tuning)
    t = t[t["configuration"] == config].sort_values("candidate")
    pts = [(float(r["value"]), float(r["val_loss"]), bool(r["chosen"]), str(r["values"]))
           for _, r in t.iterrows()]
    if all(not math.isnan(p[0]) for p in pts):
        pts.sort(key=lambda p: p[0])
    return pts


def chosen(tuning, config):
    """(value, val_loss, values_text) of the configuration's choice, or None."""
    for v, loss, c, text in curve(tuning, config):
        if c:
            return v, loss, text
    return None


def edge(tuning, config):
    """"highest" or "lowest" when the configuration's choice is the highest or lowest value
    of the tuned knob it tried (with 3 or more distinct numeric values: with 2, every choice
    is at an edge and says nothing), else None. Every candidate counts, the ones successive
    halving stopped early too: they are the range tried. A choice at an edge may not be the
    optimum, which can lie beyond the range."""
    ch = chosen(tuning, config)
    if ch is None or math.isnan(ch[0]):
        return None
    t = tuning[tuning["configuration"] == config]
    vals = sorted(set(float(v) for v in t["value"] if not math.isnan(float(v))))
    if len(vals) < 3:
        return None
    if ch[0] >= vals[-1]:
        return "highest"
    if ch[0] <= vals[0]:
        return "lowest"
    return None


def neighbourhood_factor(tuning, factor=2.0):
    """The factor "near the optimum" spans: `factor`, widened to the largest ratio between
    adjacent candidate values (so that the neighbours of the optimum are always in it)."""
    f = factor
    for config in configurations(tuning):
        vals = sorted(v for v, _, _, _ in curve(tuning, config) if v > 0)
        for a, b in zip(vals, vals[1:]):
            f = max(f, b / a)
    return f


def near(pts, best, factor):
    """The points of a curve whose value is within `factor` of the optimum's."""
    return [p for p in pts if p[0] > 0 and best / factor * (1 - 1e-9) <= p[0] <=
            best * factor * (1 + 1e-9)]


def sensitivity(tuning, a, b, factor=2.0):
    """Does the sign of the contrast a - b (the selection metric at each side's chosen
    value) hold at every pair of candidates within `factor` of each side's optimum (widened
    as neighbourhood_factor says)? Returns a dict: holds (True/False; None when either side
    has no choice or no numeric values), factor, knob, diff (at the optima), flip (the first
    pair (value_a, value_b, diff) of the other sign, or None), n_pairs, text."""
    knob = str(tuning["knobs"].iloc[0]).split(" ")[0] if len(tuning) else "?"
    ca, cb = chosen(tuning, a), chosen(tuning, b)
    out = {"holds": None, "factor": factor, "knob": knob, "diff": math.nan, "flip": None,
           "n_pairs": 0, "text": "no choice to compare"}
    if ca is None or cb is None or math.isnan(ca[0]) or math.isnan(cb[0]):
        return out
    f = neighbourhood_factor(tuning, factor)
    d = ca[1] - cb[1]
    out.update(factor=f, diff=d)
    if not math.isfinite(d) or d == 0:
        out["text"] = "no sign at the optima (difference %s)" % d
        return out
    pa, pb = near(curve(tuning, a), ca[0], f), near(curve(tuning, b), cb[0], f)
    flip = None
    for va, la, _, _ in pa:
        for vb, lb, _, _ in pb:
            out["n_pairs"] += 1
            x = la - lb
            if flip is None and not (x * d > 0):
                flip = (va, vb, x)
    out["flip"] = flip
    out["holds"] = flip is None
    span = "%g" % round(f, 2)
    if flip is None:
        out["text"] = "holds for %s within %sx of each optimum (%d pairs)" % (knob, span,
                                                                              out["n_pairs"])
    else:
        out["text"] = "flips at %s=%g (%s) vs %g (%s): %+.4f against %+.4f at the optima" % (
            knob, flip[0], a, flip[1], b, flip[2], d)
    return out


def figure(tuning, path):
    """The tuning curves: the selection metric against the first tuned knob (log x), one
    line per configuration, its choice circled. Returns path, or None without numeric
    values."""
    from . import figures as F  # matplotlib, only when drawing
    plt = F.plt
    configs = configurations(tuning)
    if not configs or tuning["value"].isna().any():
        return None
    knob = str(tuning["knobs"].iloc[0]).split(" ")[0]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    colors = plt.get_cmap("tab10")
    for i, c in enumerate(configs):
        pts = [p for p in curve(tuning, c) if math.isfinite(p[1])]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                color=colors(i % 10), label=c or "baseline")
        best = [p for p in pts if p[2]]
        if best:
            ax.plot([best[0][0]], [best[0][1]], marker="o", ms=10, mfc="none",
                    color=colors(i % 10))
    if (tuning["value"] > 0).all():
        ax.set_xscale("log")
    # a diverging candidate's loss would flatten the rest: clip at 1.3x the worst choice
    at_full = full(tuning)
    finite = at_full["val_loss"][at_full["val_loss"].map(math.isfinite)]
    picked = at_full["val_loss"][at_full["chosen"] == 1]
    top = 1.3 * float(picked.max()) if len(picked) else math.inf
    clipped = len(finite) and float(finite.max()) > top
    if clipped:
        ax.set_ylim(top=top)
    ax.set_xlabel(knob)
    ax.set_ylabel("final validation loss (tuning seeds)")
    ax.set_title("Tuning curves (circled: the chosen value%s)"
                 % ("; clipped at 1.3x the worst choice" if clipped else ""))
    ax.legend(fontsize=7)
    return F._save(fig, path)


def rung_table(rungs):
    """Successive halving's rungs, one row per configuration and rung: [configuration, rung
    (1-based, "r of R"), fraction of the budget, "values: loss" of each candidate there (the
    ones that trained on marked *, at the last rung the choice)], from /tuning_rungs (a
    DataFrame: configuration, config, candidate, values, rung, fraction, val_loss, promoted).
    [] without rungs or with one rung only (every candidate at the full budget)."""
    if rungs is None or not len(rungs) or int(rungs["rung"].max()) < 1:
        return []
    n_rungs = int(rungs["rung"].max()) + 1
    rows = []
    for (k, r), g in rungs.sort_values(["config", "rung", "candidate"]).groupby(
            ["config", "rung"], sort=True):
        cells = ["%s: %s%s" % (v, "%.4f" % x if math.isfinite(x) else "diverged",
                               "*" if p else "")
                 for v, x, p in zip(g["values"], g["val_loss"], g["promoted"])]
        rows.append([str(g["configuration"].iloc[0]) or "baseline",
                     "%d of %d" % (int(r) + 1, n_rungs),
                     "%.3g" % float(g["fraction"].iloc[0]), ", ".join(cells)])
    return rows
