"""A held-out test split (data.test_fraction): the stream's last fraction,
after the validation split, scored once on the final weights, never read before:

  none      without it, final_test_loss is NaN in `train --json`'s end event and in /runs;
  scored    with it, final_test_loss and final_test_acc are finite, and differ from the
            validation loss (other tokens);
  unseen    two corpora that differ only inside the test split train bit for bit alike
            (every step, every evaluation, every sample): nothing but final_test_loss reads
            the split, so nothing can select on it; their test losses differ;
  identity  a --resume with another data.test_fraction is refused as other data (the split is
            part of the data's identity), and a too-short test split is refused at its key;
  verdicts  a replicate: sweep with a test split decides on final_test_loss: the file says
            replicate_split test, each decision's difference is the mean paired difference of
            the runs' final_test_loss (not final_val_loss); ablate-report's contrasts are on
            it too and say so (split test), and a plan with it in one configuration only is
            refused.
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
        # 1000 bytes at the start of the test split (the last 10%; char tokens are bytes),
        # the tokens it is scored on (its first train.eval_tokens): reversed in the other copy
        start = len(text) - int(len(text) * 0.1)
        cut, end = start, start + 1000
        a = os.path.join(tmp, "a.txt")
        b = os.path.join(tmp, "b.txt")
        with open(a, "wb") as f:
            f.write(text)
        with open(b, "wb") as f:
            f.write(text[:cut] + text[cut:end][::-1] + text[end:])
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


def test_verdicts():
    import re
    import subprocess
    import h5py
    variants = "  baseline: {}\n  heads2: {model.n_head: 2}\n"
    rule = ("replicate:\n  seeds: {min: 2, max: 3}\n  looks: [2, 3]\n  resolve: 0.05\n"
            "  alpha: 0.2")
    with C.workdir("split-verdicts") as tmp:
        corpus = C.corpus_path(tmp)
        text = C.micro_spec(corpus, steps=12, variants=variants, eval_every=6, sample_tokens=0,
                            batch_size=4)
        text = re.sub(r"^seeds: .*$", rule, text, flags=re.M)
        text = text.replace("val_fraction: 0.1}", "val_fraction: 0.1, test_fraction: 0.1}")
        spec = C.write(os.path.join(tmp, "s.yaml"), text)
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="run")
        with h5py.File(out, "r") as f:
            assert C._py(f.attrs["replicate_split"]) == "test", dict(f.attrs)
            runs = {C._py(r["name"]): r for r in f["runs"][()]}
            dec = f["decisions"][()]
        assert len(dec), "no decision"
        for d in dec:
            n = int(d["n"])
            if n < 1:
                continue
            diff = {}
            for col in ("final_test_loss", "final_val_loss"):
                diff[col] = sum(runs["heads2/seed%d" % k][col] - runs["baseline/seed%d" % k][col]
                                for k in range(n)) / n
            assert math.isclose(d["difference"], diff["final_test_loss"], rel_tol=1e-9,
                                abs_tol=1e-12), (d, diff)
            assert not math.isclose(d["difference"], diff["final_val_loss"], rel_tol=1e-6), (
                "the decision's difference is the validation split's", d, diff)
        rep = os.path.join(tmp, "rep")
        py = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
        p = subprocess.run([py, os.path.join(C.SOURCE_DIR, "analysis", "ablate-report"), out,
                            "-o", rep], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert "Differences of the final test loss (test split)." in p.stdout, p.stdout
        md = open(os.path.join(rep, "report.md")).read()
        assert "Split: **test**" in md and "Split: **validation**" not in md.split(
            "## Against the baseline at equal FLOPs")[0], md[:4000]
        import csv
        with open(os.path.join(rep, "fixed_sample_contrasts.csv")) as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 1 and rows[0]["split"] == "test", rows
        seeds = [k for k in range(3) if "heads2/seed%d" % k in runs and
                 C._py(runs["heads2/seed%d" % k]["status"]) == "done" and
                 C._py(runs["baseline/seed%d" % k]["status"]) == "done"]
        want = sum(runs["heads2/seed%d" % k]["final_test_loss"] -
                   runs["baseline/seed%d" % k]["final_test_loss"] for k in seeds) / len(seeds)
        assert math.isclose(float(rows[0]["diff"]), want, rel_tol=1e-9, abs_tol=1e-12), (
            rows[0]["diff"], want)
        # a test split in one configuration only: verdicts would mix splits
        mixed = C.write(os.path.join(tmp, "m.yaml"), text.replace(
            ", test_fraction: 0.1}", "}").replace(
            "heads2: {model.n_head: 2}", "heads2: {model.n_head: 2, data.test_fraction: 0.1}"))
        rc, _, err = C.run(["plan", mixed])
        assert rc == 2 and "replicate" in err and "data.test_fraction" in err, (rc, err)


if __name__ == "__main__":
    C.main([("none", test_none), ("scored", test_scored), ("unseen", test_unseen),
            ("identity", test_identity), ("verdicts", test_verdicts)])
