"""The report's figures (matplotlib, Agg backend, PNG). Each function draws one figure
into a file and returns its path, or None when there is nothing to draw (said in the
report). Curves are the mean over seeds of one configuration with a band spanning the
seeds (min to max); they use every run that is not failed or diverged, so a running sweep
shows its progress so far."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .analyze import EXCLUDED  # noqa: E402
from .text import fig_text  # noqa: E402

MAX_LEGEND = 30
MAX_LAYER_PANELS = 8


LINESTYLES = ["-", "--", ":"]


def _styles(order):
    """{config: (color, linestyle)}: the ten tab10 colours, then again dashed and dotted
    (distinct at a glance up to 30 configurations); beyond, a viridis ramp."""
    n = len(order)
    if n <= 10 * len(LINESTYLES):
        cmap = plt.get_cmap("tab10")
        return {c: (cmap(i % 10), LINESTYLES[i // 10]) for i, c in enumerate(order)}
    cmap = plt.get_cmap("viridis")
    return {c: (cmap(i / max(1, n - 1)), "-") for i, c in enumerate(order)}


def _curve_rows(sw, df):
    bad = sw.runs[sw.runs["status"].isin(EXCLUDED)]["index"]
    return df[~df["run"].isin(bad)]


def _bands(df, x, y, by=("config",)):
    """Per (by..., step): mean x, and mean/min/max of y over seeds."""
    g = df.groupby(list(by) + ["step"], sort=False)
    out = g.agg(x=(x, "mean"), mean=(y, "mean"), lo=(y, "min"), hi=(y, "max"),
                n=(y, "size"))
    return out.reset_index().sort_values(list(by) + ["step"])


def _draw_curves(ax, b, order, colors, marker=None):
    """Draws each configuration's mean curve of bands b (from _bands) in its style
    (colors: from _styles), with its seed band
    when there are at most MAX_LEGEND configurations; beyond that, thin lines only, in one
    LineCollection (hundreds of bands are unreadable and slow to draw). Returns
    ({config: line handle}, [(x, mean, lo)] for _zoom)."""
    from matplotlib.collections import LineCollection
    groups = {c: g for c, g in b.groupby("config", sort=False)}
    many = len(order) > MAX_LEGEND
    handles, curves, segs, segc = {}, [], [], []
    for c in order:
        g = groups.get(c)
        if g is None:
            continue
        g = g[np.isfinite(g["x"].to_numpy(float))]
        if not len(g):
            continue
        x, m = g["x"].to_numpy(float), g["mean"].to_numpy(float)
        curves.append((x, m, g["lo"].to_numpy(float)))
        if many:
            segs.append(np.column_stack([x, m]))
            segc.append(colors[c][0])
            continue
        (handles[c],) = ax.plot(x, m, color=colors[c][0], ls=colors[c][1], lw=1.3,
                                marker=marker, ms=3)
        if (g["n"] > 1).any():
            ax.fill_between(x, g["lo"], g["hi"], color=colors[c][0], alpha=0.15, lw=0)
    if segs:
        ax.add_collection(LineCollection(segs, colors=segc, linewidths=0.6, alpha=0.7))
        ax.autoscale_view()
    return handles, curves


def _legend(fig, handles, labels, n_configs=0):
    if n_configs > MAX_LEGEND:
        right = max(ax.get_position().x1 for ax in fig.axes)
        fig.text(right + 0.01, 0.5, "%d configurations:\nno legend, no seed bands" % n_configs,
                 ha="left", va="center", fontsize=9)
        return
    if not handles:
        return
    if len(labels) > MAX_LEGEND:
        return
    right = max(ax.get_position().x1 for ax in fig.axes)  # next to the panels
    fig.legend(handles, [fig_text(x) for x in labels], loc="center left",
               bbox_to_anchor=(right + 0.01, 0.5),
               fontsize=8, frameon=False)


def robust_limits(lows, highs, k=2.0):
    """(lo, hi) of a figure with one curve per lows[i]/highs[i] (each curve's lowest and
    highest value): from the lowest value to the median curve's top plus k times the
    median curve's span above the lowest value, or the highest value when that is lower.
    A curve that blows up (one configuration in four at 13,000 nats) leaves the figure at
    the top instead of flattening the others; without one nothing is cut. The page's
    "robust y-limits" use the same rule. None when there is no finite value."""
    lo = np.asarray(lows, dtype=float)
    hi = np.asarray(highs, dtype=float)
    lo, hi = lo[np.isfinite(lo)], hi[np.isfinite(hi)]
    if not len(lo) or not len(hi):
        return None
    bottom, med = lo.min(), float(np.median(hi))
    return bottom, min(hi.max(), med + k * max(0.0, med - bottom))


def _zoom(ax, curves, frac=0.1, log=False):
    """y range that shows the end of training: each curve's values after the first `frac`
    of the x range (all of them when it has fewer than 6 points), within robust_limits,
    so that one blown-up configuration does not flatten every other curve (its curve
    leaves the figure at the top). On a log scale the rule applies to log y."""
    lows, highs = [], []
    for xs, m, lo in curves:
        late = xs >= xs.min() + frac * (xs.max() - xs.min()) if len(xs) >= 6 else \
            np.ones(len(xs), bool)
        v = np.concatenate([m[late], lo[late]])
        v = v[np.isfinite(v)]
        if log:
            v = np.log(v[v > 0])
        if len(v):
            lows.append(v.min())
            highs.append(np.nanmax(m[late]) if not log else v.max())
    lim = robust_limits(lows, highs)
    if lim is None or not lim[1] > lim[0]:
        return
    pad = 0.05 * (lim[1] - lim[0])
    lo, hi = lim[0] - pad, lim[1] + pad
    ax.set_ylim(*((np.exp(lo), np.exp(hi)) if log else (lo, hi)))


def _count_axis(ax):
    """Token counts as 500k, 1.5M, ... with few ticks: full integers run together past
    ~400k tokens."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def short(v, _pos):
        a = abs(v)
        if a >= 1e9:
            return "%gG" % float("%.3g" % (v / 1e9))
        if a >= 1e6:
            return "%gM" % float("%.3g" % (v / 1e6))
        if a >= 1e3:
            return "%gk" % float("%.3g" % (v / 1e3))
        return "%g" % v
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.xaxis.set_major_formatter(FuncFormatter(short))


def _save(fig, path):
    if fig._suptitle is not None:  # just above the panels' own titles
        fig._suptitle.set_y(0.99)
        fig._suptitle.set_va("bottom")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def val_loss(sw, order, path, log_y=False):
    """Validation loss against step, tokens and training time."""
    fig = val_loss_figure(sw, order, log_y)
    return _save(fig, path) if fig is not None else None


def val_loss_figure(sw, order, log_y=False):
    """The figure of val_loss (not saved), or None."""
    ev = _curve_rows(sw, sw.evals)
    ev = ev[ev["config"].isin(order)]
    ev = ev[np.isfinite(ev["val_loss"].astype(float))]
    if not len(ev):
        return None
    colors = _styles(order)
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    handles, labels = [], []
    for ax, (x, xl) in zip(axs, [("step", "optimizer step"), ("tokens", "training tokens"),
                                 ("time", "training time (s)")]):
        b = _bands(ev, x, "val_loss")
        h, curves = _draw_curves(ax, b, order, colors)
        if x == "step":
            handles, labels = list(h.values()), list(h)
        if log_y:
            ax.set_yscale("log")
        _zoom(ax, curves, log=log_y)
        if x == "tokens":
            _count_axis(ax)
        ax.set_xlabel(xl)
        ax.grid(alpha=0.3)
    axs[0].set_ylabel("validation loss (nats/token)")
    fig.suptitle("Validation loss: mean over seeds, band = min..max over seeds" +
                 (" (log scale)" if log_y else ""))
    _legend(fig, handles, labels, len(order))
    return fig


def _per_layer_panels(sw, df, rows, order, path, title):
    """rows: [(column, y label)]; one column of panels per layer (at most
    MAX_LAYER_PANELS, evenly chosen), lines per configuration against step."""
    df = _curve_rows(sw, df)
    df = df[df["config"].isin(order)]
    if not len(df):
        return None
    layers = sorted(df["layer"].unique())
    if len(layers) > MAX_LAYER_PANELS:
        pick = np.linspace(0, len(layers) - 1, MAX_LAYER_PANELS).round().astype(int)
        layers = [layers[i] for i in sorted(set(pick))]
    colors = _styles(order)
    fig, axs = plt.subplots(len(rows), len(layers), figsize=(3.6 * len(layers) + 1,
                                                           3.0 * len(rows)),
                            squeeze=False, sharex=True)
    handles, labels = [], []
    by_layer = {layer: g for layer, g in df.groupby("layer") if layer in layers}
    for i, (col, yl) in enumerate(rows):
        for j, layer in enumerate(layers):
            ax = axs[i][j]
            b = _bands(by_layer[layer], "step", col)
            h, _ = _draw_curves(ax, b, order, colors, marker=".")
            if i == 0 and j == 0:
                handles, labels = list(h.values()), list(h)
            if i == 0:
                ax.set_title("layer %d" % layer)
            if j == 0:
                ax.set_ylabel(yl)
            if i == len(rows) - 1:
                ax.set_xlabel("optimizer step")
            ax.grid(alpha=0.3)
    fig.suptitle(title)
    _legend(fig, handles, labels, len(order))
    return _save(fig, path)


def activations(sw, order, path):
    """MLP zero fraction and max activation per layer over training."""
    return _per_layer_panels(sw, sw.acts, [("zero_frac", "MLP zero fraction"),
                                          ("max", "MLP max activation")], order, path,
                             "MLP hidden activations per layer: mean over seeds, band = "
                             "min..max")


def attention_entropy(sw, order, path):
    """Attention entropy per layer (mean over heads) over training."""
    if not len(sw.attn):
        return None
    a = sw.attn.groupby(["run", "config", "step", "layer"], sort=False)["entropy"].mean()
    return _per_layer_panels(sw, a.reset_index(), [("entropy", "attention entropy (nats)")],
                             order, path, "Attention entropy per layer (mean over heads): "
                             "mean over seeds, band = min..max")


def _hbar(ax, labels, mean, lo, hi, color):
    y = np.arange(len(labels))[::-1]
    ax.barh(y, mean, color=color, alpha=0.8)
    err = np.vstack([np.nan_to_num(mean - lo), np.nan_to_num(hi - mean)])
    ax.errorbar(mean, y, xerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
    ax.set_yticks(y)
    ax.set_yticklabels([fig_text(x) for x in labels], fontsize=8)
    ax.grid(axis="x", alpha=0.3)


def throughput(configs, path):
    """Training tokens/s per configuration (mean, 95% CI)."""
    c = configs[np.isfinite(configs["tokens_per_s_mean"])]
    if not len(c):
        return None
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(c) + 1.5))
    _hbar(ax, list(c["config"]), c["tokens_per_s_mean"].to_numpy(),
          c["tokens_per_s_lo"].to_numpy(), c["tokens_per_s_hi"].to_numpy(), "tab:blue")
    ax.set_xlabel("training tokens/s (mean over seeds, 95% CI)")
    ax.set_title("Throughput")
    return _save(fig, path)


VERDICT_COLORS = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue"}


def forest_intervals(contrasts, alpha=0.05):
    """Each contrast's interval at the level its Holm verdict used: the contrast with the
    j-th smallest p of m is tested at alpha / (m - j + 1), so its interval is the
    1 - alpha / (m - j + 1) t interval (same df and standard error as its 95% one). An
    interval excludes 0 exactly when p is below that level; Holm resolves it when that
    also holds for every contrast with a smaller p. Returns a DataFrame with lo, hi and
    level (the test level) in the rows' order."""
    from scipy import stats as st
    c = contrasts
    if "sequential" in c.columns:  # analyze.sequential_contrasts: the sweep's own intervals
        return c[["lo", "hi", "level"]]
    p = c["p"].to_numpy(float)
    ok = np.isfinite(p)
    m = int(ok.sum())
    rank = np.full(len(c), -1)
    rank[np.flatnonzero(ok)[np.argsort(p[ok], kind="stable")]] = np.arange(m)
    level = np.where(ok, alpha / np.maximum(1, m - rank), np.nan)
    diff, lo95 = c["diff"].to_numpy(float), c["lo"].to_numpy(float)
    df = c["df"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        se = (diff - lo95) / st.t.ppf(0.975, df)
        h = st.t.ppf(1 - level / 2, df) * se
    return c.assign(lo=diff - h, hi=diff + h, level=level)[["lo", "hi", "level"]]


def forest(contrasts, path, what="final validation loss"):
    """Each contrast's difference with its interval at the level its Holm verdict used
    (forest_intervals), coloured by verdict, so that a coloured interval excludes 0 and
    a grey one does not (but for the step-down's rule: after the first unresolved
    contrast, none is resolved). x range: robust_limits over the intervals, so that one
    wide interval does not flatten the others to dots (it is cut, with an arrow)."""
    c = contrasts[np.isfinite(contrasts["diff"].astype(float))]
    if not len(c):
        return None
    iv = forest_intervals(c)
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(c) + 1.6))
    y = np.arange(len(c))[::-1]
    los, his = iv["lo"].to_numpy(float), iv["hi"].to_numpy(float)
    d = c["diff"].to_numpy(float)
    widths = np.where(np.isfinite(his - los), his - los, 0)
    med = float(np.median(widths)) if len(widths) else 0
    lo_all = np.nanmin(np.r_[los, d, 0.0])
    hi_all = np.nanmax(np.r_[his, d, 0.0])
    # a robust x range: centred data +- 3 median widths beyond the differences
    span = 3 * med if med > 0 else 0
    x0 = max(lo_all, min(np.nanmin(np.r_[d, 0.0]) - span, 0.0))
    x1 = min(hi_all, max(np.nanmax(np.r_[d, 0.0]) + span, 0.0))
    if not x1 > x0:
        x0, x1 = lo_all, hi_all
    for yi, (_, r), lo, hi in zip(y, c.iterrows(), los, his):
        col = VERDICT_COLORS.get(r["verdict"], "tab:gray")
        if np.isfinite(lo):
            ax.plot([max(lo, x0), min(hi, x1)], [yi, yi], color=col, lw=2)
            if lo < x0:
                ax.plot([x0], [yi], "<", color=col, ms=7)
            if hi > x1:
                ax.plot([x1], [yi], ">", color=col, ms=7)
        if x0 <= r["diff"] <= x1:
            ax.plot([r["diff"]], [yi], "o", color=col, ms=6)
    pad = 0.04 * (x1 - x0) if x1 > x0 else 1
    ax.set_xlim(x0 - pad, x1 + pad)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_ylim(-0.6, len(c) - 0.4)
    ax.set_yticks(y)
    ax.set_yticklabels([fig_text("%s − %s (%.3g%%)" % (r["config"], r["baseline"],
                                                        100 * (1 - lv)))
                        for (_, r), lv in zip(c.iterrows(), iv["level"])], fontsize=8)
    ax.set_xlabel("difference in %s; < 0 = lower loss than the baseline" % what)
    if "sequential" in c.columns:
        ax.set_title("The sweep's sequential verdicts: each interval the one of its last look, "
                     "valid over every look\n(level spent at that look in brackets; green "
                     "better, red worse, blue equivalent, grey open; arrows: cut)", fontsize=9)
    else:
        ax.set_title("Contrasts against the baseline, each interval at the level of its Holm "
                     "step (in brackets)\n(green better, red worse, grey not resolved; "
                     "arrows: cut)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def budget(table, t_star, path):
    """Fixed-time sweeps: tokens processed and the loss at equal tokens per configuration."""
    if table is None or not len(table):
        return None
    fig, axs = plt.subplots(1, 2, figsize=(12, 0.35 * len(table) + 1.8), sharey=True)
    labels = list(table["config"])
    _hbar(axs[0], labels, table["tokens_mean"].to_numpy(), table["tokens_lo"].to_numpy(),
          table["tokens_hi"].to_numpy(), "tab:purple")
    axs[0].set_xlabel("training tokens processed (mean, 95% CI)")
    y = np.arange(len(table))[::-1]
    m = table["val_loss_at_tokens"].to_numpy()
    err = np.vstack([np.nan_to_num(m - table["val_loss_at_tokens_lo"].to_numpy()),
                     np.nan_to_num(table["val_loss_at_tokens_hi"].to_numpy() - m)])
    axs[1].errorbar(m, y, xerr=err, fmt="o", color="tab:orange", capsize=3)
    axs[1].tick_params(axis="y", labelleft=False)
    axs[1].grid(axis="x", alpha=0.3)
    axs[1].set_xlabel("validation loss at %s tokens (mean, 95%% CI)" % format(int(t_star), ","))
    fig.suptitle("Budget: more tokens, or better per token?")
    return _save(fig, path)




def interactions(panels, path):
    """Interaction plots of a factorial grid sweep: one panel per pair of factors, a line per
    level of the first across the levels of the second, each point the mean loss over seeds
    (of the per-seed mean over the other factors' cells) with its 95% interval. Parallel
    lines: no interaction. panels: [(factor, factor2, cells, title)] with cells as
    analyze.interaction_cells gives them."""
    panels = [p for p in panels if len(p[2])]
    if not panels:
        return None
    n = len(panels)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, (fa, fb, cells, title) in zip(axes.ravel(), panels):
        xs = list(dict.fromkeys(cells["level2"]))
        for i, a in enumerate(dict.fromkeys(cells["level"])):
            g = cells[cells["level"] == a].set_index("level2").reindex(xs)
            x = np.arange(len(xs)) + (i - 0.5) * 0.04
            m = g["mean"].to_numpy(float)
            lo, hi = g["lo"].to_numpy(float), g["hi"].to_numpy(float)
            err = np.vstack([m - lo, hi - m])
            ax.errorbar(x, m, yerr=np.where(np.isfinite(err), err, 0), marker="o", capsize=3,
                        color=cmap(i % 10), label=fig_text("%s=%s" % (fa, a)))
        ax.set_xticks(np.arange(len(xs)))
        ax.set_xticklabels([fig_text(x) for x in xs], fontsize=8)
        ax.set_xlabel(fig_text(fb), fontsize=9)
        ax.set_ylabel("final validation loss", fontsize=9)
        ax.set_title(fig_text(title), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.suptitle("Interaction plots: mean over seeds of the per-seed mean over the other "
                 "factors' cells, 95% interval\n(parallel lines: no interaction)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
