"""Instability, near-zero fraction and loops reach the sweep file (docs/metrics.md): a run
whose loss blows up (lr 5, no clipping, no warmup) ends `done` with `instability`
above_uniform, its step and loss in /runs, while an ordinary micro run and a Tanh run are
`none`; /acts carries near_zero_frac per layer (> 0 for Tanh, whose exact-zero fraction is
0; never below zero_frac); /samples names each sample's repetition with a consistent loop
period and coverage; the sweep's progress line and `ablate train --json` say it too."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = ("  baseline: {}\n"
            "  tanh: {model.activation: tanh}\n"
            "  unstable: {train.lr: 5.0, train.grad_clip: 0, train.warmup_steps: 0}\n")
LIMIT = math.log(65) + 1  # ln V + 1 for the char vocabulary of Tiny Shakespeare


def test_run_health():
    corpus = C.corpus_path()
    with C.workdir("run_health") as d:
        spec = C.write(os.path.join(d, "h.yaml"),
                       C.micro_spec(corpus, steps=40, seeds=(1,), variants=VARIANTS,
                                    stats_every=20, sample_tokens=64))
        out = os.path.join(d, "h.h5")
        rc, so, se = C.run(["run", spec, "-o", out, "--force"], expect_rc=0)
        v = C.View(out)
        runs = {r["name"]: r for r in v.runs.values()}
        for name in ("baseline/seed1", "tanh/seed1"):
            r = runs[name]
            assert r["status"] == "done" and r["instability"] == "none", r
            assert r["unstable_step"] == 0 and r["unstable_loss"] == "nan", r
        u = runs["unstable/seed1"]
        assert u["status"] == "done" and u["instability"] == "above_uniform", u
        assert 1 < u["unstable_step"] <= 5 and u["unstable_loss"] > LIMIT, u
        # the progress line says so; the other runs' lines do not
        assert "unstable/seed1 done: val_loss" in se, se[-2000:]
        assert ", unstable (above_uniform) from step %d" % u["unstable_step"] in se, se[-2000:]
        assert se.count(", unstable (") == 1, se[-2000:]
        # the flagged step's loss is the logged one (log_every 1)
        steps = {k[1]: row for k, row in v.tables["steps"].items() if k[0] == u["id"]}
        assert steps[u["unstable_step"]]["loss"] == u["unstable_loss"], steps[u["unstable_step"]]
        assert all(row["loss"] <= LIMIT for s, row in steps.items() if s < u["unstable_step"])

        acts = v.tables["acts"]
        assert acts, "no /acts rows"
        tanh_id = runs["tanh/seed1"]["id"]
        for (rid, step, layer), row in acts.items():
            assert row["zero_frac"] <= row["near_zero_frac"] <= 1.0, (rid, step, layer, row)
            if rid == tanh_id:
                assert row["zero_frac"] == 0.0 and row["near_zero_frac"] > 0.0, row

        samples = v.tables["samples"]
        assert len(samples) == 6, samples.keys()
        for key, s in samples.items():
            rep, p, frac = s["repetition"], s["loop_period"], s["loop_frac"]
            assert rep in ("none", "token_run", "ngram_loop"), (key, rep)
            assert (rep == "token_run") == bool(s["degenerate"]), (key, s)
            assert (p == 0) == (frac == 0.0), (key, s)
            if rep == "ngram_loop":
                assert 1 <= p <= 64 and 0.5 <= frac <= 1.0 and frac * 64 >= 3 * p, (key, s)
            if rep == "none":
                assert p == 0, (key, s)

        # the same fields through `ablate train --json`
        rc, so, se = C.run(["train", spec, "--run", "unstable/seed1", "--json"], expect_rc=0,
                           tag="train")
        end = [json.loads(line) for line in so.splitlines() if line.strip()][-1]
        assert end["event"] == "end" and end["status"] == "done", end
        assert end["instability"] == "above_uniform", end
        assert end["unstable_step"] == u["unstable_step"], (end, u)
        assert end["unstable_loss"] == u["unstable_loss"], (end, u)


if __name__ == "__main__":
    C.main([("run_health", test_run_health)])
