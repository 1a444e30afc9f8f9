"""The report's sections beyond the verdicts on the page and in --json (docs/analysis.md,
"The page" and "On the terminal"): "Main effects and interactions" (a factorial sweep),
"Effects against scale" (a ladder: sweep), "Tuning" (a tune: sweep) and "Against the
baseline at equal FLOPs" (the committed variants sweep). For each sweep: --json has a key
per table of the sections report.md has (main_effects, interactions, scale_rungs,
scale_trends, tuning, equal_flops) and no other, each row equal to the CSV the section
writes, at full precision; and report.html, loaded in headless Chromium (skipped where
absent), shows each as its own titled section, placed as report.md places it (the factorial
one ahead of "Against the baseline", scale and equal FLOPs after it, tuning after "Per
configuration"), whose table rows are the CSV's (text and values) and report.md's; a
factorial sweep's verdicts (main effects and interactions, no configuration of the
legend's) are all in the verdict table and the forest plot.
Run one case alone: test_page_sections.py NAME."""
import json
import os
import subprocess
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import test_page as TP  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
# the --json keys (= page table ids) of each report.md heading, and the page section
KEYS = [("### Main effects", "main_effects", "factorial"),
        ("### Interactions", "interactions", "factorial"),
        ("## Effects against scale", "scale_rungs", "scale"),
        ("## Effects against scale", "scale_trends", "scale"),
        ("### Tuning (", "tuning", "tuning"),
        ("## Against the baseline at equal FLOPs", "equal_flops", "equal_flops")]


def report(h5, tag):
    """(report dir, --json output, report.md) of ablate-report on h5."""
    d = os.path.join(FILES["dir"], tag)
    p = subprocess.run([PY, W.REPORT, h5, "-o", d, "--json"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    return d, json.loads(p.stdout), md


def same(j, text):
    """A --json value equals a CSV cell's text: the same number to 1e-12 (full precision),
    null for an empty or NaN cell, else the same text."""
    if j is None:
        return text in ("", "nan")
    if isinstance(j, bool):
        return text == str(j)
    if isinstance(j, (int, float)):
        return text not in ("", "nan") and abs(j - float(text)) <= 1e-12 * max(1.0, abs(j))
    return str(j) == text


def read_csv(d, name):
    return pd.read_csv(os.path.join(d, name), dtype=str, keep_default_na=False)


def csv_rows(d, key):
    """The CSV rows (as text) the section's table is written from, in table order."""
    name = {"main_effects": "factorial_contrasts.csv", "interactions": "factorial_contrasts.csv",
            "scale_rungs": "ladder_rungs.csv", "scale_trends": "ladder_trends.csv",
            "equal_flops": "contrasts_equal_flops.csv"}[key]
    df = read_csv(d, name)
    if key in ("main_effects", "interactions"):
        df = df[df["kind"] == ("main" if key == "main_effects" else "interaction")]
    return df.to_dict("records")


def check_json(d, j, md, want):
    """--json has exactly the keys `want` of KEYS (those whose heading report.md has), each
    row equal to its CSV's (tuning: to tuning.csv's choice and candidates)."""
    have = [k for _, k, _ in KEYS if k in j]
    from_md = [k for h, k, _ in KEYS if h in md]
    assert have == from_md == want, (have, from_md, want)
    for key in want:
        rows = j[key]
        assert rows, key
        if key == "tuning":
            t = read_csv(d, "tuning.csv")
            assert [r["configuration"] for r in rows] == \
                list(t["configuration"].replace("", "baseline").drop_duplicates()), rows
            for r in rows:
                mine = t[t["configuration"].replace("", "baseline") == r["configuration"]]
                best = mine[mine["chosen"] == "1"].iloc[0]
                assert same(r["chosen"], best["values"]) and \
                    same(r["val_loss"], best["val_loss"]), (r, best)
                cands = {c["value"]: c["val_loss"] for c in r["candidates"]}
                assert sorted(cands) == sorted(mine["values"]), (r, mine)
                for v, loss in zip(mine["values"], mine["val_loss"]):
                    assert same(cands[v], loss), (r, v, loss)
            continue
        csv = csv_rows(d, key)
        assert len(rows) == len(csv), (key, len(rows), len(csv))
        for r, c in zip(rows, csv):
            assert set(c) <= set(r), (key, set(c) - set(r))
            for k, v in c.items():
                assert same(r[k], v), (key, k, r[k], v)


def page_tables(d):
    """The page in headless Chromium: (ids of #main's sections in order, {table id: [[(key,
    text, data-value)]]} of every table, its console errors)."""
    drv = TP.browser()
    try:
        drv.get("file://" + os.path.join(d, "report.html"))
        TP.wait_ready(drv)
        order = drv.execute_script(
            "return [...document.querySelectorAll('#main > section')].map(s => s.id)")
        tables = drv.execute_script("""const out = {};
          for (const t of document.querySelectorAll('#main table'))
            out[t.id.replace(/^table-/, '')] = [...t.querySelectorAll('tbody tr')].map(tr =>
              [...tr.children].map(td => [td.dataset.key, td.textContent,
                                          td.getAttribute('data-value')]));
          return out;""")
        titles = drv.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#main > section')]"
            ".map(s => [s.id, s.querySelector('h2').textContent]))")
        forest = drv.execute_script("return document.querySelectorAll('#forest circle').length")
        errors = drv.execute_script("return window.ablateReport.errors")
        return order, tables, titles, forest, errors + TP.console_errors(drv)
    finally:
        drv.quit()


# the page's text of a row's identifying column, and the numeric keys compared to the CSV
IDENT = {"main_effects": "effect", "interactions": "effect", "scale_rungs": "contrast",
         "scale_trends": "contrast", "tuning": "configuration", "equal_flops": "config"}
NUMS = {"main_effects": ("diff", "lo", "hi"), "interactions": ("diff", "lo", "hi"),
        "scale_rungs": ("rung", "diff", "lo", "hi"), "scale_trends": ("slope", "slope_lo"),
        "tuning": ("val_loss",), "equal_flops": ("fraction", "diff", "lo", "hi", "end_diff")}


def check_page(d, j, md, want):
    """Each table of `want` is on the page in its own section, placed as report.md places
    it, with the rows of --json (the CSV's, checked above) and of report.md."""
    order, tables, titles, forest, errors = page_tables(d)
    assert errors == [], errors
    for _, key, sec in KEYS:
        assert (key in tables) == (key in want), (key, sorted(tables))
        if key not in want:
            continue
        assert sec in order, (sec, order)
        pos, v, c = order.index(sec), order.index("verdict"), order.index("configs")
        if sec == "factorial":
            assert pos < v, order
        elif sec == "tuning":
            assert pos == c + 1, order
        else:
            assert v < pos < c, order
        dom, rows = tables[key], j[key]
        assert len(dom) == len(rows), (key, len(dom), len(rows))
        for tr, r in zip(dom, rows):
            cells = {k: (text, val) for k, text, val in tr}
            ident = cells[IDENT[key]][0]
            assert ident == str(r[IDENT[key]]), (key, ident, r)
            # report.md's table has the row (the identifying cell, as code or plain)
            assert any(ln.startswith(("| %s |" % ident, "| `%s` |" % ident))
                       for ln in md.splitlines()), (key, ident)
            for k in NUMS[key]:
                val = cells[k][1]
                assert val is not None and abs(float(val) - r[k]) <= 1e-9 * max(1, abs(r[k])), \
                    (key, k, val, r[k])
    return titles, tables, forest


def test_equal_flops():
    """The committed variants sweep: the equal-FLOPs section and no other of these."""
    d, j, md = report(W.fixture("variants", FILES["dir"]), "variants")
    check_json(d, j, md, ["equal_flops"])
    titles = check_page(d, j, md, ["equal_flops"])[0]
    assert titles["equal_flops"] == "Against the baseline at equal FLOPs", titles


def test_factorial():
    """A 2x2 factorial sweep (activation x position, contrasts: interactions)."""
    grid = "  model.activation: [relu, gelu]\n  model.position: [learned, rope]\n"
    spec = C.micro_spec(C.corpus_path(), steps=8, grid=grid, eval_every=4, stats_every=4,
                        sample_tokens=4)
    spec = spec.replace("seeds: [0, 1, 2]\n",
                        "replicate:\n  seeds: {min: 2, max: 3}\n  looks: [2, 3]\n"
                        "  resolve: 0.05\n  alpha: 0.2\n"
                        "  baseline: {model.activation: relu, model.position: learned}\n"
                        "contrasts: interactions\n")
    path = C.write(os.path.join(FILES["dir"], "fact.yaml"), spec)
    out = os.path.join(FILES["dir"], "fact.h5")
    C.run(["run", path, "-o", out], expect_rc=0, tag="factorial", timeout=600)
    d, j, md = report(out, "fact")
    want = [k for h, k, _ in KEYS if h in md]
    assert want[:2] == ["main_effects", "interactions"], want
    check_json(d, j, md, want)
    titles, tables, forest = check_page(d, j, md, want)
    assert titles["factorial"] == "Main effects and interactions", titles
    # the sweep's verdicts are the effects (no configuration of the legend's): all shown,
    # in the table and the forest plot, not hidden as if the legend had toggled them off
    assert [r[0][1] for r in tables["verdict"]] == [c["config"] for c in j["contrasts"]], \
        (tables["verdict"], j["contrasts"])
    assert forest == len(j["contrasts"]), (forest, j["contrasts"])
    assert [r["effect"] for r in j["main_effects"]] == \
        ["model.activation=gelu", "model.position=rope"], j["main_effects"]


def test_ladder():
    """A tiny ladder: sweep (3 rungs, baseline and rope, 2 seeds)."""
    import test_report_ladder as L
    L.FILES["dir"] = FILES["dir"]
    d, j, md = report(L.sweep(), "ladder")
    want = [k for h, k, _ in KEYS if h in md]
    assert want[:2] == ["scale_rungs", "scale_trends"], want
    check_json(d, j, md, want)
    titles = check_page(d, j, md, want)[0]
    assert titles["scale"] == "Effects against scale", titles
    assert [r["rung"] for r in j["scale_rungs"]] == [1, 2, 3], j["scale_rungs"]


def test_tuning():
    """A tune: sweep (baseline and heads2, three learning rates, one tuning seed)."""
    spec = C.micro_spec(C.corpus_path(), steps=8, seeds=(0, 1), eval_every=4, stats_every=4,
                        sample_tokens=4,
                        variants="  baseline: {}\n  heads2: {model.n_head: 2}\n")
    spec += "tune: {knobs: {train.lr: [3.0e-3, 1.0e-2, 3.0e-2]}, seeds: [1000]}\n"
    path = C.write(os.path.join(FILES["dir"], "tune.yaml"), spec)
    out = os.path.join(FILES["dir"], "tune.h5")
    C.run(["run", path, "-o", out], expect_rc=0, tag="tune", timeout=600)
    d, j, md = report(out, "tune")
    want = [k for h, k, _ in KEYS if h in md]
    assert "tuning" in want, want
    check_json(d, j, md, want)
    titles = check_page(d, j, md, want)[0]
    assert titles["tuning"] == "Tuning (train.lr)", titles
    assert [r["configuration"] for r in j["tuning"]] == ["baseline", "heads2"], j["tuning"]
    assert j["tuning"][1]["sign"].startswith(("holds for train.lr", "flips at train.lr")), \
        j["tuning"]


TESTS = [("equal_flops", test_equal_flops), ("factorial", test_factorial),
         ("ladder", test_ladder), ("tuning", test_tuning)]

if __name__ == "__main__":
    W.main_in_workdir("page-sections", FILES, TESTS)
