"""A replicate: sweep killed with SIGKILL mid-way and resumed makes exactly the
decisions an uninterrupted one makes, also at another rank count.

The reference runs in-process to the end. Each trial holds the first run of seed index 2
(the first seed any configuration gets only after a look left its contrast open) with the
test hold hook (docs/architecture.md, "Test hooks"): once it is held, the look-0 decisions
are durable in the journal and the rest are not made yet; the whole job is SIGKILLed there
and resumed (in-process, and under mpirun at other rank counts). Then the decisions
(/decisions, sorted by contrast and look: their journal order depends on timing), each
run's status (done or not_needed) and the contrasts' final states must equal the
reference's. Also: `ablate plan` shows the range of runs, `ablate inspect` each contrast,
and the journal holds each decision once. The joined version (`--join`) is
test_adaptive_join.py.
"""
import os
import re
import shutil
import signal
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = ("  baseline: {}\n"
            "  lr_hi: {train.lr: 3.0e-2}\n"
            "  heads2: {model.n_head: 2}\n")
REPLICATE = ("replicate:\n"
             "  seeds: {min: 2, max: 4}\n"
             "  looks: [2, 3, 4]\n"
             "  resolve: 0.05\n"
             "  alpha: 0.2\n")


def spec_text(corpus):
    s = C.micro_spec(corpus, steps=40, variants=VARIANTS, eval_every=20, stats_every=20,
                     sample_tokens=8)
    return re.sub(r"^seeds: .*$", REPLICATE.rstrip("\n"), s, flags=re.M)


def decisions(out):
    with h5py.File(out, "r") as f:
        d = f["decisions"][()]
        c = f["contrasts"][()]
        attrs = {k: C._py(v) for k, v in f.attrs.items() if k.startswith("replicate_")}
        runs = {C._py(r["name"]): C._py(r["status"]) for r in f["runs"][()]}
    rows = sorted(tuple(C._py(x) for x in row) for row in d)
    contrasts = [tuple(C._py(x) for x in row) for row in c]
    return rows, contrasts, attrs, runs


def journal_decisions(out):
    return [r for r in C.journal_records(C.journal_path(out))[0] if r[0] == 11]


def check_same(ref, got, label):
    for what, a, b in zip(("decisions", "contrasts", "rule", "run statuses"), ref, got):
        assert a == b, "%s: %s differ from the uninterrupted sweep's:\n  %s\n  %s" % (
            label, what, a, b)


def trial(tmp, spec, ref, ranks, resume_ranks, label):
    out = os.path.join(tmp, label + ".h5")
    hold = os.path.join(tmp, label + "-hold")
    seed2 = [r["id"] for r in C.plan_json(spec) if r["name"].endswith("/seed2")]
    env = C.hold_env(hold, step=1, runs=seed2)
    with C.Job(["run", spec, "-o", out], ranks=ranks, tag=label,
               env=env) as job:
        C.wait_until(lambda: C.held(hold), job, "a held run of seed 2")
        before = journal_decisions(out)
        assert before, "%s: no decision journaled before the kill" % label
        C.kill_session(job.sid, signal.SIGKILL)
        job.reap(30)
    shutil.rmtree(hold, ignore_errors=True)
    rc, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=resume_ranks,
                       tag=label + "-resume")
    assert rc == 0, "%s: resume exit %d\n%s" % (label, rc, err[-3000:])
    assert "not needed" in err, err[-2000:]
    got = decisions(out)
    check_same(ref, got, label)
    jd = journal_decisions(out)
    assert len(jd) == len(ref[0]), "%s: %d DECISION records, %d decisions" % (
        label, len(jd), len(ref[0]))
    C.log("%s: %d decisions before the kill, %d after the resume, identical to the reference"
          % (label, len(before), len(jd)))


def test_kill_resume():
    with C.workdir("adaptive") as tmp:
        kill_resume(tmp)


def kill_resume(tmp):
    spec = C.write(os.path.join(tmp, "spec.yaml"), spec_text(C.corpus_path(tmp)))
    _, out, _ = C.run(["plan", spec], expect_rc=0, tag="plan")
    assert "replicate: 3 configurations x 2 to 4 seeds: 6 to 12 runs" in out, out[-800:]
    ref_out = os.path.join(tmp, "ref.h5")
    rc, _, err = C.run(["run", spec, "-o", ref_out], tag="ref")
    assert rc == 0, err[-3000:]
    # its ETA is an upper bound (every run it may still need), and says so
    etas = re.findall(r"  ETA (\S+)", err)
    assert etas and all(e in ("--", "<=") for e in etas), etas[:8]
    ref = decisions(ref_out)
    assert any(r[-2] == "open" for r in ref[0]), "no contrast stayed open at its first look: " \
        "nothing to kill mid-way (%s)" % (ref[0],)
    assert "not_needed" in ref[3].values() or all(v == "done" for v in ref[3].values())
    _, ins, _ = C.run(["inspect", ref_out], expect_rc=0, tag="inspect")
    assert "contrasts (sequential" in ins and "lr_hi vs baseline:" in ins, ins[-1500:]
    # a resume under another rule is refused, before anything is written
    spec2 = C.write(os.path.join(tmp, "spec2.yaml"),
                    open(spec).read().replace("alpha: 0.2", "alpha: 0.1"))
    size = os.path.getsize(C.journal_path(ref_out))
    rc, _, err = C.run(["run", spec2, "-o", ref_out, "--resume"], tag="changed")
    lines = [l for l in err.splitlines() if "cannot resume" in l]
    assert rc != 0 and len(lines) == 1 and "alpha changed" in lines[0], err[-2000:]
    assert os.path.getsize(C.journal_path(ref_out)) == size
    trial(tmp, spec, ref, None, None, "inproc")
    trial(tmp, spec, ref, 3, 2, "mpi")


def test_study_b_spec():
    """sweeps/micro-one-knob-adaptive.yaml (study B, replicated until resolved) plans."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = os.path.join(root, "sweeps", "micro-one-knob-adaptive.yaml")
    _, out, _ = C.run(["plan", spec], expect_rc=0, tag="plan-b",
                      env={"ABLATE_DATA": C.corpus_path()})
    assert "replicate: 11 configurations x 3 to 20 seeds: 33 to 220 runs" in out, out[-800:]
    assert "10 contrasts against baseline" in out, out[-800:]


if __name__ == "__main__":
    C.main([("kill_resume", test_kill_resume), ("study_b_spec", test_study_b_spec)])
