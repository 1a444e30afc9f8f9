"""train.flops: a budget of training FLOPs, so that configurations of
other sizes are compared at equal compute:

  plan     each run's steps are ceil(train.flops / (the plan's FLOPs a token x tokens a
           step)): a wider model trains fewer steps, a mixture of experts is counted by its
           active FLOPs, and every run's FLOPs are within one step of the budget;
  trains   the run trains exactly those steps (`ablate train --json`'s end event);
  refused  train.flops with another budget set beside it on the same line, or a negative
           one, is refused at its key, exit 2 (a budget below one step trains one step).
Run one case alone: test_flops_budget.py NAME.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

FLOPS = 4.0e9
VARIANTS = ("  baseline: {}\n"
            "  wide: {model.d_model: 64}\n"
            "  moe: {model.moe_experts: 4, model.moe_top_k: 1}\n")


def spec_text(corpus, budget="flops: %g" % FLOPS):
    s = C.micro_spec(corpus, steps=1, seeds=(0,), variants=VARIANTS, eval_every=0,
                     sample_tokens=4, batch_size=4)
    return s.replace("steps: 1,", budget + ",")


def test_plan():
    with C.workdir("flops-plan") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        runs = {r["name"].split("/")[0]: r for r in C.plan_json(spec)}
        for name, r in runs.items():
            per_step = r["flops_per_token"] * 4 * r["config"]["model.context"]
            steps = math.ceil(FLOPS / per_step)
            assert r["tokens"] == steps * 4 * r["config"]["model.context"], (name, r["tokens"])
            assert FLOPS <= r["flops"] < FLOPS + per_step, (name, r["flops"])
        assert runs["wide"]["tokens"] < runs["baseline"]["tokens"]
        # the mixture: its active FLOPs (one expert of four), not all its parameters'
        assert runs["moe"]["active_params"] < runs["moe"]["params"]
        assert runs["moe"]["tokens"] > runs["wide"]["tokens"]


def test_trains():
    with C.workdir("flops-trains") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
        want = {r["name"]: r["tokens"] // (4 * r["config"]["model.context"])
                for r in C.plan_json(spec)}
        rc, out, err = C.run(["train", spec, "--run", "wide/seed0", "--json"], expect_rc=0)
        end = [json.loads(l) for l in out.splitlines() if '"event":"end"' in l][0]
        assert end["steps"] == want["wide/seed0"], (end["steps"], want)


def test_refused():
    with C.workdir("flops-refused") as tmp:
        corpus = C.corpus_path(tmp)
        for budget, words in (("flops: 4.0e+9, steps: 3", "exactly one of"),
                              ("flops: -1.0", "must be positive")):
            spec = C.write(os.path.join(tmp, "r.yaml"), spec_text(corpus, budget))
            rc, _, err = C.run(["plan", spec])
            assert rc == 2 and words in err and "r.yaml:" in err, (budget, rc, err)


if __name__ == "__main__":
    C.main([("plan", test_plan), ("trains", test_trains), ("refused", test_refused)])
