"""ablate-report's activation maximum: /acts rows of split val (stats.val) are
kept apart from the training rows (Sweep.val_acts), and the report states the maximum as a
write-up measures it: the largest post-activation value over every layer and every
validation batch of the final evaluation, next to the last training batch's numbers and the
pre-activation maxima. Values are checked against the file's own rows, read with h5py."""
import os
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis import analyze as A  # noqa: E402

FILES = {}


def actmax_sweep():
    """relu vs relu2, 2 seeds, 20 steps, evaluations at 10 and 20, with stats.val."""
    if "h5" not in FILES:
        d = FILES["dir"]
        spec = C.write(os.path.join(d, "actmax.yaml"),
                       C.micro_spec(C.corpus_path(), steps=20, seeds=(0, 1),
                                    grid="  model.activation: [relu, relu2]\n",
                                    eval_every=10, stats_every=10, eval_tokens=256,
                                    sample_tokens=0))
        out = os.path.join(d, "actmax.h5")
        C.run(["run", spec, "-o", out, "--force", "--set", "stats.val=true"], expect_rc=0,
              tag="actmax")
        FILES["h5"] = out
    return FILES["h5"]


def raw_acts(path):
    """/acts as written, with split and run names decoded."""
    with h5py.File(path, "r") as f:
        a = f["acts"][()]
        names = [n.decode() if isinstance(n, bytes) else n for n in f["runs"]["name"]]
    split = h5py.check_enum_dtype(a.dtype["split"])
    by_value = {v: k for k, v in split.items()} if split else None
    df = pd.DataFrame({c: a[c] for c in ("run", "step", "layer", "max", "pre_max",
                                         "zero_frac")})
    df["split"] = [by_value[v] if by_value else (v.decode() if isinstance(v, bytes) else v)
                   for v in a["split"]]
    df["config"] = [names[r].rsplit("/seed", 1)[0] for r in df["run"]]
    return df


def test_val_rows_apart():
    """Sweep.acts has the training rows only, one per (run, step, layer); val_acts the
    validation rows, one per (run, evaluation step, layer)."""
    path = actmax_sweep()
    sw = aa.load(path)
    raw = raw_acts(path)
    assert set(raw["split"]) == {"train", "val"}, set(raw["split"])
    assert (sw.acts["split"] == "train").all() and (sw.val_acts["split"] == "val").all()
    assert len(sw.acts) + len(sw.val_acts) == len(raw)
    assert not sw.acts.duplicated(["run", "step", "layer"]).any()
    assert sorted(sw.val_acts["step"].unique()) == [10, 20], sw.val_acts["step"].unique()
    assert len(sw.val_acts) == 4 * 2 * 2  # runs x evaluations x layers
    assert sw.acts["pre_max"].notna().all() and sw.val_acts["pre_max"].notna().all()


def test_report_states_val_max():
    """per_config's mlp_val_max is, per run, the largest val max over the layers at the last
    evaluation, then the mean over seeds; the report's Activation maximum table shows it
    beside the last training batch's numbers, and the per-layer table the pre-act max."""
    path = actmax_sweep()
    raw = raw_acts(path)
    val = raw[raw["split"] == "val"]
    val = val[val["step"] == val.groupby("run")["step"].transform("max")]
    want = val.groupby("run").agg(config=("config", "first"), mx=("max", "max"),
                                  pre=("pre_max", "max")).groupby("config").mean()
    train = raw[raw["split"] == "train"]
    train = train[train["step"] == train.groupby("run")["step"].transform("max")]
    want_layers = train.groupby("run").agg(config=("config", "first"), mx=("max", "max"),
                                           pre=("pre_max", "max")).groupby("config").mean()
    per = A.per_config(aa.load(path)).set_index("config")
    for c in want.index:
        assert abs(per.loc[c, "mlp_val_max"] - want.loc[c, "mx"]) < 1e-12, (c, per.loc[c])
        assert abs(per.loc[c, "mlp_val_pre_max"] - want.loc[c, "pre"]) < 1e-12, c
        assert abs(per.loc[c, "mlp_max_layers"] - want_layers.loc[c, "mx"]) < 1e-12, c
        assert abs(per.loc[c, "mlp_pre_max_layers"] - want_layers.loc[c, "pre"]) < 1e-12, c
        # relu: the post-activation max is the pre-activation max (when positive)
        if c.endswith("relu"):
            assert abs(per.loc[c, "mlp_val_max"] - per.loc[c, "mlp_val_pre_max"]) < 1e-12, c
    d = os.path.join(FILES["dir"], "rep")
    p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                        path, "-o", d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    sec = md.split("### Activation maximum")[1].split("\n### ")[0]
    header = next(ln for ln in sec.splitlines() if ln.startswith("| configuration"))
    assert "**validation set, largest layer**" in header and \
        "last batch, mean over layers" in header, header
    cols = [h.strip() for h in header.strip("|").split("|")]
    at = cols.index("**validation set, largest layer**")
    for c in want.index:
        row = next(ln for ln in sec.splitlines() if ln.startswith("| %s |" % c))
        cells = [x.strip() for x in row.strip().strip("|").split("|")]
        assert cells[at] == "%.3f" % want.loc[c, "mx"], (cells, want.loc[c])
    layer_header = md.split("### Per layer")[1].split("\n")[2]
    assert "MLP pre-act max" in layer_header and "MLP max, val set" in layer_header, \
        layer_header
    configs = pd.read_csv(os.path.join(d, "configs.csv")).set_index("config")
    assert np.allclose(configs.loc[want.index, "mlp_val_max"], want["mx"])


def main():
    W.main_in_workdir("analysis-actmax", FILES, [
        ("val_rows_apart", test_val_rows_apart),
        ("report_states_val_max", test_report_states_val_max),
    ])


if __name__ == "__main__":
    main()
