"""A held-out test split (data.test_fraction): the stream's last fraction,
after the validation split, scored once on the final weights, never read before:

  none      without it, final_test_loss is NaN in `train --json`'s end event and in /runs;
  scored    with it, final_test_loss and final_test_acc are finite, and differ from the
            validation loss (other tokens);
  unseen    two corpora that differ only inside the test split train bit for bit alike
            (every step, every evaluation, every sample): nothing but final_test_loss reads
            the split, so nothing can select on it; their test losses differ;
  identity  a --resume with another data.test_fraction is refused as other data (the split is
            part of the data's identity), and a too-short test split is refused at its key.
Run one case alone: test_test_split.py NAME.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def spec_text(corpus, test=None):
    s = C.micro_spec(corpus, steps=8, seeds=(0,), eval_every=4, sample_tokens=8, batch_size=4)
    if test is not None:
        s = s.replace("val_fraction: 0.1}", "val_fraction: 0.1, test_fraction: %s}" % test)
    return s


def events(spec, *args):
    rc, out, err = C.run(["train", spec, "--json"] + list(args), expect_rc=0, tag="train")
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def end_of(evs):
    return [e for e in evs if e["event"] == "end"][0]


def test_none():
    with C.workdir("split-none") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        end = end_of(events(spec))
        assert end["final_test_loss"] is None or math.isnan(float(end["final_test_loss"])), end
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        import h5py
        with h5py.File(out, "r") as f:
            assert all(math.isnan(x) for x in f["runs"]["final_test_loss"]), "test loss without a split"


def test_scored():
    with C.workdir("split-scored") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp), 0.1))
        end = end_of(events(spec))
        assert math.isfinite(end["final_test_loss"]) and 0 <= end["final_test_acc"] <= 1, end
        assert end["final_test_loss"] != end["final_val_loss"], end
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        import h5py
        with h5py.File(out, "r") as f:
            got = float(f["runs"]["final_test_loss"][0])
        assert got == end["final_test_loss"], (got, end["final_test_loss"])


def test_unseen():
    with C.workdir("split-unseen") as tmp:
        with open(C.corpus_path(tmp), "rb") as f:
            text = f.read()
        # the last 5% of the bytes (inside the test split of 10%): reversed in the other copy
        cut = len(text) - len(text) // 20
        a = os.path.join(tmp, "a.txt")
        b = os.path.join(tmp, "b.txt")
        with open(a, "wb") as f:
            f.write(text)
        with open(b, "wb") as f:
            f.write(text[:cut] + text[cut:][::-1])
        ea = events(C.write(os.path.join(tmp, "a.yaml"), spec_text(a, 0.1)))
        eb = events(C.write(os.path.join(tmp, "b.yaml"), spec_text(b, 0.1)))

        def trained(evs):
            keep = []
            for e in evs:
                e = {k: v for k, v in e.items() if k not in (
                    "time", "start_utc", "end_utc", "attempt_start_utc", "tokens_per_s",
                    "train_seconds", "data_sha256", "peak_rss", "final_test_loss",
                    "final_test_acc", "config")}
                keep.append(e)
            return keep
        assert trained(ea) == trained(eb), "the test split reached training or evaluation"
        assert end_of(ea)["final_test_loss"] != end_of(eb)["final_test_loss"]


def test_identity():
    with C.workdir("split-identity") as tmp:
        corpus = C.corpus_path(tmp)
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(corpus, 0.1))
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        spec2 = C.write(os.path.join(tmp, "s2.yaml"), spec_text(corpus, 0.2))
        rc, _, err = C.run(["run", spec2, "-o", out, "--resume"])
        assert rc == 2, (rc, err)
        short = C.write(os.path.join(tmp, "short.yaml"), spec_text(corpus, 1e-6))
        rc, _, err = C.run(["plan", short])
        assert rc == 2 and "test split" in err and "data.test_fraction" in err, (rc, err)


if __name__ == "__main__":
    C.main([("none", test_none), ("scored", test_scored), ("unseen", test_unseen),
            ("identity", test_identity)])
