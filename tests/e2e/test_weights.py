"""save_weights: the final parameters land in OUT.h5 under /weights/<id>, named and shaped
as in the tensor table, and they ARE the final model: the independent PyTorch reference
(tests/reference/gpt_ref.py) loaded with them scores the validation windows with the run's
recorded final_val_loss and final_val_acc. Runs without save_weights store nothing."""
import os
import sys

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import common as C  # noqa: E402
import gpt_ref  # noqa: E402

VARIANTS = ("  baseline: {}\n  peri: {model.norm: peri, model.norm_affine: true, "
            "model.norm_type: layernorm, model.activation: swiglu, model.position: rope}\n")


def model_cfg(row):
    cfg = {}
    for k in row.dtype.names:
        if k.startswith("model."):
            v = row[k]
            cfg[k[len("model."):]] = v.decode() if isinstance(v, bytes) else v.item()
    return cfg


def val_windows(tokens, n_train, eval_tokens, T):
    """The evaluation targets (src/worker/data.c, dataset_eval_layout): the first
    min(eval_tokens, split - 1) tokens after the validation split's first, in windows of T,
    the last one shorter; a list of (x, y) batches, one of the full windows and one of the
    short last window when there is one."""
    n = max(1, min(eval_tokens, len(tokens) - n_train - 1))
    full, rest = divmod(n, T)
    out = []
    if full:
        starts = [n_train + k * T for k in range(full)]
        out.append((np.stack([tokens[s:s + T] for s in starts]),
                    np.stack([tokens[s + 1:s + T + 1] for s in starts])))
    if rest:
        s = n_train + full * T
        out.append((tokens[s:s + rest][None, :], tokens[s + 1:s + rest + 1][None, :]))
    return [(torch.from_numpy(x).long(), torch.from_numpy(y).long()) for x, y in out]


def test_weights():
    torch.set_default_dtype(torch.float64)
    corpus = C.corpus_path()
    with C.workdir("weights") as d:
        spec = C.write(os.path.join(d, "w.yaml"),
                       C.micro_spec(corpus, steps=60, seeds=(5,), variants=VARIANTS,
                                    eval_tokens=500, extra_base="save_weights: true"))
        out = os.path.join(d, "w.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="run")
        with h5py.File(out, "r") as f:
            runs = f["runs"][:]
            vocab = bytes(f["vocab"][()]) if f["vocab"].shape == () else bytes(f["vocab"][:])
            text = open(corpus, "rb").read()
            ids = {b: i for i, b in enumerate(vocab)}
            tokens = np.array([ids[b] for b in text], dtype=np.int64)
            assert len(f["weights"]) == len(runs), "one /weights group per run"
            for row in runs:
                rid = row["id"].decode()
                g = f["weights"][rid]
                cfg = model_cfg(row)
                cfg["vocab_size"] = len(vocab)
                ref = gpt_ref.RefGPT(cfg)
                stored = {k: torch.from_numpy(g[k][...].astype(np.float64)) for k in g}
                assert sum(v.numel() for v in stored.values()) == row["params"], rid
                ref.load({key: stored["lm_head.w" if key == "lm_head" else key] for key in ref.P})
                T = cfg["context"]
                n_train = len(tokens) - int(len(tokens) * row["data.val_fraction"])
                total, hits, count = 0.0, 0, 0
                # eval_tokens 500 is no multiple of the context: a shorter last window
                for x, y in val_windows(tokens, n_train, int(row["train.eval_tokens"]), T):
                    with torch.no_grad():
                        logits, l = ref.forward(x, y)
                    total += l.item() * y.numel()
                    hits += int((logits.argmax(-1) == y).sum().item())
                    count += y.numel()
                loss, acc = total / count, hits / count
                C.log("  %s: reference val_loss %.6f (run %.6f), acc %.4f (run %.4f)" % (
                    row["name"].decode(), loss, row["final_val_loss"], acc,
                    row["final_val_acc"]))
                assert abs(loss - row["final_val_loss"]) < 1e-4, rid
                assert abs(acc - row["final_val_acc"]) < 2e-3, rid
        # without save_weights there is no /weights group
        spec2 = C.write(os.path.join(d, "n.yaml"), C.micro_spec(corpus, steps=20, seeds=(5,)))
        out2 = os.path.join(d, "n.h5")
        C.run(["run", spec2, "-o", out2], expect_rc=0, tag="run")
        with h5py.File(out2, "r") as f:
            assert "weights" not in f


if __name__ == "__main__":
    C.main([("weights", test_weights)])
