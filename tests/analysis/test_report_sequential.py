"""ablate-report on a replicate: sweep (issue 20): the report reads /contrasts and
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
    spec = C.micro_spec(C.corpus_path(), steps=40, variants="  baseline: {}\n"
                        "  lr_hi: {train.lr: 3.0e-2}\n  heads2: {model.n_head: 2}\n",
                        eval_every=20, stats_every=20, sample_tokens=8)
    spec = spec.replace("seeds: [0, 1, 2]\n", "replicate:\n  seeds: {min: 2, max: 4}\n"
                        "  looks: [2, 3, 4]\n  resolve: 0.05\n  alpha: 0.2\n")
    path = C.write(os.path.join(d, "rep.yaml"), spec)
    out = os.path.join(d, "rep.h5")
    C.run(["run", path, "-o", out], expect_rc=0, tag="replicate")
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
    fixed = md.find("### As if the number of seeds had been fixed")
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
    # the page's forest plot draws the sweep's own sequential intervals (issue 19, item 4)
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
                                                   ("fixed_sweep_has_none",
                                                    test_fixed_sweep_has_none)])
