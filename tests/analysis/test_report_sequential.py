"""ablate-report on a replicate: sweep: the report reads /contrasts and
/decisions, says its verdicts are sequential, its numbers agree with the file, and it
states the runs used against a fixed design at max seeds."""
import json
import math
import os
import re
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402

FILES = {}


def replicate_sweep(d):
    if "replicate" in FILES:  # (one sweep for the cases run in one process)
        return FILES["replicate"]
    spec = C.micro_spec(C.corpus_path(), steps=40, variants="  baseline: {}\n"
                        "  lr_hi: {train.lr: 3.0e-2}\n  heads2: {model.n_head: 2}\n",
                        eval_every=20, stats_every=20, sample_tokens=8)
    spec = spec.replace("seeds: [0, 1, 2]\n", "replicate:\n  seeds: {min: 2, max: 4}\n"
                        "  looks: [2, 3, 4]\n  resolve: 0.05\n  alpha: 0.2\n")
    path = C.write(os.path.join(d, "rep.yaml"), spec)
    out = os.path.join(d, "rep.h5")
    C.run(["run", path, "-o", out], expect_rc=0, tag="replicate")
    FILES["replicate"] = out
    return out


def test_sequential_section():
    out = replicate_sweep(FILES["dir"])
    sw = aa.load(out)
    assert sw.replicate_contrasts is not None and len(sw.replicate_contrasts) == 2
    assert len(sw.replicate_decisions) >= 2
    d = os.path.join(FILES["dir"], "rep")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT, out,
                        "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    md = open(os.path.join(d, "report.md")).read()
    assert "### Sequential verdicts" in md and "**sequential**" in md, md[-3000:]
    # the sweep's own verdicts lead; the fixed-sample table follows, labelled as not its test
    fixed = md.find("### Fixed-sample re-test (not the sweep's test)")
    assert 0 <= md.index("### Sequential verdicts") < fixed, md[-3000:]
    # the terminal's table is the sequential one too, a line per contrast with its verdict
    assert "Sequential verdicts (the sweep's own" in p.stdout, p.stdout
    with h5py.File(out, "r") as f:
        con = f["contrasts"][()]
        st = [s.decode() for s in f["runs"]["status"]]
    trained = sum(s != "not_needed" for s in st)
    assert "Runs trained: %d of %d planned (a fixed design at max = 4 seeds would train 12" \
        % (trained, len(st)) in md, md[-3000:]
    section = md[md.index("### Sequential verdicts"):]
    for row in con:
        name, verdict = row["configuration"].decode(), row["verdict"].decode()
        line = [l for l in section.splitlines() if l.startswith("| %s |" % name)]
        assert line, (name, section[:2000])
        term = [l for l in p.stdout.splitlines() if l.startswith(name + " ")]
        assert term and term[0].rstrip().endswith(verdict), (name, p.stdout)
        assert verdict in line[0] and ("%+.4f" % row["difference"]) in line[0].replace(
            "−", "-"), (line[0], verdict, row["difference"])
    assert os.path.exists(os.path.join(d, "sequential_decisions.csv"))
    # the page's forest plot draws the sweep's own sequential intervals
    html = open(os.path.join(d, "report.html")).read()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    data = json.loads(m.group(1).replace("<\\/", "</"))
    assert data["meta"]["sequential"] is True
    forest = {r["config"]: r for r in data["forest"]}
    for row in con:
        name = row["configuration"].decode()
        if not math.isfinite(row["difference"]):
            continue
        r = forest[name]
        assert r["verdict"] == row["verdict"].decode(), (r, row)
        assert abs(r["lo"] - row["lo"]) < 1e-12 and abs(r["hi"] - row["hi"]) < 1e-12, (r, row)


def test_sequential_leads():
    """A replicate: sweep's own verdicts lead everywhere a reader or a
    script looks first: the page's verdict table (above the forest plot that draws them),
    report.md's summary line, stdout, --json's `contrasts` and contrasts.csv; the
    fixed-sample re-test of the same runs is named as such wherever it is (the page's second
    table, report.md's heading, --json's `fixed_sample_contrasts`,
    fixed_sample_contrasts.csv)."""
    import pandas as pd
    out = replicate_sweep(FILES["dir"])
    d = os.path.join(FILES["dir"], "rep-json")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT, out,
                        "-o", d, "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with h5py.File(out, "r") as f:
        own = {r["configuration"].decode(): (r["verdict"].decode(), float(r["difference"]))
               for r in f["contrasts"][()]}
    js = json.loads(p.stdout)
    assert js["verdicts"] == "sequential", js.keys()
    got = {r["config"]: (r["verdict"], r["diff"]) for r in js["contrasts"]}
    assert got.keys() == own.keys(), (got, own)
    for k, (v, diff) in own.items():
        assert got[k][0] == v and (math.isnan(diff) and got[k][1] is None or
                                   abs(got[k][1] - diff) < 1e-12), (k, got[k], v, diff)
    assert len(js["fixed_sample_contrasts"]) == len(own)
    assert all("p_holm" in r for r in js["fixed_sample_contrasts"])
    csv = pd.read_csv(os.path.join(d, "contrasts.csv"), keep_default_na=False)
    assert dict(zip(csv["config"], csv["verdict"])) == {k: v for k, (v, _) in own.items()}
    assert set(csv["method"]) == {"sequential"}
    fixed = pd.read_csv(os.path.join(d, "fixed_sample_contrasts.csv"))
    assert "p_holm" in fixed and len(fixed) == len(own)
    md = open(os.path.join(d, "report.md")).read()
    summary = md.split("\n")[2]
    assert summary.startswith("**Verdicts:**") and "sequential" in summary, md[:400]
    assert "### Fixed-sample re-test (not the sweep's test)" in md
    # the page: the verdict table is the sweep's own, the re-test is a second, named table
    html = open(os.path.join(d, "report.html")).read()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    data = json.loads(m.group(1))
    tables = {t["id"]: t for t in data["tables"]}
    ver = tables["verdict"]
    keys = [c["key"] for c in ver["columns"]]
    assert "sequential" in ver["title"].lower()
    assert {r[keys.index("config")]: r[keys.index("verdict")] for r in ver["rows"]} == \
        {k: v for k, (v, _) in own.items()}
    assert tables["fixed"]["title"] == "Fixed-sample re-test (not the sweep's test)"
    assert "sequential" in data["meta"]["summary"]


def test_fixed_sweep_has_none():
    """A sweep with fixed seeds has no sequential section."""
    d = FILES["dir"]
    spec = C.write(os.path.join(d, "fixed.yaml"),
                   C.micro_spec(C.corpus_path(), steps=20, seeds=(0, 1),
                                variants="  baseline: {}\n  h2: {model.n_head: 2}\n"))
    out = os.path.join(d, "fixed.h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag="fixed")
    assert aa.load(out).replicate_contrasts is None
    rep = os.path.join(d, "fixed-rep")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT, out,
                        "-o", rep], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Sequential verdicts" not in open(os.path.join(rep, "report.md")).read()


if __name__ == "__main__":
    W.main_in_workdir("report-sequential", FILES, [("sequential_section", test_sequential_section),
                                                   ("sequential_leads", test_sequential_leads),
                                                   ("fixed_sweep_has_none",
                                                    test_fixed_sweep_has_none)])
