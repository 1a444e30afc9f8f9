"""Separate seeds for the data order and the initialisation (train.data_seed,
model.init_seed), each defaulting to the run's seed:

  defaults       a run with neither set trains bit for bit as one with both set to its seed,
                 and its run id is the one the spec had before the knobs existed (a knob at
                 its default is not hashed);
  apart          the run's seed no longer reaches the loss when both are set: seed 2 with
                 init_seed 1 and data_seed 1 trains as seed 1; init_seed alone and data_seed
                 alone each move the curve, differently;
  refused        a seed below -1 is refused at its key, exit 2.
Run one case alone: test_seeds.py NAME.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def losses(spec, *args):
    rc, out, err = C.run(["train", spec, "--json"] + list(args), expect_rc=0, tag="train")
    return [json.loads(l)["loss"] for l in out.splitlines() if '"event":"step"' in l]


def spec_text(corpus):
    return C.micro_spec(corpus, steps=6, seeds=(1,), eval_every=0, sample_tokens=4,
                        batch_size=4)


def test_defaults():
    with C.workdir("seeds-defaults") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        plain = losses(spec, "--seed", "1")
        both = losses(spec, "--seed", "1", "--set", "train.data_seed=1",
                      "--set", "model.init_seed=1")
        assert plain and plain == both, (plain, both)
        # ids hash the knobs that differ from their defaults: these only when set
        ids = [r["id"] for r in C.plan_json(spec)]
        assert [r["id"] for r in C.plan_json(spec, ["train.data_seed=1"])] != ids


def test_apart():
    with C.workdir("seeds-apart") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        one = losses(spec, "--seed", "1")
        two_as_one = losses(spec, "--seed", "2", "--set", "train.data_seed=1",
                            "--set", "model.init_seed=1")
        assert one == two_as_one, (one, two_as_one)
        init2 = losses(spec, "--seed", "1", "--set", "model.init_seed=2")
        data2 = losses(spec, "--seed", "1", "--set", "train.data_seed=2")
        assert init2[0] != one[0] and data2[0] != one[0], (one[0], init2[0], data2[0])
        assert init2 != data2


def test_refused():
    with C.workdir("seeds-refused") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        for knob in ("train.data_seed", "model.init_seed"):
            rc, _, err = C.run(["plan", spec, "--set", knob + "=-2"])
            assert rc == 2 and knob in err and ">= 0, or -1" in err, (rc, err)


if __name__ == "__main__":
    C.main([("defaults", test_defaults), ("apart", test_apart), ("refused", test_refused)])
