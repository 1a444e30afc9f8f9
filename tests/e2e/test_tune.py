"""tune: sweeps (docs/spec.md, "tune") through the command line.

  - ids_unchanged: every shipped spec (sweeps/*.yaml, none with tune:) plans exactly the run
    ids and names it planned before tune: existed (tests/golden/sweep_ids.txt, written by
    the release before it);
  - overlapping_seeds: `ablate plan` refuses a tuning seed that is also a comparison seed,
    in one line at that seed's FILE:LINE:COL, exit 2;
  - plan_cost: `ablate plan` lists the tuning runs before each configuration's comparison
    runs and prints the tuning cost range next to the comparison runs' cost.
"""
import collections
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

GOLDEN = os.path.join(C.SOURCE_DIR, "tests", "golden", "sweep_ids.txt")


def tune_spec(corpus, seeds="3", tune_seeds="[1000]", lrs="[3.0e-3, 1.0e-2, 3.0e-2]"):
    return ("data: {path: %s, tokenizer: char}\n"
            "base: {preset: micro, train: {steps: 40}}\n"
            "variants:\n"
            "  baseline: {}\n"
            "  rope: {model.position: rope}\n"
            "seeds: %s\n"
            "tune:\n"
            "  knobs: {train.lr: %s}\n"
            "  seeds: %s\n" % (corpus, seeds, lrs, tune_seeds))


def test_ids_unchanged():
    with C.workdir("tune_ids") as d:
        corpus = C.corpus_path(d)
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        # the shipped specs read data/*.txt relative to where they run; an id hashes the path
        # as written, not the file's content
        for name in ("tinyshakespeare.txt", "vimdoc.txt"):
            shutil.copyfile(corpus, os.path.join(d, "data", name))
        want = collections.defaultdict(list)
        with open(GOLDEN) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                spec, rid, name = line.rstrip("\n").split(" ", 2)
                want[spec].append((rid, name))
        assert len(want) >= 8, sorted(want)
        env = {"ABLATE_DATA": ""}  # ${ABLATE_DATA:-data/...}: empty takes the default
        vocab = os.environ.get("ABLATE_GPT2_VOCAB") or os.path.join(C.SOURCE_DIR, "data", "gpt2")
        if os.path.isfile(os.path.join(vocab, "encoder.json")):
            env["ABLATE_GPT2_VOCAB"] = vocab
        skipped = []
        for spec in sorted(want):
            path = os.path.join(C.SOURCE_DIR, "sweeps", spec)
            rc, out_, err_ = C.run(["plan", path, "--json"], cwd=d, env=env,
                                   tag="plan_" + spec)
            if rc != 0 and "GPT-2's vocabulary" in err_:  # not installed here: not planned
                skipped.append(spec)
                continue
            assert rc == 0, err_
            got = [(j["id"], j["name"]) for j in map(json.loads, out_.splitlines())]
            assert got == want[spec], "%s: %d runs planned, %d in the golden list; first "\
                "difference: %s" % (spec, len(got), len(want[spec]),
                                    next(((g, w) for g, w in zip(got, want[spec]) if g != w), None))
        if skipped:
            C.log("not planned without GPT-2's vocabulary: %s" % ", ".join(skipped))
        assert len(skipped) < len(want)


def test_overlapping_seeds():
    with C.workdir("tune_seeds") as d:
        corpus = C.corpus_path(d)
        spec = os.path.join(d, "t.yaml")
        C.write(spec, tune_spec(corpus, seeds="3", tune_seeds="[1000, 2]"))
        _, out_, err_ = C.run(["plan", spec], expect_rc=2, tag="plan_overlap")
        err = C.one_line(err_, "the refusal")
        # line 9 ("  seeds: [1000, 2]"), column 17: the 2
        assert err.startswith(spec + ":9:17: tune.seeds: seed 2 is also a comparison seed"), err
        out = os.path.join(d, "o.h5")
        _, out_, err_ = C.run(["run", spec, "-o", out], expect_rc=2, tag="run_overlap")
        assert C.one_line(err_, "the refusal").startswith(spec + ":9:17: "), err_
        assert not os.path.exists(out) and not os.path.exists(out + ".d")


def test_plan_cost():
    with C.workdir("tune_plan") as d:
        corpus = C.corpus_path(d)
        spec = os.path.join(d, "t.yaml")
        C.write(spec, tune_spec(corpus, lrs="[1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2, 1.0e-1, 3.0e-1]"))
        _, out_, err_ = C.run(["plan", spec, "--json"], expect_rc=0, tag="plan_json")
        names = [json.loads(l)["name"] for l in out_.splitlines()]
        assert names[:7] == ["baseline/tune/lr=1.0e-3/seed1000", "baseline/tune/lr=3.0e-3/seed1000",
                             "baseline/tune/lr=1.0e-2/seed1000", "baseline/tune/lr=3.0e-2/seed1000",
                             "baseline/tune/lr=1.0e-1/seed1000", "baseline/tune/lr=3.0e-1/seed1000",
                             "baseline/seed0"], names
        assert len(names) == 2 * (6 + 3), names
        _, out_, err_ = C.run(["plan", spec], expect_rc=0, tag="plan_text")
        line = [l for l in out_.splitlines() if l.startswith("tune:")]
        assert len(line) == 1, out_
        m = re.search(r"tune: 2 configurations x 6 candidates x 1 tuning seeds: .*eta 3: 6 to 1/3 "
                      r"of the budget, 2 to the full budget; .*\), ([0-9.]+)x to ([0-9.]+)x the "
                      r"comparison runs'", line[0])
        assert m, line[0]
        # 6 candidates at a third and 2 to the end: 10/3 budgets against 3 comparison seeds; at
        # most 6 against 3 (the runs cost the same: the learning rate costs nothing)
        assert abs(float(m.group(1)) - 10 / 9) < 0.01 and abs(float(m.group(2)) - 2.0) < 0.01, line


TESTS = [(n[5:], f) for n, f in sorted(globals().items()) if n.startswith("test_")]

if __name__ == "__main__":
    C.main(TESTS)
