"""tune: sweeps (docs/spec.md, "tune") through the command line.

  - ids_unchanged: every shipped spec (sweeps/*.yaml, none with tune:) plans exactly the run
    ids and names it planned before tune: existed (tests/golden/sweep_ids.txt, written by
    the release before it);
  - overlapping_seeds: `ablate plan` refuses a tuning seed that is also a comparison seed,
    in one line at that seed's FILE:LINE:COL, exit 2;
  - plan_cost: `ablate plan` lists the tuning runs before each configuration's comparison
    runs and prints the tuning cost range next to the comparison runs' cost;
  - choice: a sweep chooses, per configuration, the candidate with the lowest mean final
    validation loss over its tuning seeds (/runs), never the test loss (data.test_fraction
    is set, and its ordering differs from none of this); /tuning says so and each
    comparison run trained at its configuration's choice (/runs train.lr); a choice at the
    highest or lowest value tried is warned about in one line;
  - kill_resume: the same sweep killed with SIGKILL once one configuration's value is
    chosen and the other's tuning runs train, then resumed (in-process; and under mpirun
    at another rank count), ends identical to the uninterrupted one: every run's rows,
    /tuning, one TUNE record per configuration in the journal;
  - halving: 4 candidates with eta 3 (two rungs): every candidate trains to a third of the
    budget (rung 0, evaluated there though eval_every is not a divisor of it), the best two
    by mean validation loss over the tuning seeds train on from their checkpoints to the full
    budget, the others end done there (tune_rung 0, not failures, their rows with where and
    how that attempt ran); the tuning runs train
    fewer tokens than every candidate at the full budget; /tuning_rungs holds every rung
    result and the promotions and the choice they imply; a promoted run's final loss is the
    bit-identical loss of that candidate trained without stopping (a 2-candidate sweep,
    one rung); then the sweep killed with SIGKILL mid-rung (in-process: while a rung-0 run
    of the second configuration trains, the first's rung 0 decided; under mpirun: while a
    promoted run trains on to the full budget) and resumed (in-process; at 2 ranks) ends
    identical to the uninterrupted one: the same choices, rung results and final losses;
  - joined: the halving sweep under --join, its first process killed with SIGKILL while it
    holds paused runs whose rung is not decided, continued by two joined processes, ends
    identical to the one-process sweep (test_joined's docstring);
  - joined_failed: a failed tuning run under --join: the process ends stopped rather than
    waiting, and joining again retries the failed run once;
  - train: `ablate train` of a tune: spec trains its base (not a tuning run); `--run` of a
    comparison run is refused in one line unless the tuned knob is given with --set (its
    value is the sweep's choice); a tuning run trains at its candidate.
"""
import collections
import glob
import json
import math
import os
import re
import shutil
import signal
import sys

import h5py

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
        m = re.search(r"tune: 2 configurations x 6 candidates x 1 tuning seeds: .*eta 3: 6 to 1/9 "
                      r"of the budget, 2 to the full budget; .*\), ([0-9.]+)x to ([0-9.]+)x the "
                      r"comparison runs'", line[0])
        assert m, line[0]
        # 6 candidates at a ninth and 2 to the end: 22/9 budgets against 3 comparison seeds;
        # at most 6 against 3 (the runs cost the same: the learning rate costs nothing)
        assert abs(float(m.group(1)) - 22 / 27) < 0.01 and abs(float(m.group(2)) - 2.0) < 0.01, line
        # tune.first_rung places the first rung: at a third, 10/3 budgets
        C.write(spec, tune_spec(corpus, lrs="[1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2, 1.0e-1, 3.0e-1]")
                + "  first_rung: 0.3333333333333333\n")
        _, out_, _ = C.run(["plan", spec], expect_rc=0, tag="plan_first_rung")
        line = [l for l in out_.splitlines() if l.startswith("tune:")][0]
        m = re.search(r"eta 3: 6 to 1/3 of the budget, 2 to the full budget; .*\), ([0-9.]+)x to",
                      line)
        assert m and abs(float(m.group(1)) - 10 / 9) < 0.01, line


LRS = ["3.0e-3", "1.0e-2", "3.0e-2"]


def run_spec(corpus):
    """Two configurations, 2 comparison seeds, 3 candidates x 2 tuning seeds; the data has a
    test split, which selection must not read."""
    s = C.micro_spec(corpus, steps=40, seeds=(0, 1), eval_every=20, sample_tokens=8,
                     variants="  baseline: {}\n  heads2: {model.n_head: 2}\n")
    s = s.replace("val_fraction: 0.1}", "val_fraction: 0.1, test_fraction: 0.1}")
    return s + "tune:\n  knobs: {train.lr: [%s]}\n  seeds: [1000, 1001]\n" % ", ".join(LRS)


def tuning(out):
    with h5py.File(out, "r") as f:
        return sorted(tuple(C._py(x) for x in row) for row in f["tuning"][()])


def check_choice(out):
    v = C.View(out)
    by_name = {r["name"]: r for r in v.runs.values()}
    rows = tuning(out)
    assert len(rows) == 2 * len(LRS), rows
    for config in ("baseline", "heads2"):
        mine = [r for r in rows if r[0] == config]
        val, test = [], []
        for lr in LRS:
            runs = [by_name["%s/tune/lr=%s/seed%d" % (config, lr, s)] for s in (1000, 1001)]
            assert all(r["status"] == "done" and r["train.lr"] == float(lr) for r in runs)
            val.append(sum(r["final_val_loss"] for r in runs) / 2)
            test.append(sum(r["final_test_loss"] for r in runs) / 2)
        # columns: configuration, config, candidate, knobs, values, value, rung, fraction,
        # seeds, val_loss, chosen
        assert [r[9] for r in mine] == val, (config, mine, val)
        assert [r[9] for r in mine] != test and all(math.isfinite(x) for x in test)
        best = min(range(len(LRS)), key=lambda i: (val[i], i))
        assert [r[10] for r in mine] == [int(i == best) for i in range(len(LRS))], (mine, val)
        for seed in (0, 1):
            r = by_name["%s/seed%d" % (config, seed)]
            assert r["status"] == "done" and r["train.lr"] == float(LRS[best]), (r, LRS[best])
    return rows


def tune_records(out):
    return [r for r in C.journal_records(C.journal_path(out))[0] if r[0] == 13]


def test_choice():
    with C.workdir("tune_choice") as d:
        spec = C.write(os.path.join(d, "t.yaml"), run_spec(C.corpus_path(d)))
        out = os.path.join(d, "o.h5")
        _, _, err = C.run(["run", spec, "-o", out], expect_rc=0, tag="run")
        assert err.count("ablate: tune: ") == 2, err[-3000:]
        rows = check_choice(out)
        # a choice at the highest or lowest of the values tried is warned about (its optimum
        # may lie beyond the range); one inside it is not
        values = sorted(float(x) for x in LRS)
        for config in ("baseline", "heads2"):
            best = [r for r in rows if r[0] == config and r[10] == 1][0]
            v = float(LRS[best[2]])
            edge = "highest" if v == values[-1] else "lowest" if v == values[0] else None
            said = [l for l in err.splitlines() if l.startswith("ablate: warning: tune: %s: "
                                                                   % config)]
            assert len(said) == (1 if edge else 0), (config, edge, said)
            if edge:
                assert ("is the %s train.lr tried: the best value may lie %s the range"
                        % (edge, "above" if edge == "highest" else "below")) in said[0], said
        assert len(tune_records(out)) == 2


def test_kill_resume():
    with C.workdir("tune_resume") as d:
        spec = C.write(os.path.join(d, "t.yaml"), run_spec(C.corpus_path(d)))
        ref_out = os.path.join(d, "ref.h5")
        C.run(["run", spec, "-o", ref_out], expect_rc=0, tag="ref")
        ref_rows = check_choice(ref_out)
        ref = C.View(ref_out)
        # held: a tuning run of heads2, the second configuration, whose value is then not
        # chosen yet; the baseline's is (its tuning runs come first in plan order)
        held_ids = [r["id"] for r in C.plan_json(spec)
                    if r["name"] == "heads2/tune/lr=1.0e-2/seed1001"]
        for label, ranks, resume_ranks in (("inproc", None, None), ("mpi", 3, 2)):
            out = os.path.join(d, label + ".h5")
            hold = os.path.join(d, label + "-hold")
            with C.Job(["run", spec, "-o", out], ranks=ranks, tag=label,
                       env=C.hold_env(hold, step=1, runs=held_ids)) as job:
                # with many ranks the baseline's last tuning run may still train while
                # this one is held: its choice comes, heads2's cannot (this run never ends)
                C.wait_until(lambda: C.held(hold) and tune_records(out), job,
                             "the held tuning run and the baseline's choice")
                before = tune_records(out)
                C.kill_session(job.sid, signal.SIGKILL)
                job.reap(30)
            assert len(before) == 1, "%s: %d TUNE records before the kill" % (label,
                                                                               len(before))
            shutil.rmtree(hold, ignore_errors=True)
            C.run(["run", spec, "-o", out, "--resume"], ranks=resume_ranks, expect_rc=0,
                  tag=label + "-resume")
            assert tuning(out) == ref_rows, (label, tuning(out), ref_rows)
            assert len(tune_records(out)) == 2, label
            C.assert_same(ref, C.View(out), "uninterrupted", label,
                          ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
            C.log("%s: killed with 1 of 2 choices journaled; resumed to the same choices and "
                  "runs" % label)


LRS4 = ["1.0e-3", "3.0e-3", "1.0e-2", "3.0e-2"]


def halving_spec(corpus, lrs=LRS4):
    """Two configurations, 1 comparison seed, 4 candidates x 2 tuning seeds, eta 3, the first
    rung at a third of the budget (tune.first_rung; the default would be a ninth): rung 0 at
    step 10 of 30 (eval_every 20 does not evaluate there by itself)."""
    s = C.micro_spec(corpus, steps=30, seeds=(0,), eval_every=20, sample_tokens=0,
                     variants="  baseline: {}\n  heads2: {model.n_head: 2}\n")
    s += "tune:\n  knobs: {train.lr: [%s]}\n  seeds: [1000, 1001]\n  eta: 3\n" % ", ".join(lrs)
    return s + ("  first_rung: 0.3333333333333333\n" if len(lrs) > 3 else "")


def rung_rows(out):
    with h5py.File(out, "r") as f:
        return sorted(tuple(C._py(x) for x in row) for row in f["tuning_rungs"][()])


def check_halving(out):
    """The halved sweep's rows against what its rung results imply; returns /tuning_rungs."""
    v = C.View(out)
    by_name = {r["name"]: r for r in v.runs.values()}
    rungs = rung_rows(out)
    tuned = tuning(out)
    for config in ("baseline", "heads2"):
        # columns: configuration, config, candidate, values, rung, fraction, val_loss, promoted
        mine = [r for r in rungs if r[0] == config]
        r0 = {r[2]: r for r in mine if r[4] == 0}
        r1 = {r[2]: r for r in mine if r[4] == 1}
        assert sorted(r0) == [0, 1, 2, 3] and len(r1) == 2, mine
        # rung 0: every candidate at a third of the budget; the best ceil(4/3) = 2 go on
        best2 = sorted(r0, key=lambda c: (r0[c][6], c))[:2]
        assert sorted(r1) == sorted(best2), (config, mine)
        assert [r0[c][7] for c in range(4)] == [int(c in best2) for c in range(4)], mine
        chosen = min(r1, key=lambda c: (r1[c][6], c))
        assert [r1[c][7] for c in sorted(r1)] == [int(c == chosen) for c in sorted(r1)], mine
        assert all(abs(r[5] - 1 / 3) < 1e-12 for r in r0.values()), mine
        full = tokens = 0
        for c, lr in enumerate(LRS4):
            runs = [by_name["%s/tune/lr=%s/seed%d" % (config, lr, s)] for s in (1000, 1001)]
            promoted = c in best2
            for r in runs:
                assert r["status"] == "done", r
                assert r["tune_rung"] == int(promoted), r
                # a stopped run's row keeps where and how its attempt ran (its rung's end)
                assert r["host"] and r["attempt_blas_core"] and r["rank"] >= 0, r
                assert r["steps"] == (30 if promoted else 10), r
                tokens += r["tokens"]
            full += 2 * 30 * runs[0]["tokens"] // runs[0]["steps"]
            # the rung results are the runs' own: a stopped run's final loss is its rung-0 one
            mean = sum(r["final_val_loss"] for r in runs) / 2
            assert (r1[c][6] if promoted else r0[c][6]) == mean, (config, c, mine, mean)
            # every run was evaluated at the rung's step (eval_every 20 is not a divisor of
            # it), and that evaluation is its rung-0 result
            at10 = [v.tables["evals"].get((r["id"], 10)) for r in runs]
            assert all(e is not None for e in at10), (config, c)
            assert sum(e["val_loss"] for e in at10) / 2 == r0[c][6], (config, c, at10, mine)
        # 4 candidates x 2 seeds: 8 runs to step 10, 4 on to step 30, not 8 to step 30
        assert tokens == full * (4 * 10 + 2 * 20) // (4 * 30), (config, tokens, full)
        assert tokens < full
        row = [r for r in tuned if r[0] == config and r[10] == 1]
        assert len(row) == 1 and row[0][2] == chosen and row[0][6] == 1, (config, tuned)
        cmp_run = by_name["%s/seed0" % config]
        assert cmp_run["train.lr"] == float(LRS4[chosen]) and cmp_run["tune_rung"] == -1
    return rungs


def test_halving():
    with C.workdir("tune_halving") as d:
        corpus = C.corpus_path(d)
        spec = C.write(os.path.join(d, "t.yaml"), halving_spec(corpus))
        ref_out = os.path.join(d, "ref.h5")
        _, _, err = C.run(["run", spec, "-o", ref_out], expect_rc=0, tag="ref")
        assert err.count("ablate: tune: ") == 4 and err.count("rung 1 of 2") == 2, err[-3000:]
        # the stopped runs are no failures: every tuning run is reported finished, done
        assert "all 18 runs finished (0 failed)" in err, err[-2000:]
        assert len(C.reported_finished(err)) == 18, C.reported_finished(err)
        ref_rungs = check_halving(ref_out)
        ref_tuning = tuning(ref_out)
        assert len(tune_records(ref_out)) == 4
        ref = C.View(ref_out)
        # a promoted run is the run never stopped: the same candidate in a one-rung sweep
        promoted = [r for r in ref_rungs if r[0] == "heads2" and r[4] == 1]
        lr = LRS4[promoted[-1][2]]
        one = C.write(os.path.join(d, "one.yaml"), halving_spec(corpus, [LRS4[0], lr]))
        one_out = os.path.join(d, "one.h5")
        C.run(["run", one, "-o", one_out], expect_rc=0, tag="one_rung")
        plain = C.View(one_out)
        for seed in (1000, 1001):
            name = "heads2/tune/lr=%s/seed%d" % (lr, seed)
            a = [r for r in ref.runs.values() if r["name"] == name][0]
            b = [r for r in plain.runs.values() if r["name"] == name][0]
            assert a["final_val_loss"] == b["final_val_loss"] and a["steps"] == 30, (a, b)
        names = {r["name"]: r["id"] for r in C.plan_json(spec)}
        # in-process: a rung-0 run of heads2 held at step 5 (baseline's rung 0 decided);
        # under mpirun: a promoted run held at step 15 of its attempt, i.e. step 25 of 30
        cases = (("inproc", None, None, "heads2/tune/lr=%s/seed1001" % LRS4[1], 5, 1),
                 ("mpi", 3, 2, "heads2/tune/lr=%s/seed1001" % lr, 15, 3))
        for label, ranks, resume_ranks, held_name, step, n_records in cases:
            out = os.path.join(d, label + ".h5")
            hold = os.path.join(d, label + "-hold")
            with C.Job(["run", spec, "-o", out], ranks=ranks, tag=label,
                       env=C.hold_env(hold, step=step, runs=[names[held_name]])) as job:
                C.wait_until(lambda: C.held(hold) and len(tune_records(out)) >= n_records, job,
                             "the held run mid-rung and %d rung decision(s)" % n_records)
                before = tune_records(out)
                C.kill_session(job.sid, signal.SIGKILL)
                job.reap(30)
            assert len(before) < 4, "%s: %d TUNE records before the kill" % (label, len(before))
            shutil.rmtree(hold, ignore_errors=True)
            _, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=resume_ranks,
                              expect_rc=0, tag=label + "-resume")
            assert rung_rows(out) == ref_rungs, (label, rung_rows(out), ref_rungs)
            assert tuning(out) == ref_tuning, label
            assert len(tune_records(out)) == 4, label
            C.assert_same(ref, C.View(out), "uninterrupted", label,
                          ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
            C.log("%s: killed mid-rung with %d of 4 rung decisions journaled; resumed to the "
                  "same rungs, choices and final losses" % (label, len(before)))


def join_args(spec, out):
    return ["run", spec, "-o", out, "--join", "--checkpoint-every", "0.1"]


def rung_lines(out):
    path = out + ".d/join/rungs"
    return open(path).read().splitlines() if os.path.exists(path) else []


def test_joined():
    """--join: the halving sweep's choices and runs, whichever process trains what. One
    process trains alone with a rung-0 run of heads2 held at step 5, so that every other
    tuning run of heads2 stops at rung 0 in it (join/rungs) and waits for that run; it is
    killed with SIGKILL there, holding 7 paused runs. Two processes then join (one in-process,
    one under mpirun): they take the held run over, decide rung 0 from join/rungs, take the
    promoted runs over from the killed process's checkpoints and end the others at rung 0
    (claimed from the killed process, trained to their rung: they stop at once). The view
    equals the one-process sweep's: /tuning, /tuning_rungs and every run's rows; each
    decision is journaled by every process that made it, and shown once."""
    with C.workdir("tune_joined") as d:
        corpus = C.corpus_path(d)
        spec = C.write(os.path.join(d, "t.yaml"), halving_spec(corpus))
        ref_out = os.path.join(d, "ref.h5")
        C.run(["run", spec, "-o", ref_out], expect_rc=0, tag="ref")
        ref_rungs, ref_tuning, ref = rung_rows(ref_out), tuning(ref_out), C.View(ref_out)
        names = {r["name"]: r["id"] for r in C.plan_json(spec)}
        held_name = "heads2/tune/lr=%s/seed1001" % LRS4[1]
        heads2 = [i for n, i in names.items() if n.startswith("heads2/tune/")]
        out = os.path.join(d, "o.h5")
        hold = os.path.join(d, "hold")
        with C.Job(join_args(spec, out), tag="first",
                   env=C.hold_env(hold, step=5, runs=[names[held_name]])) as job:
            # the baseline's rungs, and heads2's rung-0 results but the held run's
            C.wait_until(lambda: C.held(hold) and sum(
                l.split()[0] in heads2 for l in rung_lines(out)) == 7, job,
                "the held run and 7 rung-0 results of heads2")
            C.kill_session(job.sid, signal.SIGKILL)
            job.reap(30)
        shutil.rmtree(hold, ignore_errors=True)
        errs = C.join_together(join_args(spec, out))
        assert "taken over" in errs, errs[-3000:]
        assert rung_rows(out) == ref_rungs, (rung_rows(out), ref_rungs)
        assert tuning(out) == ref_tuning, (tuning(out), ref_tuning)
        C.assert_same(ref, C.View(out), "one process", "joined",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        per_journal = []
        for p in sorted(glob.glob(out + ".d/join/procs/*/journal")):
            per_journal.append(len([r for r in C.journal_records(p)[0] if r[0] == 13]))
        # heads2's rungs were all decided after the kill (the held run's result came then)
        assert per_journal[0] <= 2 and max(per_journal) <= 4, per_journal
        with h5py.File(out, "r") as f:
            assert C._py(f.attrs["status"]) == "complete", C._py(f.attrs["status"])
        C.log("joined: killed holding 7 paused runs; 2 processes took over to the same rungs, "
              "choices and runs (TUNE records per journal: %s)" % per_journal)
        # a process that would cut at other rungs is refused at its tune: key, leaving no file
        spec2 = C.write(os.path.join(d, "t2.yaml"), open(spec).read().replace(
            "first_rung: 0.3333333333333333", "first_rung: 0.5"))
        before = sorted(os.listdir(out + ".d/join/procs"))
        _, _, err = C.run(join_args(spec2, out), expect_rc=2, tag="other_rungs")
        line = C.one_line(err, "the refusal")
        assert (spec2 + ":12:1: tune: cannot join ") in line and \
            "other successive-halving rungs" in line, line
        assert sorted(os.listdir(out + ".d/join/procs")) == before


def test_joined_failed():
    """--join with a tuning run that fails (a candidate model too large to allocate): its
    configuration's rung 0 cannot be decided, so the process ends stopped (exit 3, "continue
    with --join") instead of waiting for ever beside its paused runs; joining again trains
    the failed run again, once (as --resume does), and not the paused ones."""
    with C.workdir("tune_joined_failed") as d:
        s = C.micro_spec(C.corpus_path(d), steps=30, seeds=(0,), eval_every=20,
                         sample_tokens=0, variants="  baseline: {}\n")
        s += "tune:\n  knobs: {model.d_model: [32, 65536, 64, 48]}\n  seeds: [1000]\n  eta: 3\n"
        spec = C.write(os.path.join(d, "t.yaml"), s)
        out = os.path.join(d, "o.h5")
        args = ["run", spec, "-o", out, "--join", "--max-run-memory", "1000000T"]
        _, _, err = C.run(args, expect_rc=3, tag="join1")
        assert "d_model=65536/seed1000 FAILED" in err and "continue with --join" in err, err
        assert len(rung_lines(out)) == 3, rung_lines(out)
        _, _, err = C.run(args, expect_rc=3, tag="join2")
        assert "d_model=65536/seed1000 had failed" in err and "trained again" in err, err
        assert err.count(" FAILED") == 1 and " done" not in err, err
        assert len(rung_lines(out)) == 3, rung_lines(out)
        status = {r["name"]: r["status"] for r in C.View(out).runs.values()}
        assert status["baseline/tune/d_model=65536/seed1000"] == "failed", status
        assert sorted(status.values()).count("interrupted") == 3, status


def step_lrs(out):
    return [json.loads(l)["lr"] for l in out.splitlines() if '"event":"step"' in l]


def test_train():
    with C.workdir("tune_train") as d:
        text = run_spec(C.corpus_path(d))
        spec = C.write(os.path.join(d, "t.yaml"), text)
        plain = C.write(os.path.join(d, "plain.yaml"), text.split("tune:")[0])
        _, a, _ = C.run(["train", spec, "--json"], expect_rc=0, tag="train_base")
        _, b, _ = C.run(["train", plain, "--json"], expect_rc=0, tag="train_plain")
        assert step_lrs(a) and step_lrs(a) == step_lrs(b), (step_lrs(a)[:3], step_lrs(b)[:3])
        _, _, err = C.run(["train", spec, "--run", "heads2/seed1"], expect_rc=2, tag="cmp")
        assert "trains at the train.lr its tuning runs choose" in C.one_line(err, "refusal")
        _, a, _ = C.run(["train", spec, "--run", "heads2/seed1", "--set", "train.lr=3.0e-2",
                         "--json"], expect_rc=0, tag="cmp_set")
        _, b, _ = C.run(["train", spec, "--run", "heads2/tune/lr=3.0e-2/seed1000", "--json"],
                        expect_rc=0, tag="tuning_run")
        # the same schedule: the same lr at every step (the seeds differ)
        assert step_lrs(a) == step_lrs(b) and max(step_lrs(a)) <= 3.0e-2, step_lrs(a)[-3:]


TESTS = [(n[5:], f) for n, f in sorted(globals().items()) if n.startswith("test_")]

if __name__ == "__main__":
    C.main(TESTS)
