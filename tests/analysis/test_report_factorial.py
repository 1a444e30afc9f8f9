"""ablate-report on a grid sweep with factorial contrasts (`contrasts: interactions`): a real
2x2x2 micro sweep (activation x position x norm). /contrasts holds the main effects and
interactions, each difference equal to the hand computation from /runs (per seed: the mean
over the other factors' levels of the effect; then the mean over the seeds of its last
look); the report leads with the main-effects table, one line per interaction saying whether
it is resolved, and the interaction plots, whose cell means equal the hand computation."""
import itertools
import os
import subprocess
import sys

import h5py
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis import analyze as A  # noqa: E402

FILES = {}
LEVELS = {"model.activation": ["relu", "gelu"], "model.position": ["learned", "rope"],
          "model.norm": ["pre", "post"]}
SHORT = {"model.activation": "activation", "model.position": "position", "model.norm": "norm"}
GRID = "".join("  %s: [%s]\n" % (k, ", ".join(v)) for k, v in LEVELS.items())


def factorial_sweep(d):
    if "sweep" in FILES:
        return FILES["sweep"]
    spec = C.micro_spec(C.corpus_path(), steps=30, grid=GRID, eval_every=15, stats_every=15,
                        sample_tokens=8)
    spec = spec.replace("seeds: [0, 1, 2]\n",
                        "replicate:\n  seeds: {min: 2, max: 3}\n  looks: [2, 3]\n"
                        "  resolve: 0.05\n  alpha: 0.2\n"
                        "  baseline: {model.activation: relu, model.position: learned, "
                        "model.norm: pre}\n"
                        "contrasts: interactions\n")
    path = C.write(os.path.join(d, "fact.yaml"), spec)
    out = os.path.join(d, "fact.h5")
    C.run(["run", path, "-o", out], expect_rc=0, tag="factorial", timeout=600)
    FILES["sweep"] = out
    return out


def read(out):
    with h5py.File(out, "r") as f:
        loss = {C._py(r["name"]): float(r["final_val_loss"]) for r in f["runs"][()]
                if C._py(r["status"]) == "done"}
        cons = [{k: C._py(row[k]) for k in row.dtype.names} for row in f["contrasts"][()]]
    return loss, cons


def cell(loss, levels, k):
    """Seed k's loss in the cell {factor: level}."""
    return loss["/".join("%s=%s" % (SHORT[f], levels[f]) for f in LEVELS) + "/seed%d" % k]


def hand(loss, con):
    """The contrast's mean paired difference over seeds 0..n-1, by its definition."""
    a, b = con["factor"], con["factor2"]
    fixed = [a] + ([b] if b else [])
    others = [f for f in LEVELS if f not in fixed]
    total = 0.0
    for k in range(con["n"]):
        d = 0.0
        combos = list(itertools.product(*[LEVELS[f] for f in others]))
        for combo in combos:
            at = dict(zip(others, combo))
            if not b:
                d += cell(loss, dict(at, **{a: con["level"]}), k) - \
                    cell(loss, dict(at, **{a: con["base_level"]}), k)
            else:
                lm = cell(loss, dict(at, **{a: con["level"], b: con["level2"]}), k)
                l0 = cell(loss, dict(at, **{a: con["level"], b: con["base_level2"]}), k)
                m0 = cell(loss, dict(at, **{a: con["base_level"], b: con["level2"]}), k)
                b0 = cell(loss, dict(at, **{a: con["base_level"], b: con["base_level2"]}), k)
                d += lm - l0 - m0 + b0
        total += d / len(combos)
    return total / con["n"]


def test_contrasts_by_hand():
    out = factorial_sweep(FILES["dir"])
    loss, cons = read(out)
    kinds = [c["kind"] for c in cons]
    assert kinds == ["main"] * 3 + ["interaction"] * 3, kinds
    assert [(c["factor"], c["factor2"]) for c in cons[3:]] == [
        ("model.activation", "model.position"), ("model.activation", "model.norm"),
        ("model.position", "model.norm")], cons
    for c in cons:
        assert c["n"] >= 2, c
        want = hand(loss, c)
        assert abs(c["difference"] - want) < 1e-9, (c, want)
    C.log("%d contrasts equal their hand computation: %s" % (
        len(cons), ", ".join("%s %+.4f" % (c["configuration"], c["difference"]) for c in cons)))


def test_report_leads():
    out = factorial_sweep(FILES["dir"])
    loss, cons = read(out)
    d = os.path.join(FILES["dir"], "rep")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT, out,
                        "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    md = open(os.path.join(d, "report.md")).read()
    lead = md.find("## Main effects and interactions")
    assert 0 <= lead < md.index("## Against the baseline"), md[:3000]
    section = md[lead:md.index("## Against the baseline")]
    mains = section[section.index("### Main effects"):section.index("### Interactions")]
    for c in cons:
        line = [l for l in section.splitlines() if l.startswith("| `%s` |" % c["configuration"])]
        assert line and c["verdict"] in line[0], (c, section[:3000])
        assert ("%+.4f" % c["difference"]) in line[0].replace("−", "-"), (line[0], c)
        assert (c["kind"] == "main") == (line[0] in mains), (line[0], c)
        if c["kind"] == "interaction":
            said = [l for l in section.splitlines() if l.startswith("- Interaction `%s=%s` × "
                                                                    "`%s=%s`:" % (
                c["factor"], c["level"], c["factor2"], c["level2"]))]
            resolved = c["verdict"] in ("better", "worse", "equivalent")
            assert said and (": resolved" in said[0]) == resolved, (said, c)
    assert "![interaction plots](interactions.png)" in section, section[-1500:]
    assert os.path.getsize(os.path.join(d, "interactions.png")) > 0
    fx = pd.read_csv(os.path.join(d, "factorial_contrasts.csv"), keep_default_na=False)
    assert list(fx["effect"]) == [c["configuration"] for c in cons], fx
    # the plot's points: activation x position, per seed the mean over norm, then over seeds
    cells = A.interaction_cells(aa.load(out), "model.activation", "model.position")
    assert len(cells) == 4, cells
    for _, r in cells.iterrows():
        seeds = sorted({int(n.rsplit("seed", 1)[1]) for n in loss})
        per = [sum(cell(loss, {"model.activation": r["level"], "model.position": r["level2"],
                               "model.norm": nm}, k) for nm in LEVELS["model.norm"]) / 2
               for k in seeds if all(
                   "activation=%s/position=%s/norm=%s/seed%d" % (r["level"], r["level2"], nm, k)
                   in loss for nm in LEVELS["model.norm"])]
        assert r["n"] == len(per) and abs(r["mean"] - sum(per) / len(per)) < 1e-12, (r, per)


if __name__ == "__main__":
    W.main_in_workdir("report-factorial", FILES, [("contrasts_by_hand", test_contrasts_by_hand),
                                                  ("report_leads", test_report_leads)])
