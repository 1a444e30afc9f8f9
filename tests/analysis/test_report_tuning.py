"""A tune: sweep's choices in the analysis (ablate_analysis/tuning.py) and the report.

  - sensitivity: the sign of a contrast near both optima, on hand-made /tuning tables: it
    holds when every nearby pair keeps it, flips (naming the pair) when one does not, and
    "near" widens to the candidates' spacing when that is wider than 2x;
  - edge: a choice at the highest or lowest of 3 or more values tried is flagged (its
    optimum may lie beyond the range), a stopped candidate still marking the range;
  - report: ablate-report on a real tune: sweep has a "Tuning" section naming each
    configuration's chosen value (equal to /tuning's, flagged when at an edge of the range,
    with the section's sentence naming it), its candidates' losses and the sign line, tuning.csv and tuning.png; a sweep without tune: has no such section;
  - halving: with successive halving (4 candidates, eta 3) the curves and the candidates'
    losses are those of the candidates that reached the full budget (a stopped one's rung-0
    loss is not on them), and the report's rung table shows every rung result from
    /tuning_rungs with the ones that trained on marked, plus tuning_rungs.csv.
"""
import math
import os
import sys

import h5py
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
from ablate_analysis import tuning as T  # noqa: E402
import ablate_analysis as aa  # noqa: E402

FILES = {}


def table(curves, chosen=None):
    """/tuning rows from {config: [(value, loss), ...]}; the choice: the lowest loss."""
    rows = []
    for k, (config, pts) in enumerate(curves.items()):
        best = min(range(len(pts)), key=lambda i: (pts[i][1], i))
        if chosen and config in chosen:
            best = chosen[config]
        for i, (v, loss) in enumerate(pts):
            rows.append({"configuration": config, "config": k, "candidate": i,
                         "knobs": "train.lr", "values": "%g" % v, "value": v, "rung": 0,
                         "fraction": 1.0, "seeds": 1, "val_loss": loss, "chosen": int(i == best)})
    return pd.DataFrame(rows)


def test_sensitivity():
    lrs = [1e-3, 2e-3, 4e-3, 8e-3]
    # b better than a at every pair near both optima (4e-3 each; neighbours 2e-3, 8e-3)
    t = table({"a": list(zip(lrs, [3.0, 2.6, 2.5, 2.7])),
               "b": list(zip(lrs, [2.5, 2.2, 2.1, 2.3]))})
    s = T.sensitivity(t, "a", "b")
    assert s["holds"] is True and s["factor"] == 2.0, s
    assert s["n_pairs"] == 9 and abs(s["diff"] - 0.4) < 1e-12, s
    assert s["text"] == "holds for train.lr within 2x of each optimum (9 pairs)", s["text"]
    # b's neighbour 8e-3 (2.55) is worse than a's optimum (2.5): the sign flips there
    t = table({"a": list(zip(lrs, [3.0, 2.6, 2.5, 2.7])),
               "b": list(zip(lrs, [2.9, 2.45, 2.4, 2.55]))})
    s = T.sensitivity(t, "a", "b")
    assert s["holds"] is False and s["flip"][:2] == (4e-3, 8e-3), s
    assert s["text"].startswith("flips at train.lr=0.004 (a) vs 0.008 (b): -0.0500 against "
                                "+0.1000"), s["text"]
    # candidates 10x apart: "near" is their spacing, so the neighbours still count
    wide = [1e-4, 1e-3, 1e-2]
    t = table({"a": list(zip(wide, [3.0, 2.5, 2.45])), "b": list(zip(wide, [2.9, 2.4, 2.6]))})
    s = T.sensitivity(t, "a", "b")
    assert abs(s["factor"] - 10) < 1e-9 and s["holds"] is False, s
    assert s["text"].startswith("flips at train.lr=0.001 (a) vs 0.0001 (b): -0.4000"), s["text"]
    # a side without a finite optimum has no sign
    t = table({"a": [(1e-3, math.inf), (2e-3, math.inf)], "b": [(1e-3, 2.0), (2e-3, 2.1)]})
    assert T.sensitivity(t, "a", "b")["holds"] is None


def test_edge():
    lrs = [1e-3, 2e-3, 4e-3, 8e-3]
    t = table({"a": list(zip(lrs, [3.0, 2.6, 2.5, 2.7])),   # inside the range
               "b": list(zip(lrs, [2.9, 2.6, 2.5, 2.4])),   # the highest value tried
               "c": list(zip(lrs, [2.0, 2.6, 2.5, 2.4])),   # the lowest
               "d": list(zip(lrs[:2], [2.9, 2.6]))})         # 2 values: every choice is an edge
    assert [T.edge(t, c) for c in "abcd"] == [None, "highest", "lowest", None]
    # a candidate stopped by successive halving still marks the range tried
    t.loc[(t["configuration"] == "a") & (t["candidate"] == 3), "fraction"] = 1 / 3
    t.loc[(t["configuration"] == "a") & (t["candidate"] == 3), "chosen"] = 0
    assert T.edge(t, "a") is None
    from ablate_analysis import report as R
    note = R.edge_caveat([("b", "highest"), ("c", "lowest")], 4, "train.lr")
    assert note.startswith("2 of 4 configurations chose the highest or lowest train.lr tried: "
                           "b (highest), c (lowest). Their optimum may lie beyond"), note
    assert R.edge_caveat([], 4, "train.lr") == ""


def spec_text(corpus):
    s = C.micro_spec(corpus, steps=30, seeds=(0, 1), eval_every=15, sample_tokens=8,
                     variants="  baseline: {}\n  heads2: {model.n_head: 2}\n")
    return s + "tune: {knobs: {train.lr: [3.0e-3, 1.0e-2, 3.0e-2]}, seeds: [1000]}\n"


def test_report():
    d = FILES["dir"]
    spec = C.write(os.path.join(d, "t.yaml"), spec_text(C.corpus_path(d)))
    out = os.path.join(d, "t.h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag="tune")
    with h5py.File(out, "r") as f:
        rows = [{k: C._py(r[k]) for k in r.dtype.names} for r in f["tuning"][()]]
    rep = os.path.join(d, "rep")
    rc, err = W.report(out, rep)
    assert rc == 0, err
    md = open(os.path.join(rep, "report.md")).read()
    assert "### Tuning (train.lr)" in md, md[:3000]
    section = md.split("### Tuning (train.lr)")[1].split("\n### ")[0]
    for config in ("baseline", "heads2"):
        mine = [r for r in rows if r["configuration"] == config]
        best = [r for r in mine if r["chosen"]][0]
        line = [l for l in section.splitlines() if l.startswith("| %s |" % config)]
        assert len(line) == 1, section
        cells = [c.strip() for c in line[0].strip("|").split("|")]
        values = sorted(r["value"] for r in mine)
        edge = ("highest" if best["value"] == values[-1] else
                "lowest" if best["value"] == values[0] else None)
        assert cells[1] == best["values"] + (" (%s tried)" % edge if edge else ""), cells
        assert cells[2] == "%.4f" % best["val_loss"], cells
        assert ("%s (%s)" % (config, edge) in section) == bool(edge), section[:2000]
        for r in mine:
            assert "%s: %.4f" % (r["values"], r["val_loss"]) in cells[3], (r, cells)
        if config == "heads2":
            assert cells[4].startswith(("holds for train.lr within", "flips at train.lr=")), cells
    # one tuning seed: the section says what that leaves of a choice and a sign
    assert "With one tuning seed each candidate's loss is one run's" in section, section[:1500]
    assert os.path.isfile(os.path.join(rep, "tuning.png"))
    csv = pd.read_csv(os.path.join(rep, "tuning.csv"))
    assert len(csv) == 6 and int(csv["chosen"].sum()) == 2
    # the tuning runs are in their own section only: the contrasts are heads2 against the
    # baseline, one family of 1 (not each candidate's runs against the baseline's), and the
    # per-configuration tables and contrasts.csv have the comparison runs' configurations
    assert "(1 contrasts;" in md.split("\n")[2], md.split("\n")[:4]
    con = pd.read_csv(os.path.join(rep, "contrasts.csv"))
    assert list(con["config"]) == ["heads2"] and list(con["baseline"]) == ["baseline"], con
    assert "/tune/" not in md.split("### Tuning")[0], md.split("### Tuning")[0][:3000]
    assert "6 of the runs are tuning runs" in md, md[:4000]  # 3 candidates x 2 configurations
    sw = aa.load(out)
    assert int(sw.tuning_runs().sum()) == 6 and len(sw.comparison().runs) == 4
    # without tune: no section
    plain = os.path.join(d, "plain.yaml")
    C.write(plain, spec_text(C.corpus_path(d)).split("tune:")[0])
    out2 = os.path.join(d, "plain.h5")
    C.run(["run", plain, "-o", out2], expect_rc=0, tag="plain")
    rc, err = W.report(out2, os.path.join(d, "rep2"))
    assert rc == 0, err
    assert "### Tuning" not in open(os.path.join(d, "rep2", "report.md")).read()


def test_halving():
    # curve(): a candidate stopped at a rung (fraction < 1) is not on the curve
    t = table({"a": [(1e-3, 3.5), (3e-3, 2.6), (1e-2, 2.5), (3e-2, 2.7)]})
    t.loc[t["candidate"] == 0, "fraction"] = 1 / 3
    assert [p[0] for p in T.curve(t, "a")] == [3e-3, 1e-2, 3e-2], T.curve(t, "a")
    d = FILES["dir"]
    text = spec_text(C.corpus_path(d)).replace("[3.0e-3, 1.0e-2, 3.0e-2]",
                                               "[1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2]")
    spec = C.write(os.path.join(d, "h.yaml"), text)
    out = os.path.join(d, "h.h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag="halving")
    with h5py.File(out, "r") as f:
        rungs = [{k: C._py(r[k]) for k in r.dtype.names} for r in f["tuning_rungs"][()]]
    rep = os.path.join(d, "rep_h")
    rc, err = W.report(out, rep)
    assert rc == 0, err
    md = open(os.path.join(rep, "report.md")).read()
    section = md.split("### Tuning (train.lr)")[1].split("\n### ")[0]
    for config in ("baseline", "heads2"):
        mine = [r for r in rungs if r["configuration"] == config]
        on = [r["values"] for r in mine if r["rung"] == 0 and r["promoted"]]
        assert len(on) == 2 and len([r for r in mine if r["rung"] == 1]) == 2, mine
        line = [l for l in section.splitlines() if l.startswith("| %s |" % config)
                and "of 2" not in l]
        cells = [c.strip() for c in line[0].strip("|").split("|")]
        # the candidates' losses: the two at the full budget only
        assert cells[3].count(":") == 2 and all(v + ":" in cells[3] for v in on), cells
        for r in range(2):
            row = [l for l in section.splitlines()
                   if l.startswith("| %s | %d of 2 |" % (config, r + 1))]
            assert len(row) == 1, section
            for x in (x for x in mine if x["rung"] == r):
                assert "%s: %.4f%s" % (x["values"], x["val_loss"], "*" if x["promoted"] else
                                       "") in row[0], (x, row)
    csv = pd.read_csv(os.path.join(rep, "tuning_rungs.csv"))
    assert len(csv) == len(rungs) == 2 * (4 + 2)


TESTS = [("sensitivity", test_sensitivity), ("edge", test_edge), ("report", test_report),
         ("halving", test_halving)]

if __name__ == "__main__":
    W.main_in_workdir("report_tuning", FILES, TESTS)
