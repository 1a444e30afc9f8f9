"""One sweep run in-process and on 1, 2 and 4 MPI ranks gives identical metrics.

Every non-timing column of every table must be equal bit for bit (/runs compared by run
id, without rank/host); `ablate inspect --json` must list every run as done; one run must
equal a standalone `ablate train --json --seed S --set ...` of the same configuration.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

GRID = "  model.n_head: [2, 4]\n"
VARIANTS = "  baseline: {}\n  gelu: {model.activation: gelu}\n"
SEEDS = (3, 11)


def check_inspect(out, view):
    rc, so, se = C.run(["inspect", out, "--json"], expect_rc=0, tag="inspect")
    rows = [json.loads(l) for l in so.splitlines() if l.strip()]
    got = {r.get("id"): r for r in rows}
    problems = []
    if len(rows) != len(view.order):
        problems.append("%d rows, expected %d" % (len(rows), len(view.order)))
    for rid in view.order:
        r = got.get(rid)
        if r is None:
            problems.append("run %s missing" % rid)
        elif r.get("status") != "done" or r.get("name") != view.runs[rid]["name"]:
            problems.append("run %s: name %r status %r" % (rid, r.get("name"), r.get("status")))
    if problems:
        raise AssertionError("ablate inspect --json %s:\n  %s" % (out, "\n  ".join(problems)))
    # the plain table too: one line per run
    rc, so, se = C.run(["inspect", out], expect_rc=0, tag="inspect")
    for rid in view.order:
        if rid not in so:
            raise AssertionError("ablate inspect %s does not list %s:\n%s" % (out, rid, so))


def check_train(tmp, corpus, view):
    """The sweep's run gelu/n_head=4/seed11 equals `ablate train` of the same config."""
    name = "gelu/n_head=4/seed11"
    rid = view.names().get(name)
    assert rid, "no run %s in %s" % (name, sorted(view.names()))
    base = C.write(os.path.join(tmp, "base.yaml"), C.micro_spec(corpus, seeds=SEEDS))
    rc, so, se = C.run(["train", base, "--json", "--seed", "11", "--set", "model.n_head=4",
                        "--set", "model.activation=gelu"], expect_rc=0, tag="train")
    ev = [json.loads(l) for l in so.splitlines() if l.strip()]
    # the --json interface: every event kind with at least the fields the issue names
    required = {
        "start": {"params", "flops_per_token", "kv_bytes_per_token", "config"},
        "step": {"step", "tokens", "loss", "lr", "grad_norm", "time"},
        "eval": {"step", "val_loss", "val_acc"},
        "act": {"step", "layer", "zero_frac", "max", "min", "mean", "rms"},
        "sample": {"kind", "text", "degenerate"},
        "end": {"status", "steps", "tokens", "train_seconds", "tokens_per_s", "final_val_loss"},
    }
    kinds = {e["event"] for e in ev}
    assert kinds >= set(required), "train --json lacks events %s" % (set(required) - kinds)
    for e in ev:
        missing = required.get(e["event"], set()) - set(e)
        assert not missing, "%s event lacks %s: %s" % (e["event"], missing, e)
    start = ev[0]
    assert start["event"] == "start" and start["config"]["model.n_head"] == 4 \
        and start["config"]["model.activation"] == "gelu", start
    assert {e["kind"] for e in ev if e["event"] == "sample"} == {"greedy", "temperature"}
    steps = {e["step"]: e for e in ev if e["event"] == "step"}
    evals = {e["step"]: e for e in ev if e["event"] == "eval"}
    end = [e for e in ev if e["event"] == "end"]
    assert end and end[0]["status"] == "done", "train did not end done: %s" % end

    def same(x, y):  # JSON prints %.9g-ish; compare at that precision, exactly
        return float("%.9g" % x) == float("%.9g" % y) or x == y

    problems = []
    st = {k[1]: r for k, r in view.tables["steps"].items() if k[0] == rid}
    if sorted(st) != sorted(steps):
        problems.append("step sets differ: sweep %d rows, train %d" % (len(st), len(steps)))
    for s in sorted(set(st) & set(steps)):
        for c in ("loss", "lr", "grad_norm", "tokens"):
            if not same(st[s][c], steps[s][c]):
                problems.append("step %d %s: sweep %r train %r" % (s, c, st[s][c], steps[s][c]))
    ev_sweep = {k[1]: r for k, r in view.tables["evals"].items() if k[0] == rid}
    for s in sorted(evals):
        if s not in ev_sweep or not same(ev_sweep[s]["val_loss"], evals[s]["val_loss"]):
            problems.append("eval %d: sweep %r train %r" % (s, ev_sweep.get(s), evals[s]))
    r = view.runs[rid]
    if not same(r["final_val_loss"], end[0]["final_val_loss"]):
        problems.append("final_val_loss sweep %r train %r" % (r["final_val_loss"],
                                                               end[0]["final_val_loss"]))
    if problems:
        raise AssertionError("sweep run %s vs ablate train:\n  %s" % (name,
                                                                     "\n  ".join(problems[:20])))


def test_rank_identity():
    with C.workdir("ranks") as tmp:
        corpus = C.corpus_path(tmp)
        spec = C.write(os.path.join(tmp, "spec.yaml"),
                       C.micro_spec(corpus, steps=80, seeds=SEEDS, grid=GRID, variants=VARIANTS))
        plan = C.plan_json(spec)
        assert len(plan) == 8, "expected 8 planned runs, got %d" % len(plan)
        views = {}
        for label, ranks in (("in-process", None), ("1 rank", 1), ("2 ranks", 2),
                             ("4 ranks", 4)):
            out = os.path.join(tmp, "out-%s.h5" % (ranks or 0))
            t0 = C.time.monotonic()
            rc, so, se = C.run(["run", spec, "-o", out], ranks=ranks, expect_rc=0, timeout=240)
            C.log("  %s: %.1f s" % (label, C.time.monotonic() - t0))
            v = C.View(out)
            C.assert_complete(v, len(plan), label)
            assert set(v.order) == {p["id"] for p in plan}, "%s: ids differ from plan" % label
            assert v.attrs.get("status") == "complete", "%s: status %r" % (label,
                                                                          v.attrs.get("status"))
            done = C.reported_finished(se)
            assert sorted(done) == sorted(p["name"] for p in plan), \
                "%s: progress reported %s" % (label, done)
            views[label] = (v, out)
        ref, _ = views["in-process"]
        for label, (v, out) in views.items():
            if label != "in-process":
                C.assert_same(ref, v, "in-process", label, ignore_cols=C.RUNS_PLACEMENT)
            check_inspect(out, v)
        check_train(tmp, corpus, ref)


if __name__ == "__main__":
    C.main([("rank_identity", test_rank_identity)])
