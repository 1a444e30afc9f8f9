"""A replicate: sweep over a small grid with factorial contrasts (contrasts: main_effects,
docs/spec.md "Factorial contrasts"): real micro runs on a 2x2 grid (activation x norm).

- settled: a wide equivalence margin settles both main effects at the first look (as
  equivalent, or as better/worse where the interval excludes 0), so the
  sweep stops there: seeds 1..2 of every cell trained, seed 3 of every cell not needed;
  /contrasts holds the two main effects (kind, factor, levels), and each one's difference
  equals the hand computation from /runs: per seed, the mean over the other factor's levels
  of cell(level) - cell(base level), then the mean over seeds.
- open: a margin no run can meet at 2 seeds keeps the main effects open at the first look,
  so every cell (each enters every main effect) gets seed 3; then the last look settles
  them (or ends them unresolved) and /decisions says so.
- kill_resume: killed mid-way and resumed, the same decisions as without the kill; a
  resume under another contrasts: family refused.
- bogus: `contrasts: bogus` is refused at its line by `ablate plan`.
- ready_spec: sweeps/micro-factorial.yaml plans at the cost its header states.
"""
import os
import re
import shutil
import signal
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

GRID = ("  model.activation: [relu, gelu]\n"
        "  model.norm: [pre, post]\n")


def spec_text(corpus, resolve, contrasts="main_effects", alpha="0.2"):
    s = C.micro_spec(corpus, steps=30, grid=GRID, eval_every=15, stats_every=15,
                     sample_tokens=8)
    rep = ("replicate:\n"
           "  seeds: {min: 2, max: 3}\n"
           "  looks: [2, 3]\n"
           "  resolve: %s\n"
           "  alpha: %s\n"
           "  baseline: {model.activation: relu, model.norm: pre}\n"
           "contrasts: %s" % (resolve, alpha, contrasts))
    return re.sub(r"^seeds: .*$", rep, s, flags=re.M)


def read(out):
    with h5py.File(out, "r") as f:
        runs = {C._py(r["name"]): (C._py(r["status"]), float(r["final_val_loss"]))
                for r in f["runs"][()]}
        cons = [{k: C._py(row[k]) for k in row.dtype.names} for row in f["contrasts"][()]]
        decs = [{k: C._py(row[k]) for k in row.dtype.names} for row in f["decisions"][()]]
    return runs, cons, decs


def cell(runs, act, norm, k):
    return runs["activation=%s/norm=%s/seed%d" % (act, norm, k)][1]


def hand(runs, con, n):
    """The main effect's mean paired difference over seeds 0..n-1, by its definition."""
    other = {"model.activation": ("norm", ["pre", "post"]),
             "model.norm": ("activation", ["relu", "gelu"])}[con["factor"]]
    total = 0.0
    for k in range(n):
        d = 0.0
        for o in other[1]:
            if con["factor"] == "model.activation":
                d += cell(runs, con["level"], o, k) - cell(runs, con["base_level"], o, k)
            else:
                d += cell(runs, o, con["level"], k) - cell(runs, o, con["base_level"], k)
        total += d / len(other[1])
    return total / n


def check_contrasts(runs, cons):
    assert [c["kind"] for c in cons] == ["main", "main"], cons
    assert [(c["factor"], c["level"], c["base_level"]) for c in cons] == [
        ("model.activation", "gelu", "relu"), ("model.norm", "post", "pre")], cons
    assert all(c["factor2"] == "" for c in cons), cons
    assert cons[0]["configuration"] == "model.activation=gelu", cons
    assert cons[0]["baseline"] == "model.activation=relu", cons
    for c in cons:
        want = hand(runs, c, c["n"])
        assert abs(c["difference"] - want) < 1e-9, (c, want)


def test_settled():
    with C.workdir("factorial") as tmp:
        spec = C.write(os.path.join(tmp, "spec.yaml"), spec_text(C.corpus_path(tmp), "5.0"))
        _, out, _ = C.run(["plan", spec], expect_rc=0, tag="plan")
        assert "replicate: 4 configurations x 2 to 3 seeds: 8 to 12 runs" in out, out[-800:]
        assert "2 contrasts (main_effects: 2 main effects, 0 interactions" in out, out[-800:]
        h5 = os.path.join(tmp, "out.h5")
        rc, _, err = C.run(["run", spec, "-o", h5], tag="run", timeout=600)
        assert rc == 0, err[-3000:]
        runs, cons, decs = read(h5)
        for name, (status, _) in sorted(runs.items()):
            want = "not_needed" if name.endswith("/seed2") else "done"
            assert status == want, (name, status, runs)
        assert len(runs) == 12, runs
        assert all(c["verdict"] in ("better", "worse", "equivalent") for c in cons), cons
        assert all(c["n"] == 2 for c in cons), cons
        check_contrasts(runs, cons)
        assert len(decs) == 2 and all(d["look"] == 0 for d in decs), decs


def test_open():
    with C.workdir("factorial-open") as tmp:
        spec = C.write(os.path.join(tmp, "spec.yaml"),
                       spec_text(C.corpus_path(tmp), "1e-9", alpha="0.002"))
        h5 = os.path.join(tmp, "out.h5")
        rc, _, err = C.run(["run", spec, "-o", h5], tag="run", timeout=600)
        assert rc == 0, err[-3000:]
        runs, cons, decs = read(h5)
        first = [d for d in decs if d["look"] == 0]
        assert len(first) == 2 and all(d["verdict"] == "open" for d in first), decs
        # every cell enters every main effect: every cell got its third seed
        assert all(s == "done" for s, _ in runs.values()), runs
        assert all(c["n"] == 3 and c["verdict"] != "open" for c in cons), cons
        check_contrasts(runs, cons)
        _, ins, _ = C.run(["inspect", h5], expect_rc=0, tag="inspect")
        assert "model.activation=gelu vs model.activation=relu:" in ins, ins[-1500:]


def decisions(out):
    """(/decisions sorted by contrast and look, /contrasts rows, run statuses)."""
    with h5py.File(out, "r") as f:
        d = sorted(tuple(C._py(x) for x in row) for row in f["decisions"][()])
        c = [tuple(C._py(x) for x in row) for row in f["contrasts"][()]]
        runs = {C._py(r["name"]): C._py(r["status"]) for r in f["runs"][()]}
    return d, c, runs


def test_kill_resume():
    """Killed while the main effects are open (a run of seed 3 held) and resumed: the same
    decisions, contrasts and statuses as the uninterrupted sweep; a resume under another
    contrasts: family is refused before anything is written."""
    with C.workdir("factorial-resume") as tmp:
        spec = C.write(os.path.join(tmp, "spec.yaml"),
                       spec_text(C.corpus_path(tmp), "1e-9", alpha="0.002"))
        ref_out = os.path.join(tmp, "ref.h5")
        rc, _, err = C.run(["run", spec, "-o", ref_out], tag="ref", timeout=600)
        assert rc == 0, err[-3000:]
        ref = decisions(ref_out)
        out = os.path.join(tmp, "out.h5")
        hold = os.path.join(tmp, "hold")
        seed2 = [r["id"] for r in C.plan_json(spec) if r["name"].endswith("/seed2")]
        with C.Job(["run", spec, "-o", out], tag="held", env=C.hold_env(hold, step=1,
                                                                        runs=seed2)) as job:
            C.wait_until(lambda: C.held(hold), job, "a held run of seed 3")
            C.kill_session(job.sid, signal.SIGKILL)
            job.reap(30)
        shutil.rmtree(hold, ignore_errors=True)
        other = C.write(os.path.join(tmp, "other.yaml"),
                        open(spec).read().replace("contrasts: main_effects",
                                                  "contrasts: interactions"))
        size = os.path.getsize(C.journal_path(out))
        rc, _, err = C.run(["run", other, "-o", out, "--resume"], tag="changed")
        lines = [l for l in err.splitlines() if "cannot resume" in l]
        assert rc != 0 and len(lines) == 1 and "contrasts changed" in lines[0], err[-2000:]
        assert os.path.getsize(C.journal_path(out)) == size
        rc, _, err = C.run(["run", spec, "-o", out, "--resume"], tag="resume", timeout=600)
        assert rc == 0, err[-3000:]
        got = decisions(out)
        for what, a, b in zip(("decisions", "contrasts", "statuses"), ref, got):
            assert a == b, "%s differ from the uninterrupted sweep's:\n  %s\n  %s" % (what, a, b)


def test_bogus():
    with C.workdir("factorial-bogus") as tmp:
        spec = C.write(os.path.join(tmp, "spec.yaml"),
                       spec_text(C.corpus_path(tmp), "0.1", contrasts="bogus"))
        line = open(spec).read().split("\n").index("contrasts: bogus") + 1
        rc, _, err = C.run(["plan", spec], tag="plan")
        lines = [l for l in err.splitlines() if l.strip()]
        assert rc != 0 and len(lines) == 1, err
        assert lines[0].startswith("%s:%d:12: contrasts: expected vs_base" % (spec, line)), err


# Tiny Shakespeare (karpathy/char-rnn's input.txt), the corpus the spec's header was costed on
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def test_ready_spec():
    """sweeps/micro-factorial.yaml plans, at the cost its header states."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = os.path.join(root, "sweeps", "micro-factorial.yaml")
    _, out, _ = C.run(["plan", spec], expect_rc=0, tag="plan-factorial",
                      env={"ABLATE_DATA": C.corpus_path()})
    # the header's cost is Tiny Shakespeare's (its 65-character vocabulary sets the FLOPs);
    # the generated corpus of a machine without it plans the same runs at another cost
    import hashlib
    with open(C.corpus_path(), "rb") as f:
        tiny = hashlib.sha256(f.read()).hexdigest() == TINY_SHAKESPEARE_SHA256
    cost = " ~0.082 to ~0.33 core-hours" if tiny else ""
    assert "replicate: 8 configurations x 3 to 12 seeds: 24 to 96 runs,%s" % cost in out, \
        out[-800:]
    assert "6 contrasts (interactions: 3 main effects, 3 interactions" in out, out[-800:]
    assert "24 to 96 runs, ~0.082 to ~0.33 core-hours" in open(spec).read().replace("\n# ", " ")


if __name__ == "__main__":
    C.main([("settled", test_settled), ("open", test_open), ("kill_resume", test_kill_resume),
            ("bogus", test_bogus), ("ready_spec", test_ready_spec)])
