"""ablate-report: a sweep file to DIR/report.md, DIR/report.html (page.py), the figures as
PNG and every table as CSV; the verdict table on stdout.

    analysis/ablate-report OUT.h5 -o DIR [--baseline NAME] [--only P] [--exclude P]
                           [--log-y] [--family P] [--watch [SECONDS]] [--json]
    analysis/ablate-report A.h5 B.h5 -o DIR [--json]      (two sweeps: compare.py)
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import pandas as pd

from . import analyze as A
from . import equal_flops as EF
from . import figures as F
from . import page as P
from . import scaling as SC
from . import stats as S
from . import tuning as T
from .load import SweepFileError, load
from .text import Md, md_code, md_prose, md_text, term_text, text_lines

KNOWN_ATTRS = ["status", "start_time", "end_time", "sessions", "ranks", "hostnames",
               "ablate_version", "git_rev", "compiler", "c_flags", "mpi_version",
               "hdf5_version", "openblas_version", "blas_core", "ablate_schema_version",
               "view_built_by"]


# ---------------------------------------------------------------- formatting

def _nan(x):
    return x is None or (isinstance(x, (float, np.floating)) and not np.isfinite(x))


def fnum(x, d=4):
    return "—" if _nan(x) else "%.*f" % (d, x)


def fint(x):
    return "—" if _nan(x) or x < 0 else format(int(round(x)), ",")


def fsig(x, d=3):
    if _nan(x):
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return "%.*e" % (d - 1, x)
    return "%.*g" % (d, x)


def fpct(x, d=1):
    return "—" if _nan(x) else "%.*f%%" % (d, 100 * x)


def fp(p):
    if _nan(p):
        return "—"
    return "%.4f" % p if p >= 1e-4 else "%.1e" % p


def fci(lo, hi, d=4):
    return "—" if _nan(lo) or _nan(hi) else "[%.*f, %.*f]" % (d, lo, d, hi)


def fsigned(x, d=4):
    return "—" if _nan(x) else "%+.*f" % (d, x)


def cell(v):
    """A table cell: v as text (md_text) unless it is Md; | escaped (GFM's rule, inside
    code spans too), one line."""
    s = v if isinstance(v, Md) else md_text(v)
    return s.replace("|", "\\|").replace("\n", " ")


def md_table(headers, rows, align=None):
    if not rows:
        return "_(none)_\n"
    align = align or ["---"] * len(headers)
    out = ["| " + " | ".join(cell(h) for h in headers) + " |",
           "|" + "|".join(align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(cell(v) for v in r) + " |")
    return "\n".join(out) + "\n"


def fence(text):
    """A fenced block whose fence is longer than any run of backticks in text."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    f = "`" * max(3, longest + 1)
    return "%s\n%s\n%s\n" % (f, text.rstrip("\n"), f)


# ---------------------------------------------------------------- the report

def select_configs(order, only=(), exclude=()):
    """The configurations of order (plan order kept) that match a pattern of `only` (all
    when empty) and none of `exclude`: shell patterns (fnmatch) on the configuration's
    label, e.g. `explode`, `activation=gelu/*`, `*lr=5*`."""
    import fnmatch

    def hit(c, pats):
        return any(fnmatch.fnmatchcase(c, p) for p in pats)
    return [c for c in order if (not only or hit(c, only)) and not hit(c, exclude)]


def curves(sw):
    """Every curve of the file in long form, one row per (run, step, metric): run, name,
    config, seed, step, tokens, time, metric (loss, lr, grad_norm from /steps; val_loss,
    val_acc from /evals), value."""
    parts = []
    for df, metrics in ((sw.steps, ("loss", "lr", "grad_norm")),
                        (sw.evals, ("val_loss", "val_acc"))):
        metrics = [m for m in metrics if m in df]
        if not len(df) or not metrics:
            continue
        keep = [c for c in ("run", "name", "config", "seed", "step", "tokens", "time") if c in df]
        parts.append(df[keep + metrics].melt(id_vars=keep, value_vars=metrics,
                                              var_name="metric", value_name="value"))
    cols = ["run", "name", "config", "seed", "step", "tokens", "time", "metric", "value"]
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True).sort_values(
        ["run", "metric", "step"], kind="stable").reindex(columns=cols)


def _test_cell(r):
    return "paired, %d seeds" % r["n"] if r["method"] == "paired" else \
        "Welch, %d vs %d" % (r["nb"], r["na"])


def _need_cell(r):
    need = r["seeds_needed"]
    if need == math.inf:
        return Md("> %s" % format(S.MAX_SEEDS, ","))
    return "—" if _nan(need) else "≈ %d" % need


def with_excluded(text, k, n):
    """A statistic's cell with the runs it left out: `text (k of n excluded)`."""
    note = A.excluded_note(int(k), int(n)) if not (_nan(k) or _nan(n)) else ""
    return "%s %s" % (text, note) if note else text


def rate_cell(k, n):
    """An instability rate: `k of n` (runs flagged of runs that trained), `—` for none."""
    if _nan(n) or not n:
        return "—"
    return "%d of %d" % (k, n)


def repeating_cell(r):
    """Greedy samples that repeat themselves: `k of n`, with the kinds found when k > 0."""
    k, n = int(r["repeating_greedy"]), int(r["greedy_samples"])
    kinds = ", ".join("%s %d" % (x, r[x + "_greedy"]) for x in A.REPETITIONS
                      if r.get(x + "_greedy", 0))
    return "%d of %d" % (k, n) + (" (%s)" % kinds if kinds else "")


def one_seed_caveat(tuning):
    """" ..." when every candidate rests on one tuning seed: its loss is one run's, and a
    sign near the optima compares single runs; "" otherwise."""
    if tuning is None or "seeds" not in tuning.columns or not len(tuning):
        return ""
    if int(tuning["seeds"].max()) > 1:
        return ""
    return (" With one tuning seed each candidate's loss is one run's, as noisy as one "
            "comparison seed: a choice or a sign decided by less than the comparison runs' "
            "seed-to-seed spread is that seed's, and more tuning seeds (`tune.seeds`) "
            "settle it.")


def edge_caveat(at_edge, n_configs, knob):
    """The sentence for choices at an edge of the range tried ([(configuration, "highest" or
    "lowest"), ...]), or ""."""
    if not at_edge:
        return ""
    names = ", ".join("%s (%s)" % (md_text(c), e) for c, e in at_edge)
    return ("%d of %d configurations chose the highest or lowest %s tried: %s. Their "
            "optimum may lie beyond the range, so their contrasts compare the best value "
            "tried, not each optimum; widen `tune.knobs` past that edge to settle it."
            % (len(at_edge), n_configs, md_text(knob), names))


def _instability_cell(r):
    return "%s; baseline %s" % (rate_cell(r.get("unstable", math.nan), r.get("trained")),
                                rate_cell(r.get("unstable_baseline", math.nan),
                                          r.get("trained_baseline")))


# The verdict table's columns, (header, alignment, cell of a contrasts row), in order: a
# new outcome (e.g. a sequential verdict) is one more row here.
CONTRAST_COLUMNS = [
    ("configuration", "---", lambda r: r["config"]),
    ("baseline", "---", lambda r: r["baseline"]),
    ("test", "---", _test_cell),
    ("split", "---", lambda r: r.get("split", "validation")),
    ("difference", "--:", lambda r: with_excluded(fsigned(r["diff"]), r.get("excluded", 0),
                                                   r.get("ended", 0))),
    ("95% CI", "--:", lambda r: fci(r["lo"], r["hi"])),
    ("p", "--:", lambda r: fp(r["p"])),
    ("p (Holm)", "--:", lambda r: fp(r["p_holm"])),
    ("verdict", "---", lambda r: "**%s**" % r["verdict"] if r["verdict"] in ("better", "worse")
     else r["verdict"]),
    ("unstable runs", "--:", _instability_cell),
    ("smallest resolvable (80% power)", "--:", lambda r: fnum(r["mdd"])),
    ("seeds for the observed difference", "--:", _need_cell),
]


# The columns the page shows of the tables Report.record keeps (key, label, digits: None
# text, -1 integer); --json carries every key of their rows.
FACTORIAL_COLS = [("effect", "effect", None), ("against", "against", None),
                  ("verdict", "verdict", None), ("n", "n", -1), ("diff", "difference", 4),
                  ("lo", "interval lo", 4), ("hi", "interval hi", 4)]
RUNG_COLS = [("contrast", "contrast", None), ("rung", "rung", -1),
             ("rung_values", "values", None), ("flops", "training FLOPs", -1), ("n", "n", -1),
             ("diff", "difference", 4), ("lo", "95% CI lo", 4), ("hi", "95% CI hi", 4)]
TREND_COLS = [("contrast", "contrast", None), ("n_rungs", "rungs", -1),
              ("slope", "slope / decade", 4), ("slope_lo", "95% CI lo", 4),
              ("slope_hi", "95% CI hi", 4), ("df_slope", "df", 1), ("chi2", "χ²", 2),
              ("dof", "dof", -1), ("verdict", "verdict", None), ("why", "why", None),
              ("fit_largest", "fit at largest rung", 4), ("fit_largest_lo", "lo", 4),
              ("fit_largest_hi", "hi", 4),
              ("extrapolated", "extrapolation: fit at %gx its FLOPs" % SC.EXTRAPOLATE_FACTOR, 4),
              ("extrapolated_lo", "lo", 4), ("extrapolated_hi", "hi", 4)]
TUNING_COLS = [("configuration", "configuration", None), ("chosen", "chosen", None),
               ("at_edge", "at an edge of the range", None), ("val_loss", "val loss", 4),
               ("candidates_text", "candidates (val loss)", None),
               ("sign", "sign near the optima", None)]
EQUAL_FLOPS_COLS = [("config", "configuration", None), ("baseline", "baseline", None),
                    ("split", "split", None), ("flops", "FLOPs", -1),
                    ("fraction", "fraction", 3), ("n", "n", -1),
                    ("loss_config", "val loss (configuration)", 4),
                    ("loss_baseline", "val loss (baseline)", 4), ("diff", "difference", 4),
                    ("lo", "95% CI lo", 4), ("hi", "95% CI hi", 4),
                    ("end_diff", "difference at the end", 4), ("end_lo", "end CI lo", 4),
                    ("end_hi", "end CI hi", 4)]


class Report:
    def __init__(self, sw, outdir, baseline=None, only=(), exclude=(), log_y=False,
                 family=(), watch=None):
        # a tune: sweep's tuning runs have their own section (tuning): every other one,
        # contrasts and their Holm family first, reads the comparison runs only
        self.all_sw = sw
        self.sw = sw.comparison()
        self.dir = outdir
        self.baseline = baseline
        self.family = list(family)
        self.watch = watch  # {"interval": s, "running": bool} while --watch refreshes
        self.only, self.exclude, self.log_y = list(only), list(exclude), log_y
        self.md = []
        self.files = []
        self.tables = []  # the sections' tables the page and --json carry too (record)

    def w(self, *lines):
        self.md.extend(lines)

    def csv(self, df, name):
        path = os.path.join(self.dir, name)
        df.to_csv(path, index=False)
        self.files.append(name)
        return name

    def record(self, section, title, tid, columns, rows, note="", heading=None):
        """Records a table of a report.md section for the page (page_data: in the section
        `section` headed `title`, the table under `heading` when given, with `note`) and
        --json (under the key `tid`): the rows its markdown table is written from, at full
        precision, so the three say the same. columns: [(key, label, digits)] the page
        shows (page.py's tables: digits None for text, -1 for integers); rows: a DataFrame
        or dicts, every key of which --json carries."""
        if isinstance(rows, pd.DataFrame):
            rows = rows.to_dict("records")
        self.tables.append({"section": section, "title": title, "note": note, "id": tid,
                            "heading": heading, "columns": list(columns), "rows": list(rows)})

    def fig(self, path, alt):
        if path:
            name = os.path.basename(path)
            self.files.append(name)
            self.w("![%s](%s)" % (alt, name), "")
        return path

    # -------------------------------------------------------- sections

    def header(self):
        sw = self.sw
        desc = sw.description
        self.w("# Sweep report: %s" % md_text(desc or os.path.basename(sw.path)), "")
        live = P.live_note(self)
        if live:
            self.w("> **%s** (report.md is rewritten with it.)" % live, "")
        if sw.partial:
            done = int((sw.runs["status"] == "done").sum())
            self.w("> **Partial:** the sweep is `%s`; %d of %d runs are done. Statistics use "
                   "the finished runs only and will change." % (sw.status, done, len(sw.runs)),
                   "")
        if sw.unavailable:  # a live view read while some of its rows could not be
            self.w("> **Rows unavailable:** these runs' rows are left out of the tables "
                   "named (the view's segments could not be read; re-run the report on the "
                   "final file):", ">")
            self.w(*["> - %s" % md_text(n) for n in sw.unavailable_notes], "")
        self.summary_at = len(self.md)  # the verdicts in a sentence, once they are known
        self.w("", "")

    def overview(self):
        sw = self.all_sw  # the tuning runs too: they are runs the sweep trained
        status, compute, bad = A.overview(sw)
        desc = sw.description
        self.w("## Overview", "")
        n_tuning = getattr(self.sw, "n_tuning_runs", 0)
        self.w("File %s (schema version %d), sweep status **%s**, %d runs in %d "
               "configurations%s." % (md_code(os.path.basename(sw.path)), sw.schema_version,
                                      md_text(sw.status), len(sw.runs),
                                      self.sw.runs["config"].nunique(),
                                      "; %d of the runs are tuning runs (their own section, "
                                      "Tuning; every other section reads the %d comparison "
                                      "runs)" % (n_tuning, len(self.sw.runs))
                                      if n_tuning else ""), "")
        if desc:
            self.w("Description: %s" % md_text(desc), "")
        self.w("Provenance (build, libraries, hosts, data files): [at the end](#provenance).",
               "")
        self.w("### Runs by status", "")
        st = status.rename_axis("status").reset_index(name="runs")
        self.w(md_table(["status", "runs"], st.values.tolist()))
        self.csv(st, "status.csv")
        self.w("### Compute spent", "")
        self.w(md_table(["training time (s, summed over runs)", "optimizer steps",
                         "training tokens", "training FLOPs"],
                        [[fnum(compute["train_seconds"], 1), fint(compute["steps"]),
                          fint(compute["tokens"]), fsig(compute["flops"])]]))
        self.w("### Failed, diverged and unstable runs", "")
        if len(bad):
            self.w("Left out of every statistic below; each cell that leaves runs out says "
                   "so (\"(k of n excluded)\"). *Unstable*: the run's training loss broke the "
                   "instability rule (docs/metrics.md, \"Instability\"), decided by the run "
                   "itself; such a run can be `done`.", "")
            self.w(md_table(["run", "status", "steps", "message", "instability"],
                            [[r["name"], r["status"], fint(r["steps"]), r["message"] or "—",
                              "—" if str(r["instability"]).strip() in ("none", "") else
                              "%s from step %s (loss %s)" % (r["instability"],
                                                             fint(r["unstable_step"]),
                                                             fsig(r["unstable_loss"]))]
                             for _, r in bad.iterrows()]))
        else:
            self.w("None.", "")
        self.csv(bad, "failures.csv")
        runs_cols = ["index", "name", "config", "group", "variant"] + sw.axes + [
            "seed", "status", "params", "steps", "tokens", "train_seconds", "tokens_per_s",
            "final_val_loss", "final_val_acc", "final_test_loss", "final_test_acc", "host",
            "message"]
        self.csv(sw.runs[[c for c in runs_cols if c in sw.runs]], "runs.csv")
        self.csv(curves(sw), "curves.csv")

    def provenance(self):
        """The file's root attributes and data files: last, as reference (they were ~100
        lines ahead of the verdicts)."""
        sw = self.sw
        self.w("## Provenance", "")
        attrs = dict(sw.attrs)
        keys = [k for k in KNOWN_ATTRS if k in attrs] + sorted(k for k in attrs
                                                                if k not in KNOWN_ATTRS)
        # values as text without surrounding blanks (`sets` is written with a trailing one)
        prov = pd.DataFrame({"attribute": keys, "value": [str(attrs[k]).strip() for k in keys]})
        self.w(md_table(["attribute", "value"], [[k, md_code(v) if v != "" else "—"]
                                                 for k, v in zip(prov["attribute"],
                                                                 prov["value"])]))
        self.csv(prov, "provenance.csv")
        if len(sw.data_files):
            self.w("Data files, as the (latest) session found them:", "")
            self.w(md_table(["path", "bytes", "sha256"],
                            [[p, fint(b), md_code(h)] for p, b, h in
                             zip(sw.data_files["path"], sw.data_files["bytes"],
                                 sw.data_files["sha256"])]))
            self.csv(sw.data_files, "data_files.csv")

    def per_config(self):
        sw = self.sw
        c = A.per_config(sw)
        self.configs = c
        self.w("## Per configuration", "")
        self.w("Seeds pooled; a run counts when it is `done` with a finite final validation "
               "loss and was not flagged unstable. Loss: final validation loss (nats/token), "
               "mean ± sd over seeds and the 95% t interval of the mean, with the runs it "
               "left out (\"(k of n excluded)\": failed, diverged or unstable of the runs "
               "that ended). *Unstable runs*: the instability rate, runs the rule flagged "
               "(diverged ones included) of the runs that trained. MLP and attention "
               "columns: last recorded step, mean over layers (and heads) and seeds; "
               "*near-zero frac*: the share of |h| ≤ 0.1 × the layer's rms, the sparsity of "
               "smooth activations (GELU, Tanh), where the zero fraction counts exact zeros "
               "only. *Active params*: the parameters one token uses (a mixture of experts "
               "counts only the experts it is routed to; = params for a dense model), so that "
               "configurations compare at equal parameters or at equal active compute "
               "(*FLOPs/token*). *Repeating greedy*: greedy samples that repeat themselves, of those "
               "taken, by kind (`token_run`: one token dominates; `ngram_loop`: the sample "
               "ends in a loop of a few tokens, \"the the the\").", "")
        if len(c) and (c["n"] <= 1).all():
            self.w("**One seed per configuration: no standard deviations, intervals or "
                   "tests** (run more seeds to resolve differences).", "")
        elif len(c) and (c["n"] <= 1).any():
            self.w("Configurations with one valid run have no interval.", "")
        rows = []
        for _, r in c.iterrows():
            loss = fnum(r["val_loss_mean"]) + ("" if _nan(r["val_loss_sd"]) else
                                              " ± " + fnum(r["val_loss_sd"]))
            n = "%d" % r["n"] + ("" if r["n"] == r["planned"] else " of %d" % r["planned"])
            loss = with_excluded(loss, r["excluded"], r["ended"])
            rows.append([r["config"], n, loss, fci(r["val_loss_lo"], r["val_loss_hi"]),
                         rate_cell(r["unstable"], r["trained"]),
                         fnum(r["val_acc_mean"]), fint(r["params"]), fint(r["active_params"]),
                         fint(r["flops_per_token"]),
                         fint(r["kv_bytes_per_token"]), fint(r["tokens_per_s_mean"]),
                         fnum(r["mlp_zero_frac"], 3), fnum(r["mlp_near_zero_frac"], 3),
                         fnum(r["mlp_max"], 3), fnum(r["attn_entropy"], 3),
                         repeating_cell(r)])
        self.w(md_table(["configuration", "n", "val loss", "95% CI", "unstable runs",
                         "val acc", "params", "active params", "FLOPs/token", "KV B/token",
                         "tokens/s", "MLP zero frac", "MLP near-zero frac", "MLP max",
                         "attn entropy", "repeating greedy"], rows, ["---"] + ["--:"] * 15))
        self.csv(c, "configs.csv")
        self.calibration()
        self.tuning()
        layers = A.per_layer(sw)
        self.w("### Per layer (last recorded step)", "")
        self.w(md_table(["configuration", "layer", "n", "MLP zero frac", "MLP near-zero frac",
                         "MLP max", "MLP pre-act max", "MLP max, val set", "attn entropy"],
                        [[r["config"], int(r["layer"]), int(r["n"]), fnum(r["mlp_zero_frac"], 3),
                          fnum(r["mlp_near_zero_frac"], 3), fnum(r["mlp_max"], 3),
                          fnum(r["mlp_pre_max"], 3), fnum(r["mlp_val_max"], 3),
                          fnum(r["attn_entropy"], 3)]
                         for _, r in layers.iterrows()]))
        self.csv(layers, "layers.csv")
        self.activation_maximum(c)
        self.routing()

    def activation_maximum(self, c):
        """The MLP's largest activation, by what it is taken over."""
        self.w("### Activation maximum", "")
        self.w("The MLP hidden activation's maximum, taken over different things (each per "
               "run, then the mean over the configuration's valid runs). *Last batch, mean "
               "over layers*: the per-configuration table's *MLP max*, the last recorded "
               "training step's batch, each layer's maximum averaged over the layers. *Last "
               "batch, largest layer*: the largest of those, after and before the "
               "nonlinearity (pre-act: its input; GLU: the gate's). **Validation set, largest "
               "layer**: the largest activation over every layer and every validation batch "
               "of the final evaluation — the maximum as a write-up that reports \"the max "
               "activation\" of a trained model measures it (needs `stats.val: true`; — "
               "without), with its largest run and the pre-activation and exact-zero share "
               "(mean over layers) on the same batches.", "")
        rows = [[r["config"], "%d" % r["n"], fnum(r["mlp_max"], 3),
                 fnum(r["mlp_max_layers"], 3), fnum(r["mlp_pre_max_layers"], 3),
                 fnum(r["mlp_val_max"], 3), fnum(r["mlp_val_max_top"], 3),
                 fnum(r["mlp_val_pre_max"], 3), fnum(r["mlp_val_zero_frac"], 3)]
                for _, r in c.iterrows()]
        self.w(md_table(["configuration", "n", "last batch, mean over layers",
                         "last batch, largest layer", "last batch pre-act, largest layer",
                         "**validation set, largest layer**", "largest run",
                         "val pre-act, largest layer", "val zero frac"], rows,
                        ["---"] + ["--:"] * 8))
        if c["mlp_val_max"].isna().all():
            self.w("No validation-set statistics in this file: run with `--set stats.val=true` "
                   "(docs/metrics.md).", "")

    def calibration(self):
        """Calibrated fixed time (train.calibrate): what each configuration's
        budget was measured from, and how much the machine varied while it was measured."""
        cal = A.calibration(self.sw)
        if not len(cal):
            return
        runs = self.sw.runs
        seconds = runs["train.seconds"].iloc[0] if "train.seconds" in runs else float("nan")
        self.w("### Calibration (fixed time)", "")
        worst = cal.loc[cal["spread"].idxmax()]
        self.w("A calibrated fixed-time comparison: each configuration trained for the tokens "
               "its own measured throughput would process in train.seconds = %s s on an idle "
               "core (its runs' step budget: round(median tokens/s x train.seconds / tokens "
               "per step)), so differences in tokens come from the configurations' speed, not "
               "from the load when each run happened. The machine varied by up to %s between "
               "trials of one configuration (%s). *Spread*: max/min - 1 of its trials' "
               "tokens/s; *load1*: the host's 1-minute load average when each trial ended. "
               "Every number is in `calibration.csv`; every trial in the file's /calibration."
               % (fsig(seconds), fpct(worst["spread"]), md_text(worst["config"])), "")

        def rng(lo, hi, f):
            return f(lo) if _nan(hi) or lo == hi else "%s-%s" % (f(lo), f(hi))

        rows = [[x["config"], "%d" % x["trials"], fint(x["tokens_per_s_median"]),
                 rng(x["tokens_per_s_min"], x["tokens_per_s_max"], fint), fpct(x["spread"]),
                 rng(x["load1_min"], x["load1_max"], lambda v: fnum(v, 2)), x["hosts"],
                 x["blas_core"],
                 rng(x["calibrated_steps_min"], x["calibrated_steps_max"], fint),
                 rng(x["calibrated_tokens_min"], x["calibrated_tokens_max"], fint)]
                for _, x in cal.iterrows()]
        self.w(md_table(["configuration", "trials", "median tokens/s", "min-max tokens/s",
                         "spread", "load1 min-max", "hosts", "BLAS core", "calibrated steps",
                         "tokens"], rows,
                        ["---", "--:", "--:", "--:", "--:", "--:", "---", "---", "--:", "--:"]))
        self.csv(cal, "calibration.csv")

    def tuning(self):
        """A tune: sweep: each configuration's tuning curve and choice, and whether each
        configuration's contrast with the baseline keeps its sign near both optima."""
        t = self.sw.tuning
        caveat = one_seed_caveat(t)
        configs = T.configurations(t)
        if not configs:
            return
        knob = str(t["knobs"].iloc[0])
        base = self.baseline if self.baseline in configs else configs[0]
        self.w("### Tuning (%s)" % md_text(knob), "")
        self.w("Each configuration trained at its own %s, chosen by the lowest mean final "
               "validation loss over its tuning seeds (never the test split); the loss below "
               "is that metric, on the tuning seeds, not the comparison runs'. *Sign near the "
               "optima*: whether the configuration's difference to %s keeps its sign at every "
               "pair of candidates within the stated factor of each side's optimum (on the "
               "tuning seeds). Every candidate is in `tuning.csv` and the file's /tuning; "
               "with successive halving the candidates (val loss) and the curves are those "
               "that reached the full budget, and the rungs follow.%s"
               % (md_text(knob), md_text(base or "baseline"), caveat), "")
        rows, recs, at_edge = [], [], []
        for c in configs:
            ch = T.chosen(t, c)
            pts = T.curve(t, c)
            sens = T.sensitivity(t, c, base) if c != base else None
            edge = T.edge(t, c)
            if edge:
                at_edge.append((c or "baseline", edge))
            rows.append([c or "baseline",
                         (ch[2] + (" (%s tried)" % edge if edge else "")) if ch else "",
                         fnum(ch[1]) if ch else "",
                         ", ".join("%s: %s" % (p[3], fnum(p[1])) for p in pts),
                         "" if sens is None else sens["text"]])
            recs.append({"configuration": rows[-1][0], "knob": knob,
                         "chosen": ch[2] if ch else "", "at_edge": edge,
                         "chosen_value": ch[0] if ch else None,
                         "val_loss": ch[1] if ch else None,
                         "candidates": [{"value": p[3], "val_loss": p[1]} for p in pts],
                         "candidates_text": rows[-1][3], "against": None if sens is None
                         else base or "baseline", "sign": rows[-1][4],
                         "sign_holds": None if sens is None else sens["holds"]})
        self.w(md_table(["configuration", "chosen", "val loss", "candidates (val loss)",
                         "sign near the optima"], rows))
        edge_note = edge_caveat(at_edge, len(configs), knob)
        if edge_note:
            self.w("", edge_note)
        self.record("tuning", "Tuning (%s)" % knob, "tuning", TUNING_COLS, recs,
                    "Each configuration trained at its own %s, chosen by the lowest mean "
                    "final validation loss over its tuning seeds (never the test split); "
                    "the loss is that metric on the tuning seeds. Sign near the optima: "
                    "whether the difference to %s keeps its sign at every pair of candidates "
                    "near each side's optimum (tuning.csv).%s%s"
                    % (knob, base or "baseline", caveat, " " + edge_note if edge_note else ""))
        rungs = T.rung_table(getattr(self.sw, "tuning_rungs", None))
        if rungs:
            self.w("", "Successive halving: each rung's candidates and their mean validation "
                   "loss at its step over the tuning seeds (* trained on to the next rung; at "
                   "the last rung, the choice). The others ended there: `done`, `tune_rung` "
                   "below the last in the file's /runs, not failures.", "")
            self.w(md_table(["configuration", "rung", "of the budget", "candidates (val loss)"],
                            rungs))
            self.csv(self.sw.tuning_rungs, "tuning_rungs.csv")
        self.csv(t, "tuning.csv")
        self.fig(T.figure(t, os.path.join(self.dir, "tuning.png")), "tuning curves")

    def routing(self):
        """Mixture of experts and of heads: how each routed block shares its tokens."""
        r = A.routing(self.sw)
        if not len(r):
            return
        self.w("### Routing (mixture of experts and of heads; last recorded step)", "")
        self.w("Per routed block: each expert's share of the token-expert assignments and each "
               "head's share of the tokens (1/E each when balanced; one share near 1 is a "
               "collapsed router), the largest expert share, the router's entropy (nats, mean "
               "over tokens), the balance and z-losses with their weights applied, and the "
               "share of assignments a capacity dropped; mean over the valid runs. Every "
               "recorded step is in `routing.csv`.", "")
        self.w(md_table(["configuration", "layer", "n", "expert shares", "max share",
                         "router entropy", "balance loss", "z-loss", "dropped", "head shares",
                         "MoH entropy", "MoH balance"],
                        [[x["config"], int(x["layer"]), int(x["n"]), x["expert_frac"] or "—",
                          fnum(x["moe_max_frac"], 3), fnum(x["router_entropy"], 3),
                          fsig(x["moe_balance"]), fsig(x["moe_zloss"]), fnum(x["moe_dropped"], 3),
                          x["head_frac"] or "—", fnum(x["moh_entropy"], 3),
                          fsig(x["moh_balance"])] for _, x in r.iterrows()],
                        ["---", "--:", "--:", "---"] + ["--:"] * 5 + ["---", "--:", "--:"]))
        self.csv(A.routing(self.sw, last_only=False), "routing.csv")

    def _contrast_table(self, con):
        return md_table([c[0] for c in CONTRAST_COLUMNS],
                        [[fn(r) for _, _, fn in CONTRAST_COLUMNS] for _, r in con.iterrows()],
                        [c[1] for c in CONTRAST_COLUMNS])

    def _contrast_notes(self, con):
        if not len(con):
            return
        if "split" in con:
            self.w(split_sentence(con["split"].iloc[0]), "")
        lvl = con["alpha_power"].iloc[0]
        k = (con["verdict"] == "better").sum(), (con["verdict"] == "worse").sum()
        self.w("%d better, %d worse, %d not resolved (family of %d contrasts, Holm-corrected "
               "at 0.05)." % (k[0], k[1], len(con) - sum(k), len(con)), "")
        self.w("Difference = configuration − baseline (negative: lower loss than the "
               "baseline). Paired by seed over the seeds both have (at least two), Welch "
               "(Welch–Satterthwaite df) otherwise; the 95%% CI is per contrast, the verdict "
               "uses the Holm-adjusted p. *Smallest resolvable*: the true difference this "
               "design (its seeds and observed spread) detects with 80%% power; *seeds for "
               "the observed difference*: about how many seeds per configuration would detect "
               "a true difference of the observed size with 80%% power. Both at level %s "
               "(0.05 / %d, the family's strictest Holm step), on the noncentral t. "
               "\"(k of n excluded)\": runs of the configuration and its baseline that ended "
               "but were left out (failed, diverged or flagged unstable); *unstable runs*: "
               "each side's instability rate (runs flagged of runs that trained), an outcome "
               "in its own right: a configuration that blows up on some seeds is compared on "
               "its survivors only." % (fsig(lvl), len(con)), "")

    def factorial(self):
        """A grid sweep with factorial contrasts (`contrasts: main_effects` or
        `interactions`) leads with them: the main effects (each a level of a factor against
        its base level, averaged over the other factors' levels), the two-way interactions
        with a sentence on each (resolved or not), and the interaction plots."""
        fx = A.factorial_contrasts(self.sw)
        if fx is None:
            return
        at = self.sw.attrs
        main, inter = fx[fx["kind"] == "main"], fx[fx["kind"] == "interaction"]
        self.w("## Main effects and interactions", "")
        self.w("This grid sweep's contrasts are factorial: a **main effect** is a level of a "
               "factor against its base level (the baseline's), per seed the mean over every "
               "combination of the other factors' levels of the loss difference, so every "
               "cell with either level enters it; a two-way **interaction** of level L of A "
               "with level M of B is, per seed, (LM − L0 − 0M + 00) averaged over the other "
               "factors (0: the base level; > 0: together they cost more than their two main "
               "effects add up to). Verdicts are the sweep's sequential ones (family of %d "
               "contrasts, family-wise alpha %s, equivalence within ±%s nats); *n*: seeds "
               "per cell at the last look." % (len(fx), fsig(at.get("replicate_alpha",
                                                                     float("nan"))),
                                               fsig(at.get("replicate_delta", float("nan")))),
               "")

        def rows(df):
            return [[md_code(r["effect"]), md_code(r["against"]),
                     "**%s**" % r["verdict"] if r["verdict"] in ("better", "worse")
                     else r["verdict"], fint(r["n"]) if r["n"] > 0 else "—",
                     fsigned(r["diff"]), fci(r["lo"], r["hi"])] for _, r in df.iterrows()]
        head = ["effect", "against", "verdict", "n", "difference", "interval"]
        align = ["---", "---", "---", "--:", "--:", "--:"]
        self.w("### Main effects", "")
        self.w(md_table(head, rows(main), align))
        title = "Main effects and interactions"
        self.record("factorial", title, "main_effects", FACTORIAL_COLS, main,
                    heading="Main effects",
                    note="Main effects: a level of a factor against its base level, per "
                         "seed averaged over the other factors' levels. The sweep's "
                         "sequential verdicts; n: seeds per cell at the last look "
                         "(factorial_contrasts.csv).")
        if len(inter):
            self.w("### Interactions", "")
            self.w(md_table(head, rows(inter), align))
            self.record("factorial", title, "interactions", FACTORIAL_COLS, inter,
                        heading="Interactions",
                        note="Two-way interactions: per seed (LM − L0 − 0M + 00) averaged "
                             "over the other factors (> 0: together they cost more than "
                             "their main effects add up to). The interaction plots are "
                             "report.md's interactions.png.")
            for _, r in inter.iterrows():
                pair = "%s × %s" % (md_code(r["factor"] + "=" + r["level"]),
                                    md_code(r["factor2"] + "=" + r["level2"]))
                v = r["verdict"]
                if v in ("better", "worse"):
                    s = ("resolved: an interaction (%s %s nats, interval %s): the effect of "
                         "one depends on the other; read their main effects with it"
                         % ("difference", fsigned(r["diff"]), fci(r["lo"], r["hi"])))
                elif v == "equivalent":
                    s = ("resolved: no interaction beyond ±%s nats; the main effects add up"
                         % fsig(at.get("replicate_delta", float("nan"))))
                else:
                    s = "not resolved (%s at n=%s)" % (v, fint(r["n"]) if r["n"] > 0 else "0")
                self.w("- Interaction %s: %s." % (pair, s))
            self.w("")
        panels, cells = [], []
        for (fa, fb), g in inter.groupby(["factor", "factor2"], sort=False):
            c = A.interaction_cells(self.sw, fa, fb)
            verdicts = ", ".join("%s×%s %s" % (r["level"], r["level2"], r["verdict"])
                                 for _, r in g.iterrows())
            panels.append((fa, fb, c, "%s × %s: %s" % (fa, fb, verdicts)))
            cells.append(c.assign(factor=fa, factor2=fb))
        if panels:
            self.fig(F.interactions(panels, os.path.join(self.dir, "interactions.png")),
                     "interaction plots")
            self.csv(pd.concat(cells, ignore_index=True), "interaction_cells.csv")
        self.csv(fx, "factorial_contrasts.csv")

    def against_baseline(self):
        sw = self.sw
        self.w("## Against the baseline", "")
        bmap, why = A.baseline_map(sw, self.baseline)
        self.baseline_why = "%s: %s." % ("Baseline" if bmap else "No baseline", why)
        self.w(md_prose(self.baseline_why), "")
        bmap, fam = A.family_map(sw, bmap, self.family)
        self.bmap = bmap
        if fam:
            self.baseline_why += " " + fam
            self.w(md_prose(fam), "")
        self.split, col = A.verdict_split(sw)
        con = A.contrasts(sw, bmap, col=col)
        self.contrasts = con
        # a replicate: sweep's verdicts are its sequential ones: they come first everywhere
        # (here, contrasts.csv, the page, stdout, --json), and the fixed-sample re-test of
        # the same runs is named as such wherever it is shown (fixed_sample_contrasts.csv)
        self.seq = A.sequential_contrasts(sw)
        self.sequential()
        if len(con) and self.seq is not None:
            self.w("### Fixed-sample re-test (not the sweep's test)", "")
            self.w("As if the number of seeds had been fixed: the sweep chose how many seeds "
                   "each contrast got from the results so far, so the fixed-sample p-values "
                   "and Holm verdicts below do not hold their level; they are shown for "
                   "comparison with fixed-seed studies only (`fixed_sample_contrasts.csv`). "
                   "The sweep's verdicts are the sequential ones above (`contrasts.csv`).", "")
        if len(con) and self.seq is None:
            self._looked_before()
        if len(con):
            self._contrast_notes(con)
            self.w(self._contrast_table(con))
        for c, b, k, n in A.not_compared(sw, bmap, con):
            self.w("Not compared: %s against %s, no valid run on one side (%d of %d "
                   "excluded)." % (md_code(c), md_code(b), k, n), "")
        if not len(con) and bmap:
            self.w("No contrasts yet: no configuration and its baseline both have finished "
                   "runs.", "")
        if self.seq is None:
            self.csv(con, "contrasts.csv")
        else:
            self.csv(self.seq, "contrasts.csv")
            self.csv(con, "fixed_sample_contrasts.csv")
        self.summary = verdict_summary(self.seq if self.seq is not None else con)

    def _looked_before(self):
        """The file's alpha ledger of a fixed design (root attribute looked_at_runs): the
        sweep was complete at fewer runs before it was continued, so a report of that design
        may have been read, and the tests below look at the same contrasts again."""
        at = str(self.sw.attrs.get("looked_at_runs", "") or "")
        if not at:
            return
        k = len(at.split(",")) + 1
        self.w(md_prose("**Looked at before:** the sweep was complete at %s runs before it "
                        "was continued to %d (the file's alpha ledger, `looked_at_runs`): a "
                        "report of that design may have been read, and these fixed-sample "
                        "tests look at the same contrasts again without accounting for it. "
                        "Over %d looks the chance of a false verdict is up to %d times a "
                        "test's level (union bound): read each at its level divided by %d to "
                        "keep it, or replicate: in a new sweep." % (at.replace(",", ", "),
                                                                    len(self.sw.runs), k, k,
                                                                    k)), "")

    def sequential(self):
        """A replicate: sweep's own verdicts (/contrasts, /decisions): what the
        sweep decided with its sequential rule, ahead of the fixed-sample table (which
        re-tests the same runs as if their number had been fixed), and the runs it used
        against a fixed design at max seeds."""
        con, dec = self.sw.replicate_contrasts, self.sw.replicate_decisions
        if con is None:
            return
        at = self.sw.attrs
        st = self.sw.runs["status"]
        n_configs = int(self.sw.runs["config"].nunique())
        rmax = int(at.get("replicate_max", 0))
        trained = int((st != "not_needed").sum())
        self.w("### Sequential verdicts (the sweep's own)", "")
        self.w("This sweep replicated until resolved (`replicate:`): its verdicts are "
               "**sequential** (the rule the sweep ran: %s), each interval valid over "
               "every look (at %s seeds) and every contrast at family-wise alpha %s, "
               "equivalence within ±%s nats. These are the sweep's decisions; the table "
               "below re-tests the same runs as if their number had been fixed. Runs trained: %d of %d planned (a fixed design at "
               "max = %d seeds would train %d; %d not needed)."
               % (at.get("replicate_rule", "?"), at.get("replicate_looks", "?"),
                  fsig(at.get("replicate_alpha", float("nan"))),
                  fsig(at.get("replicate_delta", float("nan"))), trained, len(st), rmax,
                  n_configs * rmax, int((st == "not_needed").sum())), "")
        rows = []
        for _, r in con.iterrows():
            looks = dec[dec["contrast"] == r["contrast"]] if len(dec) else dec
            level = looks["level"].iloc[-1] if len(looks) else float("nan")
            note = looks["note"].iloc[-1] if len(looks) else ""
            v = r["verdict"]
            rows.append([r["configuration"], r["baseline"], r["pairing"],
                         "**%s**" % v if v in ("better", "worse") else v,
                         fint(r["n"]) if r["n"] > 0 else "—", fsigned(r["difference"]),
                         fci(r["lo"], r["hi"]), fsig(level), note])
        split = A.verdict_split(self.sw)[0]
        self.w(split_sentence(split), "")
        self.w(md_table(["configuration", "baseline", "paired by", "split", "verdict", "n",
                         "difference", "interval", "level", "note"],
                        [r[:3] + [split] + r[3:] for r in rows],
                        ["---", "---", "---", "---", "---", "--:", "--:", "--:", "--:", "---"]))
        self.csv(con, "sequential_contrasts.csv")
        self.csv(dec, "sequential_decisions.csv")

    def grids(self):
        sw = self.sw
        if not sw.axes:
            return
        m = A.marginals(sw)
        self.w("## Grid marginals", "")
        self.w("Final validation loss for each value of each axis, averaged over the other "
               "axes with equal weight per configuration; 95% t interval from the seeds "
               "(Welch–Satterthwaite df).", "")
        self.w(md_table(["axis", "value", "configurations", "runs", "mean val loss", "95% CI"],
                        [[r["axis"], r["value"], r["configs"], r["runs"], fnum(r["mean"]),
                          fci(r["lo"], r["hi"])] for _, r in m.iterrows()]))
        self.csv(m, "marginals.csv")

    def scale(self):
        """A ladder: sweep: each contrast's difference at each rung and its trend against
        log10(training FLOPs) (scaling.py; the rule in docs/analysis.md)."""
        got = SC.ladder_effects(self.sw, self.bmap or {})
        if got is None:
            return
        rungs, fits = got
        self.w("## Effects against scale", "")
        self.w("The sweep's `ladder:` trains each configuration at %s. Difference = "
               "configuration − baseline at the same rung, paired by seed (95%% t interval). "
               "Trend: weighted least squares of the difference against log10(training "
               "FLOPs), weights 1/se², slope per decade of compute with its 95%% interval "
               "(t on the Welch–Satterthwaite degrees of freedom of the rungs' seeds, *df*); "
               "χ² far above its dof: the rungs scatter more than their intervals say; "
               "verdict by the rule of "
               "docs/analysis.md (*changes sign*, *stable*, *grows*, *shrinks*). Fitted values "
               "beyond the largest rung are **extrapolation**." % (
                   "%d rungs" % rungs["rung"].max() if len(rungs) else "several sizes"), "")
        if not len(rungs):
            self.w("No ladder contrasts yet: no configuration and its baseline at the same "
                   "rung both have valid runs.", "")
            self.record("scale", "Effects against scale", "scale_rungs", RUNG_COLS, rungs,
                        "No ladder contrasts yet: no configuration and its baseline at the "
                        "same rung both have valid runs.")
            return
        self.w(md_table(["contrast", "rung", "values", "training FLOPs", "n", "difference",
                         "95% CI"],
                        [[r["contrast"], int(r["rung"]), r["rung_values"], fsig(r["flops"]),
                          int(r["n"]), fsigned(r["diff"]), fci(r["lo"], r["hi"])]
                         for _, r in rungs.iterrows()],
                        ["---", "--:", "---", "--:", "--:", "--:", "--:"]))
        self.w(md_table(["contrast", "rungs", "slope / decade", "95% CI", "df", "χ² (dof)",
                         "verdict", "why", "fit at largest rung",
                         "extrapolation: fit at %gx its FLOPs" % SC.EXTRAPOLATE_FACTOR],
                        [[r["contrast"], int(r["n_rungs"]), fsigned(r["slope"]),
                          fci(r["slope_lo"], r["slope_hi"]), fnum(r["df_slope"], 1),
                          "%s (%d)" % (fnum(r["chi2"], 2), r["dof"]), "**%s**" % r["verdict"],
                          r["why"], "%s %s" % (fsigned(r["fit_largest"]),
                                               fci(r["fit_largest_lo"], r["fit_largest_hi"])),
                          "%s %s (extrapolation)" % (fsigned(r["extrapolated"]),
                                                     fci(r["extrapolated_lo"],
                                                         r["extrapolated_hi"]))]
                         for _, r in fits.iterrows()],
                        ["---", "--:", "--:", "--:", "--:", "--:", "---", "---", "--:",
                         "--:"]))
        title = "Effects against scale"
        self.record("scale", title, "scale_rungs", RUNG_COLS, rungs, heading="Per rung",
                    note="Difference = configuration − baseline at the same rung of the "
                         "ladder, paired by seed, 95% t interval (ladder_rungs.csv).")
        self.record("scale", title, "scale_trends", TREND_COLS, fits, heading="Trend",
                    note="Weighted least squares of the difference against "
                         "log10(training FLOPs), slope per decade of compute with its 95% "
                         "interval; verdict by the rule of docs/analysis.md. Fits beyond "
                         "the largest rung are extrapolation (ladder_trends.csv).")
        self.csv(rungs, "ladder_rungs.csv")
        self.csv(fits, "ladder_trends.csv")

    def seed_spread(self):
        """Where the sweep crosses model.init_seed with train.data_seed: how much of the
        seed-to-seed spread is the initialisation and how much the data order."""
        t = A.seed_variance(self.sw)
        if not len(t):
            return
        self.w("## Seed-to-seed spread: initialisation and data order", "")
        self.w("The sweep crosses `model.init_seed` with `train.data_seed`: per family of runs "
               "that differ only in those, a two-way analysis of variance of the final "
               "validation loss over the pairs (each pair's mean) splits the spread into the "
               "initialisation's, the data order's, and the residual (their interaction); "
               "standard deviations in nats, and each one's share of the variance.", "")
        self.w(md_table(["family", "init seeds", "data seeds", "runs", "sd init", "sd data",
                         "sd residual", "init share", "data share"],
                        [[r["family"], r["init_values"], r["data_values"], r["runs"],
                          fnum(r["sd_init"]), fnum(r["sd_data"]), fnum(r["sd_residual"]),
                          "%.0f%%" % (100 * r["share_init"]) if not _nan(r["share_init"]) else "—",
                          "%.0f%%" % (100 * r["share_data"]) if not _nan(r["share_data"]) else "—"]
                         for _, r in t.iterrows()]))
        self.csv(t, "seed_variance.csv")

    def budgets(self):
        sw = self.sw
        fixed_time = A.is_fixed_time(sw)
        table, t_star, vals = A.budgets(sw)
        self.budget_table, self.t_star = table, t_star
        if not fixed_time:
            return
        self.w("## Budgets", "")
        self.w("A fixed-time sweep: each run trained for its `train.seconds`, so faster "
               "configurations saw more tokens. The loss at equal tokens (%s tokens, the most "
               "every valid run reached; linearly interpolated between evaluations) tells "
               "*more tokens* apart from *better per token*." % fint(t_star), "")
        if not len(table):
            self.w("No finished runs yet.", "")
            return
        self.w(md_table(["configuration", "n", "tokens processed", "95% CI", "train s",
                         "final val loss", "val loss at equal tokens", "95% CI"],
                        [[r["config"], r["n"], fint(r["tokens_mean"]),
                          "—" if _nan(r["tokens_lo"]) else
                          "[%.0f, %.0f]" % (r["tokens_lo"], r["tokens_hi"]),
                          fnum(r["train_seconds_mean"], 1), fnum(r["final_val_loss"]),
                          fnum(r["val_loss_at_tokens"]),
                          fci(r["val_loss_at_tokens_lo"], r["val_loss_at_tokens_hi"])]
                         for _, r in table.iterrows()]))
        self.csv(table, "budgets.csv")
        if self.bmap and vals is not None:
            con = A.contrasts(sw, self.bmap, values=vals, col="val_loss_at_tokens")
            self.w("### Against the baseline at equal tokens", "")
            self._contrast_notes(con)
            self.w(self._contrast_table(con))
            self.csv(con, "contrasts_equal_tokens.csv")

    def at_equal_flops(self):
        """Each contrast at common training FLOPs, read off the runs' evaluation curves,
        beside the end-of-run difference (equal_flops.py)."""
        t = EF.of_sweep(self.sw, getattr(self, "bmap", None), A.valid_runs(self.sw))
        if not len(t):
            return
        self.w("## Against the baseline at equal FLOPs", "")
        self.w("Validation split. Each run's validation loss at common values of cumulative "
               "training FLOPs (training tokens × its FLOPs per token), linearly interpolated "
               "between its evaluations: the largest value every run of the contrast reached "
               "(100%) and fractions of it. Difference = configuration − baseline, paired by "
               "seed, with its 95% t interval (not corrected for the family); *at the end*: "
               "the paired difference of the final validation loss over the same seeds, "
               "whatever FLOPs each run spent.", "")
        self.w(md_table(["configuration", "baseline", "split", "FLOPs", "n",
                         "val loss (configuration)", "val loss (baseline)", "difference",
                         "95% CI", "difference at the end (val)", "95% CI (end)"],
                        [[r["config"], r["baseline"], r["split"],
                          "%s (%s%%)" % (fsig(r["flops"]), fint(100 * r["fraction"])),
                          fint(r["n"]), fnum(r["loss_config"]), fnum(r["loss_baseline"]),
                          fsigned(r["diff"]), fci(r["lo"], r["hi"]), fsigned(r["end_diff"]),
                          fci(r["end_lo"], r["end_hi"])] for _, r in t.iterrows()],
                        ["---", "---", "---", "--:", "--:", "--:", "--:", "--:", "--:", "--:",
                         "--:"]))
        self.record("equal_flops", "Against the baseline at equal FLOPs", "equal_flops",
                    EQUAL_FLOPS_COLS, t,
                    "Each run's validation loss at common cumulative training FLOPs "
                    "(linearly interpolated between its evaluations): the largest every run "
                    "of the contrast reached (fraction 1) and fractions of it. Difference = "
                    "configuration − baseline, paired by seed, 95% t interval (not "
                    "corrected for the family); at the end: the final validation loss's "
                    "paired difference over the same seeds (contrasts_equal_flops.csv).")
        self.csv(t, "contrasts_equal_flops.csv")

    def figures(self):
        sw, d = self.sw, self.dir
        order = select_configs(list(sw.runs["config"].drop_duplicates()), self.only,
                               self.exclude)
        self.w("## Figures", "")
        left = sw.runs["config"].nunique() - len(order)
        if left:
            self.w("%d of %d configurations drawn (--only/--exclude); the tables above have "
                   "them all." % (len(order), len(order) + left), "")
        self.fig(F.val_loss(sw, order, os.path.join(d, "val_loss.png"), self.log_y),
                 "validation loss against step, tokens and time")
        self.fig(F.activations(sw, order, os.path.join(d, "mlp_activations.png")),
                 "MLP zero fraction and max activation per layer")
        self.fig(F.attention_entropy(sw, order, os.path.join(d, "attention_entropy.png")),
                 "attention entropy per layer")
        self.fig(F.throughput(self.configs[self.configs["config"].isin(order)],
                              os.path.join(d, "throughput.png")), "throughput")
        seq = A.sequential_contrasts(sw)  # a replicate: sweep: its own verdicts
        con = self.contrasts if seq is None else seq
        if len(con):
            keep = con["config"].isin(order) & con["baseline"].isin(order)
            if "kind" in con:  # a main effect or interaction spans configurations
                keep |= con["kind"].isin(A.FACTORIAL_KINDS)
            con = con[keep]
        what = "final %s loss" % getattr(self, "split", "validation")
        if not self.fig(F.forest(con, os.path.join(d, "forest.png"), what),
                        "contrasts against the baseline"):
            self.w("No forest plot: no contrasts.", "")
        if A.is_fixed_time(sw):
            self.fig(F.budget(self.budget_table, self.t_star, os.path.join(d, "budget.png")),
                     "tokens processed and loss at equal tokens")

    def samples(self):
        sw = self.sw
        s = sw.samples
        self.w("## Samples", "")
        if not len(s):
            self.w("No samples yet.", "")
            return
        prompt = sw.runs["sample.prompt"].iloc[0] if "sample.prompt" in sw.runs else ""
        self.w("Each configuration's samples from its lowest-seed finished run (prompt %s); "
               "_degenerate_ (`token_run`): the most frequent token is at least half the "
               "sample, or one token repeats for max(16, n/4) positions; _ngram_loop_: the "
               "sample ends in a loop of a few tokens covering at least half of it (\"the the "
               "the\", docs/metrics.md). All samples are in samples.csv."
               % (md_code(prompt.encode("unicode_escape").decode()) if prompt else "empty"),
               "")
        valid = A.valid_runs(sw)
        lowest = {c: g.iloc[0] for c, g in valid.sort_values("seed").groupby("config")}
        for config in sw.runs["config"].drop_duplicates():  # plan order
            if config not in lowest:
                continue
            run = lowest[config]
            rs = s[s["run"] == run["index"]]
            if not len(rs):
                continue
            deg = self.configs.set_index("config").loc[config]
            self.w("### %s (seed %d; greedy samples repeating themselves: %s)"
                   % (md_text(config), run["seed"], repeating_cell(deg)), "")
            kinds = A.repetition_kind(rs)
            for (_, r), kind in zip(rs.iterrows(), kinds):
                label = r["kind"] + ("" if r["kind"] == "greedy" else " (T=%g)" % r["temperature"])
                mark = " — **degenerate**" if bool(r["degenerate"]) else ""
                if kind == "ngram_loop":
                    mark += " — **repeats: ngram_loop** (a loop of %s tokens over %s of it)" % (
                        fint(r.get("loop_period", math.nan)),
                        "—" if _nan(r.get("loop_frac", math.nan)) else
                        "%.0f%%" % (100 * r["loop_frac"]))
                elif kind != "none":
                    mark += " — repeats: %s" % kind
                self.w("%s: distinct %.2f, longest run %d%s" % (label, r["distinct_ratio"],
                                                               r["longest_run"], mark), "")
                text = r["text"]
                if not text.strip():  # a loop of newlines or spaces: show the characters
                    text = text.encode("unicode_escape").decode("ascii")
                self.w(fence(text_lines(text)))  # samples.csv keeps the exact text
        cols = ["name", "config", "seed", "kind", "temperature", "n_tokens", "distinct_ratio",
                "longest_run", "top_token_frac", "degenerate", "repetition", "loop_period",
                "loop_frac", "tokens_per_s", "text"]
        self.csv(s[[c for c in cols if c in s]], "samples.csv")

    def write(self):
        os.makedirs(self.dir, exist_ok=True)
        self.header()
        self.factorial()
        self.against_baseline()
        self.md[self.summary_at] = "**Verdicts:** %s" % md_text(self.summary)
        self.overview()
        self.per_config()
        self.grids()
        self.scale()
        self.seed_spread()
        self.budgets()
        self.at_equal_flops()
        self.figures()
        self.samples()
        self.provenance()
        self.w("## Files", "")
        self.w("Tables as CSV: " + ", ".join("`%s`" % f for f in self.files
                                              if f.endswith(".csv")) + ".", "")
        path = os.path.join(self.dir, "report.md")
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(self.md).rstrip("\n") + "\n")
        os.replace(path + ".tmp", path)
        self.page = None
        try:
            self.page = P.write_page(self, os.path.join(self.dir, "report.html"))
        except P.PageUnavailable as e:
            self.page_note = str(e)
        return path


def write_report(sw, outdir, baseline=None, **options):
    """Writes outdir/report.md, report.html, the PNG figures and the CSV tables for a
    loaded Sweep; returns the report's path. options: only, exclude (configurations drawn
    in the figures, see select_configs), log_y, family (patterns choosing the Holm family,
    analyze.family_map). Raises analyze.BaselineError for a --baseline or --family that
    matches nothing (before anything is written)."""
    return _write(sw, outdir, baseline, **options).path


def _write(sw, outdir, baseline=None, **options):
    comp = sw.comparison()  # what the contrasts read (Report)
    bmap, _ = A.baseline_map(comp, baseline)  # fail early on a bad --baseline or --family
    A.family_map(comp, bmap, options.get("family", ()))
    rep = Report(sw, outdir, baseline, **options)
    rep.path = rep.write()
    if getattr(rep, "page_note", None):
        print("ablate-report: %s" % rep.page_note, file=sys.stderr)
    return rep


def _aligned(rows, right):
    rows = [[term_text(v) for v in r] for r in rows]  # names can hold ESC sequences
    width = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    return ["  ".join(v.rjust(w) if j in right else v.ljust(w)
                      for j, (v, w) in enumerate(zip(r, width))).rstrip() for r in rows]


def split_sentence(split):
    """Which split a table's losses are on, in a sentence."""
    if split == "test":
        return ("Split: **test**: the final loss on the held-out test split "
                "(`final_test_loss`, `data.test_fraction`), which no evaluation, tuning or "
                "selection read; tuning and selection use the validation split.")
    return ("Split: **validation**: the validation loss (`final_val_loss`, or the "
            "evaluation curve's); the sweep has no held-out test split "
            "(`data.test_fraction` 0).")


def verdict_text(rep):
    """The verdict table for the terminal: one line per contrast, aligned. A replicate:
    sweep's are its sequential verdicts (the file's /contrasts), as the report leads with."""
    seq = rep.sw.replicate_contrasts
    if seq is not None:
        rows = [["configuration", "baseline", "n", "difference", "interval", "verdict"]]
        for _, r in seq.iterrows():
            rows.append([str(r["configuration"]), str(r["baseline"]),
                         fint(r["n"]) if r["n"] > 0 else "-", fsigned(r["difference"]),
                         fci(r["lo"], r["hi"]), str(r["verdict"])])
        return "\n".join(["%s Sequential verdicts (the sweep's own, valid over every look). %s"
                          % (term_text(rep.baseline_why), _split_line(rep))] +
                         _aligned(rows, {2, 3, 4}) +
                         ["The fixed-sample re-test of the same runs (not the sweep's test) "
                          "is in fixed_sample_contrasts.csv."]) + "\n"
    con = rep.contrasts
    lines = [term_text(rep.baseline_why) + " " + _split_line(rep)]
    if not len(con):
        lines.append("No contrasts yet.")
        return "\n".join(lines) + "\n"
    rows = [["configuration", "baseline", "difference", "95% CI", "p (Holm)", "verdict",
             "unstable runs"]]
    for _, r in con.iterrows():
        rows.append([str(r["config"]), str(r["baseline"]),
                     with_excluded(fsigned(r["diff"]), r.get("excluded", 0), r.get("ended", 0)),
                     fci(r["lo"], r["hi"]), fp(r["p_holm"]), str(r["verdict"]),
                     _instability_cell(r)])
    return "\n".join(lines + _aligned(rows, {2, 3, 4})) + "\n"


def _split_line(rep):
    split = getattr(rep, "split", "validation")
    return "Differences of the final %s loss (%s split)." % (
        "test" if split == "test" else "validation", split)


def verdict_summary(con):
    """The verdicts in one sentence, e.g. "3 better, 1 worse, 2 equivalent within ±0.01,
    1 unresolved (sequential, the sweep's own)" for a replicate: sweep's (con from
    analyze.sequential_contrasts) or "1 better, 0 worse, 2 not resolved (fixed-sample
    tests, Holm-corrected at 0.05)"."""
    if con is None or not len(con):
        return "no contrasts yet."
    v = [str(x) for x in con["verdict"]]
    if "sequential" in con.columns:
        parts = ["%d better" % v.count("better"), "%d worse" % v.count("worse")]
        eq = v.count("equivalent")
        if eq:
            delta = con.attrs.get("delta")
            parts.append("%d equivalent%s" % (eq, "" if delta is None or _nan(delta) else
                                               " within ±%s" % fsig(delta)))
        for k in sorted(set(v) - {"better", "worse", "equivalent"}):
            parts.append("%d %s" % (v.count(k), k))
        return "%s (%d contrasts; sequential: the sweep's own verdicts)." % (
            ", ".join(parts), len(v))
    k = v.count("better"), v.count("worse")
    return "%d better, %d worse, %d not resolved (%d contrasts; fixed-sample tests, " \
        "Holm-corrected at 0.05)." % (k[0], k[1], len(v) - sum(k), len(v))


def _records(df):
    recs = []
    for rec in df.to_dict("records"):
        recs.append({k: (None if isinstance(v, float) and not math.isfinite(v) else
                         v.item() if isinstance(v, np.generic) else v) for k, v in rec.items()})
    return recs


def _plain(v):
    """v (a table cell: a number, text, a list or dict of them) as JSON takes it: numpy
    scalars as Python's, non-finite numbers as None."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def verdict_json(rep):
    """The verdicts for scripts: the report's files, the baseline sentence, the verdicts in
    a sentence and each contrast's row of contrasts.csv (full precision; NaN as null). For
    a replicate: sweep these are its own sequential verdicts (`"verdicts": "sequential"`),
    and the fixed-sample re-test of the same runs is `fixed_sample_contrasts`. Each table
    the report's other sections recorded (Report.record: main_effects, interactions,
    scale_rungs, scale_trends, tuning, equal_flops) is a key of its own, its rows as
    report.md's table is written from them, when the report has that section."""
    import json
    seq = getattr(rep, "seq", None)
    out = {"report": rep.path, "page": rep.page, "baseline": rep.baseline_why,
           "summary": rep.summary,
           "verdicts": "fixed-sample" if seq is None else "sequential",
           "contrasts": _records(rep.contrasts if seq is None else seq)}
    if seq is not None:
        out["fixed_sample_contrasts"] = _records(rep.contrasts)
    for t in getattr(rep, "tables", []):
        out[t["id"]] = _plain(t["rows"])
    return json.dumps(out, indent=1, allow_nan=False) + "\n"


def _patterns(values):
    return [p for v in values or () for p in v.split(",") if p]


WATCH_DEFAULT_S = 10.0


def _file_identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def watch(a, options, out=sys.stdout, err=sys.stderr):
    """--watch: rewrites the report whenever the sweep file changes (the live view is
    replaced by rename at each update), checking every `a.watch` seconds; the page reloads
    itself at that interval while the sweep runs and says how fresh it is. Stops after
    the report of a file whose sweep is no longer running (its final view); returns the
    exit code. A view that cannot be read for a moment (replaced while read) is tried
    again at the next check."""
    seen, last_err = None, None
    waiting = False
    while True:
        ident = _file_identity(a.files[0])
        if ident is None:
            if not waiting:
                print("ablate-report: watching %s: no such file yet, waiting for the sweep"
                      % a.files[0], file=err, flush=True)
                waiting = True
        elif ident != seen:
            t0 = time.monotonic()
            try:
                import warnings
                from .load import UnavailableRowsWarning
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UnavailableRowsWarning)
                    sw = load(a.files[0])
                running = sw.status == "running"
                rep = _write(sw, a.output, a.baseline,
                             watch={"interval": a.watch, "running": running}, **options)
            except A.BaselineError as e:
                print("ablate-report: %s" % e, file=err)
                return 2
            except P.PageError as e:  # the same page again at the next change: stop
                print("ablate-report: %s" % e, file=err)
                return 1
            except (SweepFileError, OSError) as e:
                if str(e) != last_err:
                    print("ablate-report: watching: %s (trying again)" % e, file=err, flush=True)
                last_err = str(e)
                time.sleep(a.watch)
                continue
            seen, last_err = ident, None
            done = int((sw.runs["status"] == "done").sum())
            print("ablate-report: %s %s (sweep %s, %d of %d runs done, %.1f s)"
                  % ("refreshed" if running else "final report", rep.path, sw.status, done,
                     len(sw.runs), time.monotonic() - t0), file=err, flush=True)
            if not running:
                out.write(verdict_json(rep) if a.json else verdict_text(rep))
                return 0
        time.sleep(a.watch)  # the refresh interval the user asked for, not a synchronisation


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="ablate-report",
        description="Writes DIR/report.md, DIR/report.html, figures (PNG) and tables (CSV) "
                    "for a sweep file, and prints the verdict table. With two files, "
                    "compares the two sweeps (DIR/compare.md, compare.csv).")
    ap.add_argument("files", metavar="OUT.h5", nargs="+",
                    help="the sweep file; or two (A.h5 B.h5) to compare two sweeps")
    ap.add_argument("-o", "--output", metavar="DIR", required=True)
    ap.add_argument("--baseline", metavar="NAME",
                    help="configuration (e.g. baseline, n_head=4) or variant to compare with")
    ap.add_argument("--only", metavar="PATTERN", action="append",
                    help="draw only these configurations in the PNG figures (shell patterns "
                         "on the label, comma-separated or repeated)")
    ap.add_argument("--exclude", metavar="PATTERN", action="append",
                    help="leave these configurations out of the PNG figures")
    ap.add_argument("--log-y", action="store_true", help="loss figures on a log scale")
    ap.add_argument("--family", metavar="PATTERN", action="append",
                    help="the Holm family: only the contrasts of these configurations "
                         "(shell patterns on the label, comma-separated or repeated; default "
                         "every contrast; refused for a sweep that pre-declared its family)")
    ap.add_argument("--watch", metavar="SECONDS", nargs="?", type=float,
                    const=WATCH_DEFAULT_S,
                    help="keep the report current while the sweep runs (checked every "
                         "SECONDS, default %g; the page reloads itself), stop when it has "
                         "ended" % WATCH_DEFAULT_S)
    ap.add_argument("--json", action="store_true",
                    help="print the verdicts as JSON instead of the table")
    a = ap.parse_args(argv)
    if len(a.files) > 2:
        ap.error("one sweep file, or two to compare")
    if a.watch is not None and (len(a.files) != 1 or not a.watch > 0):
        ap.error("--watch takes one sweep file and a positive number of seconds")
    options = dict(only=_patterns(a.only), exclude=_patterns(a.exclude), log_y=a.log_y,
                   family=_patterns(a.family))
    t0 = time.monotonic()
    try:
        if a.watch is not None:
            return watch(a, options)
        if len(a.files) == 2:
            from . import compare as K
            sa, sb = load(a.files[0]), load(a.files[1])
            path, rows = K.write(sa, sb, a.output)
            facts = rows.attrs.get("facts", {})
            sys.stdout.write(rows.to_json(orient="records", indent=1) + "\n" if a.json
                             else K.differing_text(facts) + K.text(rows))
            print("ablate-report: %s (%d configurations in both, %.1f s)"
                  % (path, len(rows), time.monotonic() - t0), file=sys.stderr)
            return 0
        sw = load(a.files[0])
        rep = _write(sw, a.output, a.baseline, **options)
    except (SweepFileError, A.BaselineError) as e:
        print("ablate-report: %s" % e, file=sys.stderr)
        return 2
    except (OSError, P.PageError) as e:
        print("ablate-report: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    sys.stdout.write(verdict_json(rep) if a.json else verdict_text(rep))
    print("ablate-report: %s%s (%d runs, %.1f s)"
          % (rep.path, " and report.html" if rep.page else "", len(sw.runs),
             time.monotonic() - t0), file=sys.stderr)
    return 0
