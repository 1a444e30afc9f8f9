"""ablate-report on mixture-of-experts and mixture-of-heads runs: a
Routing section per routed block with each expert's and head's share, the
router's entropy, the balance loss and the dropped share, equal to the file's rows at the
last recorded step (mean over seeds); routing.csv holds every recorded step; a dense sweep
has no such section."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"


def report(out, d):
    p = subprocess.run([PY, W.REPORT, out, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return open(os.path.join(d, "report.md")).read()


def test_routing_section():
    d = FILES["dir"]
    spec = C.micro_spec(C.corpus_path(), steps=30, seeds=(0, 1), stats_every=10,
                        variants="  baseline: {}\n"
                                 "  moe4: {model.moe_experts: 4, model.moe_top_k: 1,"
                                 " model.moe_capacity: 1.0}\n"
                                 "  moh: {model.moh_shared: 1, model.moh_top_k: 2}\n")
    out = os.path.join(d, "moe.h5")
    C.run(["run", C.write(os.path.join(d, "moe.yaml"), spec), "-o", out], expect_rc=0, tag="moe")
    md = report(out, os.path.join(d, "rep"))
    assert "### Routing" in md, md[-3000:]
    section = md[md.index("### Routing"):].split("\n## ")[0].split("\n### ", 1)[0]
    sw = aa.load(out)
    acts = sw.acts.merge(sw.runs[["index", "config"]], left_on="run", right_on="index",
                         suffixes=("", "_r")) if "config" not in sw.acts else sw.acts
    last = acts[acts["step"] == acts.groupby("run")["step"].transform("max")]
    for cfg, share_col in (("moe4", "expert_frac"), ("moh", "head_frac")):
        rows = last[last["config"] == cfg]
        assert len(rows), cfg
        for layer, g in rows.groupby("layer"):
            shares = np.mean([[float(x) for x in t.split()] for t in g[share_col]], axis=0)
            want = " ".join("%.4g" % v for v in shares)
            line = [l for l in section.splitlines()
                    if l.startswith("| %s | %d |" % (cfg, layer))]
            assert line and want in line[0], (cfg, layer, want, line, section)
            if cfg == "moe4":
                ent = "%.3f" % g["router_entropy"].mean()
                assert ent in line[0], (ent, line[0])
                assert abs(sum(shares) - 1) < 1e-3, shares
    assert "| baseline |" not in section, section  # a dense block routes nothing
    # the per-configuration table shows params and active params side by side (to
    # compare at equal parameters or at equal active compute), from the file's own columns
    table = md[md.index("## Per configuration"):].split("\n### ", 1)[0]
    header = [l for l in table.splitlines() if l.startswith("| configuration | n |")][0]
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert "active params" in cols, header
    for cfg in ("baseline", "moe4", "moh"):
        runs = sw.runs[sw.runs["config"] == cfg]
        line = [l for l in table.splitlines() if l.startswith("| %s |" % cfg)][0]
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[cols.index("params")] == "{:,}".format(int(runs["params"].iloc[0])), line
        assert cells[cols.index("active params")] == \
            "{:,}".format(int(runs["active_params"].iloc[0])), line
    moe = sw.runs[sw.runs["config"] == "moe4"].iloc[0]
    assert moe["active_params"] < moe["params"], moe  # the test's point: they differ
    csv = pd.read_csv(os.path.join(d, "rep", "routing.csv"))
    assert set(csv["config"]) == {"moe4", "moh"} and csv["step"].nunique() >= 3, csv


def test_dense_has_none():
    d = FILES["dir"]
    spec = C.micro_spec(C.corpus_path(), steps=10, seeds=(0,),
                        variants="  baseline: {}\n  h2: {model.n_head: 2}\n")
    out = os.path.join(d, "dense.h5")
    C.run(["run", C.write(os.path.join(d, "dense.yaml"), spec), "-o", out], expect_rc=0,
          tag="dense")
    md = report(out, os.path.join(d, "dense-rep"))
    assert "### Routing" not in md
    assert not os.path.exists(os.path.join(d, "dense-rep", "routing.csv"))


if __name__ == "__main__":
    W.main_in_workdir("report-routing", FILES, [("routing_section", test_routing_section),
                                                ("dense_has_none", test_dense_has_none)])
