"""Two sweeps compared (`ablate-report A.h5 B.h5 -o DIR`): the configurations both files
ran, matched by their resolved knobs (every knob column of /runs both files have, except
`data.path`: where the data were, not what they were) and by the data they trained on
(/runs `data_sha256` and `data_vocab`, where the files record them); for each, both
results and B - A with its interval, paired by seed only where the seeds and the data
match (Welch otherwise), Holm across the configurations. Also what else matches and
differs: the build and machine (root attributes), the data files, knobs only one file has,
configurations only one file ran.

Runs are counted as the single-sweep report counts them (analyze.run_exclusions: failed,
diverged and flagged-unstable runs are left out, with "(k of n excluded)"). Within one file,
a configuration's runs that trained on other data than most of its runs (a data change
accepted with --accept-data-change) are left out of the comparison too, and counted.
"""

import math
import os

import numpy as np
import pandas as pd

from . import analyze as A
from . import stats as S

# knobs that say where, not what: left out of the match
IGNORED_KNOBS = ("data.path",)
DATA_ID = ("data_sha256", "data_vocab")
# root attributes shown side by side (what a difference between the sweeps may come from)
ATTRS = ("ablate_version", "git_rev", "compiler", "c_flags", "mpi_version", "hdf5_version",
         "openblas_version", "blas_core", "hostnames", "ranks", "status", "sets")


def _canon(v):
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v).strip()
    return repr(f) if math.isfinite(f) else str(f)


def match_knobs(a, b):
    """(knobs the match uses, knobs only in A, knobs only in B)."""
    ka = [k for k in a.knobs if k not in IGNORED_KNOBS]
    kb = [k for k in b.knobs if k not in IGNORED_KNOBS]
    common = [k for k in ka if k in kb]
    return common, [k for k in ka if k not in kb], [k for k in kb if k not in ka]


def differing_knobs(a, b, knobs):
    """The knobs of `knobs` whose values in A and in B have none in common (a rerun with
    `train.lr` changed: A all 0.01, B all 0.003), as [(knob, A's values, B's values)].
    Configurations are matched ignoring them: they are what the comparison is about."""
    out = []
    for k in knobs:
        va = sorted({_canon(v) for v in a.runs[k]}) if k in a.runs else []
        vb = sorted({_canon(v) for v in b.runs[k]}) if k in b.runs else []
        if va and vb and not set(va) & set(vb):
            out.append((k, [str(v) for v in a.runs[k].drop_duplicates()],
                        [str(v) for v in b.runs[k].drop_duplicates()]))
    return out


def _data_id(runs):
    """Per run: its data identity (data_sha256 + data_vocab) or None where not recorded."""
    cols = [c for c in DATA_ID if c in runs]
    if not cols:
        return pd.Series([None] * len(runs), index=runs.index, dtype=object)
    ids = runs[cols].astype(str).agg("/".join, axis=1)
    empty = runs[cols[0]].astype(str).str.strip() == ""
    return ids.where(~empty, None)


def _side(sw, knobs):
    """Per configuration key (tuple of canonical knob values): its label, data identity,
    {seed: final val loss} of the runs that count, excluded and ended counts, and the runs
    left out for having trained on other data."""
    runs = sw.runs.copy()
    runs["_key"] = [tuple(_canon(v) for v in row)
                    for row in runs[knobs].itertuples(index=False)]
    runs["_why"] = A.run_exclusions(sw)
    runs["_data"] = _data_id(runs)
    out = {}
    for key, g in runs.groupby("_key", sort=False):
        ids = g["_data"].dropna()
        data = None
        if len(ids):  # most runs' data; a tie goes to the data of the first run in plan order
            counts = ids.value_counts()
            data = next(x for x in ids if counts[x] == counts.max())
        other = g[g["_data"].notna() & (g["_data"] != data)] if data is not None else g.iloc[:0]
        g = g.drop(other.index)
        ok = g[g["_why"] == ""]
        out[key] = dict(config=g["config"].iloc[0] if len(g) else other["config"].iloc[0],
                        data=data,
                        values={int(s): float(v) for s, v in zip(ok["seed"],
                                                                 ok["final_val_loss"])},
                        excluded=int((g["_why"].notna() & (g["_why"] != "")).sum()),
                        ended=int(g["_why"].notna().sum()), planned=len(g),
                        other_data=list(other["name"]))
    return out


def compare(a, b, alpha=S.ALPHA):
    """(rows, facts): rows is one DataFrame row per configuration both sweeps ran (plan
    order of A), with each side's mean, n and exclusions, B - A (`diff`, `lo`, `hi`: its
    95% t interval), `method` (paired / welch), `data` (`same`, `different`, `unknown`),
    p, Holm-adjusted p over the rows and the verdict (better: B lower); facts says what
    else matches and differs (see differences())."""
    knobs, only_a, only_b = match_knobs(a, b)
    differ = differing_knobs(a, b, knobs)
    knobs = [k for k in knobs if k not in {d[0] for d in differ}]
    sa, sb = _side(a, knobs), _side(b, knobs)
    by = "knobs"
    if not set(sa) & set(sb):  # nothing matches on the knobs: by the configurations' names
        names = {y["config"]: y for y in sb.values()}
        if any(x["config"] in names for x in sa.values()):
            by = "name"
            sb = {key: names[x["config"]] for key, x in sa.items() if x["config"] in names}
    rows = []
    for key, x in sa.items():
        y = sb.get(key)
        if y is None:
            continue
        if x["data"] is None or y["data"] is None:
            data = "unknown"
        else:
            data = "same" if x["data"] == y["data"] else "different"
        r = dict(config=x["config"], config_b=y["config"], data=data,
                 n_a=len(x["values"]), n_b=len(y["values"]),
                 mean_a=float(np.mean(list(x["values"].values()))) if x["values"] else math.nan,
                 mean_b=float(np.mean(list(y["values"].values()))) if y["values"] else math.nan,
                 excluded_a=x["excluded"], ended_a=x["ended"], excluded_b=y["excluded"],
                 ended_b=y["ended"], other_data_a=len(x["other_data"]),
                 other_data_b=len(y["other_data"]))
        res = None
        if x["values"] and y["values"]:
            if data == "same":  # seeds mean the same batches only on the same data
                res = S.contrast(x["values"], y["values"])
            else:
                res = S.welch(list(x["values"].values()), list(y["values"].values()))
        for k in ("method", "n", "diff", "lo", "hi", "p"):
            r[k] = res[k] if res else (math.nan if k != "method" else "")
        rows.append(r)
    cols = ["config", "config_b", "data", "n_a", "mean_a", "n_b", "mean_b", "method", "n",
            "diff", "lo", "hi", "p", "p_holm", "verdict", "excluded_a", "ended_a",
            "excluded_b", "ended_b", "other_data_a", "other_data_b"]
    facts = differences(a, b, sa, sb, only_a, only_b)
    facts.update(differing=differ, matched_by=by, knobs=knobs)
    if not rows:
        return pd.DataFrame(columns=cols), facts
    out = pd.DataFrame(rows)
    out["p_holm"] = S.holm(out["p"].astype(float))
    out["verdict"] = [S.verdict(d, p, "%d+%d" % (na, nb) if m != "paired" else str(n), alpha)
                      for d, p, m, n, na, nb in zip(out["diff"], out["p_holm"], out["method"],
                                                    out["n"], out["n_a"], out["n_b"])]
    # a rerun that reproduced every seed's result exactly is "identical", not "not resolved"
    same = [key for key, x in sa.items() if key in sb and x["values"] and
            x["values"] == sb[key]["values"]]
    ident = {sa[k]["config"] for k in same}
    out.loc[out["config"].isin(ident), "verdict"] = "identical"
    return out[cols], facts


def differences(a, b, sa, sb, only_a, only_b):
    """What matches and what differs between the two sweeps, beyond the results."""
    attrs = []
    for k in ATTRS:
        va, vb = str(a.attrs.get(k, "")).strip(), str(b.attrs.get(k, "")).strip()
        if va or vb:
            attrs.append((k, va, vb, va == vb))
    files = []
    for sw in (a, b):
        df = sw.data_files
        files.append({str(s): str(p) for p, s in zip(df["path"], df["sha256"])} if len(df)
                     else {})
    return dict(attrs=attrs, knobs_only_a=only_a, knobs_only_b=only_b,
                configs_only_a=[v["config"] for k, v in sa.items() if k not in sb],
                configs_only_b=[v["config"] for k, v in sb.items() if k not in sa],
                data_a=files[0], data_b=files[1],
                other_data=[(n, "A") for v in sa.values() for n in v["other_data"]] +
                           [(n, "B") for v in sb.values() for n in v["other_data"]])


def write(a, b, outdir):
    """Writes outdir/compare.md and compare.csv; returns (path, rows)."""
    from .report import fci, fnum, fp, fsigned, md_table, with_excluded
    from .text import md_code, md_text
    rows, facts = compare(a, b)
    os.makedirs(outdir, exist_ok=True)
    la, lb = os.path.basename(a.path), os.path.basename(b.path)
    if la == lb:
        la, lb = a.path, b.path
    md = ["# Two sweeps compared: A = %s, B = %s" % (md_code(la), md_code(lb)), ""]
    if facts["differing"]:
        md += ["**Knobs that differ between the files:** %s. Configurations are matched "
               "ignoring %s." % ("; ".join("%s (A: %s; B: %s)" % (
                   md_code(k), ", ".join(md_code(v) for v in va),
                   ", ".join(md_code(v) for v in vb)) for k, va, vb in facts["differing"]),
                   "it" if len(facts["differing"]) == 1 else "them"), ""]
    if facts["matched_by"] == "name":
        md += ["No configuration has the same knobs in both files: matched by name.", ""]
    md += ["Configurations matched by their resolved knobs (%s; `data.path` left out) and "
           "the data they trained on (/runs `data_sha256`, `data_vocab`). Difference = B − "
           "A of the final validation loss (negative: B lower), paired by seed where both "
           "trained the same seeds on the same data, Welch otherwise; 95%% t interval; Holm "
           "across the %d configurations (verdict *better*: B lower). Runs left out as the "
           "report leaves them out (failed, diverged, unstable: \"(k of n excluded)\")."
           % ("%d knobs" % len(match_knobs(a, b)[0]), len(rows)), ""]
    md += ["## Results", ""]
    if not len(rows):
        md += ["No configuration is in both sweeps.", ""]
    else:
        t = []
        for _, r in rows.iterrows():
            test = "paired, %d seeds" % r["n"] if r["method"] == "paired" else \
                ("Welch, %d vs %d" % (r["n_b"], r["n_a"]) if r["method"] else "—")
            t.append([r["config"] + ("" if r["config_b"] == r["config"] else
                                     " (B: %s)" % r["config_b"]),
                      with_excluded("%s (n %d)" % (fnum(r["mean_a"]), r["n_a"]),
                                    r["excluded_a"], r["ended_a"]),
                      with_excluded("%s (n %d)" % (fnum(r["mean_b"]), r["n_b"]),
                                    r["excluded_b"], r["ended_b"]),
                      fsigned(r["diff"]), fci(r["lo"], r["hi"]), test, fp(r["p"]),
                      fp(r["p_holm"]), r["verdict"] if r["method"] else "—", r["data"]])
        md.append(md_table(["configuration", "A: val loss", "B: val loss", "B − A", "95% CI",
                            "test", "p", "p (Holm)", "verdict", "data"], t,
                           ["---", "--:", "--:", "--:", "--:", "---", "--:", "--:", "---",
                            "---"]))
        diff_data = rows[rows["data"] != "same"]
        if len(diff_data):
            md += ["Not paired: %d configuration(s) whose data differ or are not recorded in "
                   "both files (`data` column): their seeds do not draw the same batches."
                   % len(diff_data), ""]
    md += ["## What matches and what differs", ""]
    md.append(md_table(["attribute", "A", "B", ""],
                       [[k, md_code(va) if va else "—", md_code(vb) if vb else "—",
                         "same" if same else "**differs**"] for k, va, vb, same in
                        facts["attrs"]]))
    da, db = facts["data_a"], facts["data_b"]
    md += ["Data files (SHA-256): %s." % (
        "the same" if da.keys() == db.keys() and da else
        "A %s; B %s" % (", ".join("%s %s" % (md_code(p), s[:12]) for s, p in da.items())
                        or "none",
                        ", ".join("%s %s" % (md_code(p), s[:12]) for s, p in db.items())
                        or "none")),
        ""]
    for what, items in (("Knobs only in A (not matched on)", facts["knobs_only_a"]),
                        ("Knobs only in B (not matched on)", facts["knobs_only_b"]),
                        ("Configurations only in A", facts["configs_only_a"]),
                        ("Configurations only in B", facts["configs_only_b"])):
        md += ["%s: %s." % (what, ", ".join(md_code(x) for x in items) if items else "none"),
               ""]
    if facts["other_data"]:
        md += ["Left out for having trained on other data than the rest of their "
               "configuration: %s." % ", ".join("%s (%s)" % (md_text(n), w)
                                                for n, w in facts["other_data"]), ""]
    path = os.path.join(outdir, "compare.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")
    os.replace(path + ".tmp", path)
    rows.to_csv(os.path.join(outdir, "compare.csv"), index=False)
    write_page(a, b, rows, facts, outdir)
    rows.attrs["facts"] = facts
    return path, rows


def differing_text(facts):
    """The knobs that differ, for the terminal: one line, or "" when none."""
    if not facts.get("differing"):
        return ""
    return "Knobs that differ between the files: %s (configurations matched ignoring %s).\n" % (
        "; ".join("%s (A: %s; B: %s)" % (k, ", ".join(va), ", ".join(vb))
                  for k, va, vb in facts["differing"]),
        "it" if len(facts["differing"]) == 1 else "them")


def merged(a, b):
    """One Sweep of both files' runs for the comparison's page: each configuration labelled
    `A: name` or `B: name`, a grid axis `sweep` (A, B) for the page's filter and group-by,
    B's run indices after A's."""
    from .load import Sweep
    n = int(a.runs["index"].max()) + 1 if len(a.runs) else 0

    def both(get, col="run"):
        parts = []
        for tag, sw, off in (("A", a, 0), ("B", b, n)):
            df = get(sw)
            if df is None:
                continue
            df = df.copy()
            if col in df:
                df[col] = df[col] + off
            for lab in ("name", "config"):
                if lab in df:
                    df[lab] = tag + ": " + df[lab].astype(str)
            if "group" in df:
                df["group"] = tag + df["group"].astype(str)
            df["sweep"] = tag
            parts.append(df)
        return pd.concat(parts, ignore_index=True)

    tables = {t: both(lambda sw, t=t: getattr(sw, t)) for t in
              ("steps", "evals", "acts", "attn", "samples")}
    runs = both(lambda sw: sw.runs, "index")
    attrs = {"description": "A = %s, B = %s" % (os.path.basename(a.path),
                                                os.path.basename(b.path)),
             "status": "%s / %s" % (a.status, b.status)}
    m = Sweep(b.path, attrs, "", runs, tables, ["sweep"], [k for k in a.knobs if k in b.knobs])
    m.axis_columns = {"sweep": "sweep"}
    return m


def write_page(a, b, rows, facts, outdir):
    """outdir/compare.html: the single-sweep page of both sweeps' runs (merged()), both
    sweeps' curves overlaid (group by `sweep` for the two means), its verdict table and
    forest plot the comparison's B − A rows. None (and a line on stderr) without uPlot."""
    import sys
    from . import page as P
    from .report import Report
    try:
        P.library()
    except P.PageUnavailable as e:
        print("ablate-report: %s" % str(e).replace("report.html", "compare.html"),
              file=sys.stderr)
        return None
    m = merged(a, b)
    rep = Report(m, outdir)
    rep.configs = A.per_config(m)
    con = pd.DataFrame({"config": ["B: " + c for c in rows["config_b"]],
                        "baseline": ["A: " + c for c in rows["config"]],
                        "method": rows["method"], "n": rows["n"], "diff": rows["diff"],
                        "lo": rows["lo"], "hi": rows["hi"], "p": rows["p"],
                        "p_holm": rows["p_holm"], "verdict": rows["verdict"]})
    rep.contrasts = con
    rep.forest_frame = con.assign(level=0.05)  # the 95% intervals of the table
    rep.baseline_why = "Two sweeps compared: each configuration of B against the same " \
        "configuration of A (compare.md)." + (" " + differing_text(facts).strip()
                                              if facts.get("differing") else "")
    rep.summary = "%d better, %d worse, %d identical, %d not resolved (B − A, %d " \
        "configurations in both; Holm-corrected at 0.05)." % (
            (rows["verdict"] == "better").sum(), (rows["verdict"] == "worse").sum(),
            (rows["verdict"] == "identical").sum(),
            len(rows) - rows["verdict"].isin(["better", "worse", "identical"]).sum(), len(rows))
    return P.write_page(rep, os.path.join(outdir, "compare.html"))


def text(rows):
    """The comparison for the terminal, one line per configuration."""
    from .report import fci, fp, fsigned
    if not len(rows):
        return "No configuration is in both sweeps.\n"
    t = [["configuration", "B - A", "95% CI", "p (Holm)", "verdict", "data"]]
    for _, r in rows.iterrows():
        t.append([str(r["config"]), fsigned(r["diff"]), fci(r["lo"], r["hi"]),
                  fp(r["p_holm"]), str(r["verdict"]) if r["method"] else "—", str(r["data"])])
    from .text import term_text
    t = [[term_text(v) for v in x] for x in t]  # names can hold ESC sequences
    w = [max(len(x[j]) for x in t) for j in range(len(t[0]))]
    return "\n".join("  ".join(v.rjust(wj) if j in (1, 2, 3) else v.ljust(wj)
                               for j, (v, wj) in enumerate(zip(x, w))).rstrip()
                     for x in t) + "\n"
