"""tune: with replicate: (docs/spec.md, "tune"): every configuration is tuned on its own, then
its comparison seeds are added by the replicate: rule, at its chosen value.

  - decisions: one sweep of three configurations (4 learning rates, successive halving, eta
    3; replicate seeds 2 to 4): every comparison run trained at its configuration's choice
    (/tuning), the comparison runs of a configuration start only once its value is chosen,
    each look's difference is the mean of the comparison runs' paired differences (the
    first n seed indices not dropped; a tuning run never enters one), runs the rule did not need are comparison runs,
    `ablate plan` prints both the tuning cost and the replicate range of the comparison runs
    alone, and the report reads the comparison runs in its replicate section;
  - kill_resume: the sweep killed with SIGKILL (in-process while a comparison run trains;
    under mpirun while a tuning run of the last configuration is held mid-rung, some
    decisions made) and resumed (in-process; at another rank count) ends identical to the
    uninterrupted one: /tuning, /tuning_rungs, /decisions, every run's status and rows;
  - study_spec: the shipped study spec plans;
  - joined: under --join, its first process killed while it holds a comparison run, two
    joined processes end it identical to the one-process sweep (test_joined's docstring).
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import test_adaptive as A  # noqa: E402

LRS4 = ["1.0e-3", "3.0e-3", "1.0e-2", "3.0e-2"]
CONFIGS = ("baseline", "heads2", "narrow")
REPLICATE = A.REPLICATE  # seeds 2 to 4, looks at 2, 3 and 4, alpha 0.2


def spec_text(corpus):
    s = C.micro_spec(corpus, steps=30, eval_every=20, sample_tokens=0,
                     variants="  baseline: {}\n  heads2: {model.n_head: 2}\n"
                              "  narrow: {model.d_model: 16}\n")
    s = re.sub(r"^seeds: .*\n", REPLICATE, s, flags=re.M)
    return s + ("tune:\n  knobs: {train.lr: [%s]}\n  seeds: [1000]\n  eta: 3\n"
                "  first_rung: 0.3333333333333333\n" % ", ".join(LRS4))


def rows(out, table):
    with h5py.File(out, "r") as f:
        return sorted(tuple(C._py(x) for x in row) for row in f[table][()])


def state(out):
    """What the sweep decided: /tuning, /tuning_rungs, /decisions, each run's status."""
    with h5py.File(out, "r") as f:
        status = {C._py(r["name"]): C._py(r["status"]) for r in f["runs"][()]}
    return rows(out, "tuning"), rows(out, "tuning_rungs"), rows(out, "decisions"), status


def decision_records(out):
    return [r for r in C.journal_records(C.journal_path(out))[0] if r[0] == 11]


def check_sweep(out):
    v = C.View(out)
    by_name = {r["name"]: r for r in v.runs.values()}
    tuned = rows(out, "tuning")
    # /tuning columns: configuration, config, candidate, knob, value, number, rung, fraction,
    # seeds, val_loss, chosen
    chosen = {r[0]: r[5] for r in tuned if r[10] == 1}
    assert sorted(chosen) == sorted(CONFIGS), tuned
    loss = {}
    for config in CONFIGS:
        for k in range(4):
            r = by_name["%s/seed%d" % (config, k)]
            assert r["tune_rung"] == -1 and r["train.lr"] == chosen[config], (config, r)
            if k < 2:
                assert r["status"] == "done", r  # replicate.seeds.min
            assert r["status"] in ("done", "not_needed"), r
            if r["status"] == "done":
                loss[config, k] = r["final_val_loss"]
        for lr in LRS4:
            r = by_name["%s/tune/lr=%s/seed1000" % (config, lr)]
            assert r["status"] == "done" and r["tune_rung"] in (0, 1), r
    # each look: the mean paired difference of the comparison runs' seeds 0..n-1
    decs = rows(out, "decisions")
    assert decs, "no decision"
    # (a seed index a run of either side dropped, diverged or flagged unstable, is named in
    # the note and replaced by the next one)
    for look, contrast, n, diff, *_, verdict, note in decs:  # /decisions' columns
        if verdict == "unstable":
            continue
        config = CONFIGS[1 + contrast]
        dropped = {int(k) for k in re.findall(r"/seed(\d+) ", note)}
        seeds = [k for k in range(4) if k not in dropped][:n]
        d = [loss[config, k] - loss["baseline", k] for k in seeds]
        assert len(d) == n and abs(diff - sum(d) / n) < 1e-9, (contrast, look, n, diff, d, note)
    return v


def test_decisions():
    with C.workdir("tune_replicate") as d:
        spec = C.write(os.path.join(d, "t.yaml"), spec_text(C.corpus_path(d)))
        _, out_, _ = C.run(["plan", spec], expect_rc=0, tag="plan")
        assert "replicate: 3 configurations x 2 to 4 seeds: 6 to 12 runs" in out_, out_[-1500:]
        assert "tune: 3 configurations x 4 candidates x 1 tuning seeds" in out_, out_[-1500:]
        # the replicate range is the comparison runs' alone: 4 seeds cost twice 2 seeds
        lo, hi = map(float, re.search(r"6 to 12 runs, ~([0-9.e+-]+) to ~([0-9.e+-]+) core",
                                      out_).groups())
        assert abs(hi / lo - 2) < 0.1, (lo, hi)
        out = os.path.join(d, "o.h5")
        _, _, err = C.run(["run", spec, "-o", out], expect_rc=0, tag="run")
        assert "replicate: 3 configurations x 2-4 seeds at their chosen values" in err, err[:2000]
        check_sweep(out)
        # the summary counts the comparison runs the rule planned, the tuning runs apart
        m = re.search(r"replicate: (\d+) of 12 planned comparison runs trained, (\d+) not "
                      r"needed \(and 12 tuning runs\)", err)
        statuses = state(out)[3]
        assert m and int(m.group(2)) == list(statuses.values()).count("not_needed") and \
            int(m.group(1)) + int(m.group(2)) == 12, err[-2000:]
        # a configuration's comparison runs start after its choice is announced
        lines = err.splitlines()
        for config in CONFIGS:
            said = [i for i, l in enumerate(lines)
                    if l.startswith("ablate: tune: %s: train.lr=" % config)]
            started = [i for i, l in enumerate(lines) if re.match(r"\[\d+/\d+\] %s/seed\d " %
                                                                   config, l)]
            assert len(said) == 1 and started and said[0] < min(started), (config, said, started)
        rep = os.path.join(d, "rep")
        py = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
        p = subprocess.run([py, os.path.join(C.SOURCE_DIR, "analysis", "ablate-report"), out,
                            "-o", rep], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        csv = open(os.path.join(rep, "sequential_contrasts.csv")).read()
        assert "heads2" in csv and "narrow" in csv, csv
        md = open(os.path.join(rep, "report.md")).read()
        assert "12 of the runs are tuning runs" in md, md[:3000]


def test_kill_resume():
    with C.workdir("tune_replicate_resume") as d:
        spec = C.write(os.path.join(d, "t.yaml"), spec_text(C.corpus_path(d)))
        ref_out = os.path.join(d, "ref.h5")
        C.run(["run", spec, "-o", ref_out], expect_rc=0, tag="ref")
        ref = check_sweep(ref_out)
        ref_state = state(ref_out)
        ids = {r["name"]: r["id"] for r in C.plan_json(spec)}
        # in-process: a comparison run of heads2 (seed 1: always trained); under mpirun: a
        # rung-0 tuning run of the last configuration, while the other worker goes on
        cases = (("inproc", None, None, "heads2/seed1", 0),
                 ("mpi", 3, 2, "narrow/tune/lr=%s/seed1000" % LRS4[3], 1))
        for label, ranks, resume_ranks, held_name, n_decisions in cases:
            out = os.path.join(d, label + ".h5")
            hold = os.path.join(d, label + "-hold")
            with C.Job(["run", spec, "-o", out], ranks=ranks, tag=label,
                       env=C.hold_env(hold, step=5, runs=[ids[held_name]])) as job:
                C.wait_until(lambda: C.held(hold) and len(decision_records(out)) >= n_decisions,
                             job, "the held run and %d decision(s)" % n_decisions)
                C.kill_session(job.sid, signal.SIGKILL)
                job.reap(30)
            shutil.rmtree(hold, ignore_errors=True)
            C.run(["run", spec, "-o", out, "--resume"], ranks=resume_ranks, expect_rc=0,
                  tag=label + "-resume")
            got = state(out)
            for what, a, b in zip(("/tuning", "/tuning_rungs", "/decisions", "statuses"),
                                  ref_state, got):
                assert a == b, "%s: %s differ from the uninterrupted sweep's:\n  %s\n  %s" % (
                    label, what, a, b)
            check_sweep(out)
            C.assert_same(ref, C.View(out), "uninterrupted", label,
                          ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
            C.log("%s: killed while %s was held; resumed to the same choices, decisions and "
                  "runs" % (label, held_name))


def join_args(spec, out):
    return ["run", spec, "-o", out, "--join", "--checkpoint-every", "0.1"]


def test_joined():
    """--join: one process (2 workers) trains alone with a comparison run of heads2 held
    (seed 1, which every look needs), so that the rule can look at heads2 only once that run
    ends; it is SIGKILLed there, with every configuration's value chosen and some of its contrasts
    decided. Two processes join (one in-process, one under mpirun): they take the held run
    over and finish the sweep. The view equals the one-process sweep's: /tuning,
    /tuning_rungs, /decisions, every run's status and rows; every decision is in some
    journal, shown once. A process with another replicate: rule, or none, is refused at its
    key."""
    with C.workdir("tune_replicate_joined") as d:
        spec = C.write(os.path.join(d, "t.yaml"), spec_text(C.corpus_path(d)))
        ref_out = os.path.join(d, "ref.h5")
        C.run(["run", spec, "-o", ref_out], expect_rc=0, tag="ref")
        ref, ref_state = check_sweep(ref_out), state(ref_out)
        ids = {r["name"]: r["id"] for r in C.plan_json(spec)}
        out = os.path.join(d, "o.h5")
        hold = os.path.join(d, "hold")

        def journals():
            return sorted(glob.glob(out + ".d/join/procs/*/journal"))

        def records(kind):
            return [r for p in journals() for r in C.journal_records(p)[0] if r[0] == kind]

        # 2 workers, so that narrow's look is made beside the held run; no periodic
        # checkpoint, which would let the held run through a step at a time
        with C.Job(["run", spec, "-o", out, "--join"], ranks=3, tag="first",
                   env=C.hold_env(hold, step=5, runs=[ids["heads2/seed1"]])) as job:
            # every choice (TUNE records deciding the last rung: 3 x 2 rungs), and narrow's
            # first look, which does not need heads2
            C.wait_until(lambda: C.held(hold) and len(records(13)) == 6 and records(11), job,
                         "the held run, every choice and a decision")
            C.kill_session(job.sid, signal.SIGKILL)
            job.reap(30)
        shutil.rmtree(hold, ignore_errors=True)
        errs = C.join_together(join_args(spec, out))
        assert "run heads2/seed1 taken over" in errs, errs[-3000:]
        assert errs.count("replicate: 3 configurations x 2-4 seeds at their chosen values") == 2, \
            errs[-3000:]
        got = state(out)
        for what, a, b in zip(("/tuning", "/tuning_rungs", "/decisions", "statuses"),
                              ref_state, got):
            assert a == b, "joined: %s differ from the one-process sweep's:\n  %s\n  %s" % (
                what, a, b)
        check_sweep(out)
        C.assert_same(ref, C.View(out), "one process", "joined",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        with h5py.File(out, "r") as f:
            assert C._py(f.attrs["status"]) == "complete", C._py(f.attrs["status"])
        C.log("joined: killed holding heads2/seed1 with %d choices journaled; 2 processes "
              "finished it to the same choices, decisions and runs" % 3)
        # another rule: refused at its key, leaving no file
        spec2 = C.write(os.path.join(d, "t2.yaml"), open(spec).read().replace(
            "alpha: 0.2", "alpha: 0.1"))
        line_no = 1 + open(spec2).read().splitlines().index("  alpha: 0.1")
        before = journals()
        _, _, err = C.run(join_args(spec2, out), expect_rc=2, tag="other_rule")
        line = C.one_line(err, "the refusal")
        assert ("%s:%d:" % (spec2, line_no)) in line and "replicate.alpha: cannot join" in line \
            and "alpha ledger" in line, line
        assert journals() == before
        # ... and so is one without the replicate: section, at its seeds: key
        spec3 = C.write(os.path.join(d, "t3.yaml"), open(spec).read().replace(
            REPLICATE, "seeds: [0, 1, 2, 3]\n"))
        _, _, err = C.run(join_args(spec3, out), expect_rc=2, tag="no_rule")
        line = C.one_line(err, "the refusal")
        assert ("%s:" % spec3) in line and "seeds: cannot join" in line and \
            "different replicate: section" in line, line
        assert journals() == before


def test_study_spec():
    """sweeps/micro-one-knob-tuned-adaptive.yaml (docs/studies.md) plans: 7 configurations x
    (4 tuning + 20 comparison) runs, tuning seed 1000 apart from the comparison seeds 0-19,
    and both summary lines."""
    spec = os.path.join(C.SOURCE_DIR, "sweeps", "micro-one-knob-tuned-adaptive.yaml")
    env = {"ABLATE_DATA": C.corpus_path()}
    _, out, _ = C.run(["plan", spec], expect_rc=0, tag="plan", env=env)
    assert "replicate: 7 configurations x 5 to 20 seeds: 35 to 140 runs" in out, out[-1500:]
    assert "6 contrasts against baseline" in out and \
        "tune: 7 configurations x 4 candidates x 1 tuning seeds" in out, out[-1500:]
    plan = C.plan_json(spec, env=env)
    assert len(plan) == 7 * 24, len(plan)
    assert {r["seed"] for r in plan if r["tune_candidate"] >= 0} == {1000}
    assert {r["seed"] for r in plan if r["tune_candidate"] < 0} == set(range(20))


TESTS = [(n[5:], f) for n, f in sorted(globals().items()) if n.startswith("test_")]

if __name__ == "__main__":
    C.main(TESTS)
