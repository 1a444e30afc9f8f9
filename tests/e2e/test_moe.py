"""A mixture-of-experts sweep: the same bits in-process and on 2 MPI ranks, the
router's statistics and the auxiliary losses in their own columns, and a dense model's id
unchanged by the MoE knobs at their defaults.

- dense and MoE runs (top-2 with a capacity, so tokens are dropped, and a z-loss; top-1 in
  every other block) give identical tables in-process and at 2 ranks;
- /acts of an MoE block: moe_experts, expert shares summing to 1, the router entropy, the
  balance loss (near alpha at balance), the share dropped; of a dense block moe_experts 1
  and zeros;
- /evals: val_aux_loss > 0 for MoE, 0 for the dense run, and val_loss is the LM loss alone
  (the MoE run's val_loss does not include it: checked against `ablate train`);
- `ablate plan`: params > active params for MoE; a dense run planned with the MoE knobs
  written at their defaults has the id of the run without them.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = ("  dense: {}\n"
            "  moe: {model.moe_experts: 4, model.moe_top_k: 2, model.moe_capacity: 1.0,"
            " model.moe_zloss: 0.001}\n"
            "  alt: {model.moe_experts: 3, model.moe_layers: every_other}\n"
            "  moh: {model.moh_shared: 1, model.moh_top_k: 2}\n")


def test_moe():
    with C.workdir("moe") as tmp:
        corpus = C.corpus_path(tmp)
        spec = C.write(os.path.join(tmp, "spec.yaml"),
                       C.micro_spec(corpus, steps=30, seeds=(5,), variants=VARIANTS,
                                    eval_every=10, stats_every=10))
        plan = {p["name"]: p for p in C.plan_json(spec)}
        assert sorted(plan) == ["alt/seed5", "dense/seed5", "moe/seed5", "moh/seed5"], sorted(plan)
        assert plan["moh/seed5"]["params"] > plan["moh/seed5"]["active_params"], plan["moh/seed5"]
        d, m = plan["dense/seed5"], plan["moe/seed5"]
        assert d["params"] == d["active_params"], d
        assert m["params"] > m["active_params"] > 0, m
        # the MoE knobs at their defaults leave a dense run's id alone
        spec0 = C.write(os.path.join(tmp, "spec0.yaml"), C.micro_spec(
            corpus, steps=30, seeds=(5,), eval_every=10, stats_every=10,
            extra_base="model: {moe_experts: 1, moe_top_k: 1, moe_ratio: 0, moe_layers: all,"
                       " moe_capacity: 0, moe_balance: 0.01, moe_zloss: 0, moh_shared: 0,"
                       " moh_top_k: 0, moh_balance: 0.01}"))
        (p0,) = C.plan_json(spec0)
        assert p0["id"] == d["id"], "dense id %s, with default MoE knobs %s" % (d["id"], p0["id"])

        views = {}
        for label, ranks in (("in-process", None), ("2 ranks", 2)):
            out = os.path.join(tmp, "out-%s.h5" % (ranks or 0))
            C.run(["run", spec, "-o", out], ranks=ranks, expect_rc=0, timeout=240)
            v = C.View(out)
            C.assert_complete(v, len(plan), label)
            views[label] = v
        ref = views["in-process"]
        C.assert_same(ref, views["2 ranks"], "in-process", "2 ranks", ignore_cols=C.RUNS_PLACEMENT)

        names = ref.names()
        acts = ref.tables["acts"]
        evals = ref.tables["evals"]
        for name, moe_layers, E in (("moe/seed5", (0, 1), 4), ("alt/seed5", (1,), 3),
                                    ("dense/seed5", (), 1), ("moh/seed5", (), 1)):
            rid = names[name]
            rows = {k[1:]: r for k, r in acts.items() if k[0] == rid}
            assert rows, "%s: no activation rows" % name
            for (step, layer), r in rows.items():
                if layer in moe_layers:
                    fr = [float(x) for x in r["expert_frac"].split()]
                    assert r["moe_experts"] == E and len(fr) == E, (name, step, layer, r)
                    assert abs(sum(fr) - 1) < 1e-3, (name, step, layer, fr)
                    assert abs(r["moe_max_frac"] - max(fr)) < 1e-3, (name, r)
                    assert 0 < r["router_entropy"] <= math.log(E) + 1e-9, (name, r)
                    # alpha E sum f P is alpha (0.01) at a uniform router, at least alpha / E
                    assert 0.01 / E < r["moe_balance"] < 0.01 * E, (name, r)
                    if name == "moe/seed5":
                        assert r["moe_zloss"] > 0, r
                else:
                    assert r["moe_experts"] == 1 and r["expert_frac"] == "" and \
                        r["moe_balance"] == 0 and r["router_entropy"] == 0, (name, layer, r)
            dropped = [r["moe_dropped"] for (s, l), r in rows.items() if l in moe_layers]
            if name == "moe/seed5":  # capacity 1.0 with top-2: some assignments dropped
                assert max(dropped) > 0, dropped
            elif dropped:
                assert max(dropped) == 0, (name, dropped)
            aux = [r["val_aux_loss"] for k, r in evals.items() if k[0] == rid]
            assert aux, name
            routed = moe_layers or name == "moh/seed5"
            assert (min(aux) > 0) if routed else (max(aux) == 0), (name, aux)
            for r in rows.values():  # mixture of heads: 1 shared head always on, 2 of 3 routed
                if name == "moh/seed5":
                    hf = [float(x) for x in r["head_frac"].split()]
                    assert len(hf) == 4 and hf[0] == 1 and abs(sum(hf[1:]) - 2) < 1e-3, (name, r)
                    assert r["moh_balance"] > 0 and 0 < r["moh_entropy"] <= math.log(3) + 1e-9, r
                else:
                    assert r["head_frac"] == "" and r["moh_balance"] == 0, (name, r)

        # the recorded val_loss is the LM loss alone: `ablate train` reports the same value,
        # and its eval events carry the auxiliary loss apart
        base = C.write(os.path.join(tmp, "base.yaml"), C.micro_spec(
            corpus, steps=30, seeds=(5,), eval_every=10, stats_every=10))
        rc, so, se = C.run(["train", base, "--json", "--seed", "5", "--set",
                            "model.moe_experts=4", "--set", "model.moe_top_k=2", "--set",
                            "model.moe_capacity=1.0", "--set", "model.moe_zloss=0.001"],
                           expect_rc=0, tag="train")
        ev = [json.loads(l) for l in so.splitlines() if l.strip()]
        rid = names["moe/seed5"]
        for e in (e for e in ev if e["event"] == "eval"):
            r = evals[(rid, e["step"])]
            assert float("%.9g" % r["val_loss"]) == float("%.9g" % e["val_loss"]), (r, e)
            assert float("%.9g" % r["val_aux_loss"]) == float("%.9g" % e["val_aux_loss"]), (r, e)
        start = ev[0]
        assert start["active_params"] == m["active_params"] and start["params"] == m["params"], start


if __name__ == "__main__":
    C.main([("moe", test_moe)])
