"""The command line's refusals and their guarantees, and the plan listing.

  - an invalid spec (a grid value with n_head not dividing d_model; unknown keys; a bad
    --set) exits 2 with one line FILE:LINE:COL on stderr and creates or touches no output,
    in-process and under mpirun, even with --force or --resume on an existing output;
  - an existing OUT.h5 (or OUT.h5.d) without --force is refused (exit 2), untouched;
  - --force overwrites (journal and checkpoints too);
  - --resume with a spec that drops a run is refused with a message naming it, untouched;
  - --resume with a spec that only adds seeds appends the new runs, keeps the old ones
    (not re-run, identical), and ends with every run once, equal to a fresh sweep;
  - `ablate plan --json` lists every run with name/id/seed/params/flops_per_token/config;
  - the --help of every command exits 0;
  - `ablate train SPEC --run NAME|ID` trains one planned run alone with exactly the values
    the sweep recorded for it, and `train --set` of a knob a variant sets trains the base;
  - limits are refused before anything is written, each at its FILE:LINE:COL: a run above
    the memory limit, a model.vocab_size below the data's, a prompt outside the vocabulary,
    a FIFO as data.path (it hung plan); numeric options parse strictly; -o "" is refused.
"""
import hashlib
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

LOC_RE = re.compile(r"^(.+):(\d+):(\d+): (.+)$")
GRID = "  model.activation: [relu, gelu]\n"


def snapshot(out):
    """Everything an output consists of: OUT.h5, OUT.h5.d and all files below, with mtime,
    size and content hash."""
    snap = {}
    for p in [out, out + ".d", out + ".tmp"]:
        if not os.path.exists(p):
            continue
        paths = [p]
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                paths += [os.path.join(root, x) for x in dirs + files]
        for q in paths:
            st = os.stat(q)
            h = None
            if os.path.isfile(q):
                with open(q, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
            snap[q] = (st.st_mtime_ns, st.st_size, h)
    return snap


def assert_untouched(before, out, what):
    after = snapshot(out)
    if before != after:
        changed = sorted(set(before) ^ set(after)) + sorted(
            k for k in set(before) & set(after) if before[k] != after[k])
        raise AssertionError("%s changed the output: %s" % (what, changed))


def one_error_line(err, what, ranks):
    """The ablate error line: stderr is exactly one line in-process; under mpirun, mpirun
    adds its own banner, so the line must be among them."""
    lines = [l for l in err.splitlines() if l.strip()]
    if ranks is None and len(lines) != 1:
        raise AssertionError("%s: stderr should be one line, got %d:\n%s" % (what, len(lines), err))
    for l in lines:
        m = LOC_RE.match(l)
        if m:
            return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    raise AssertionError("%s: no FILE:LINE:COL line on stderr:\n%s" % (what, err))


def position(text, line_snippet, token):
    """1-based (line, column) of token inside the first line containing line_snippet."""
    for i, l in enumerate(text.split("\n")):
        if line_snippet in l:
            return i + 1, l.index(token, l.index(line_snippet)) + 1
    raise KeyError(line_snippet)


def test_invalid_spec():
    with C.workdir("cli-invalid") as tmp:
        corpus = C.corpus_path(tmp)
        cases = []
        # a grid value that makes one run invalid: points at that value
        t = C.micro_spec(corpus, steps=40, seeds=(0, 1), grid="  model.n_head: [4, 3]\n")
        cases.append(("n_head=3", t, position(t, "model.n_head: [4, 3]", "3]"), "must divide",
                      []))
        # an unknown knob key in base
        t = C.micro_spec(corpus, steps=40, seeds=(0,), extra_base="model.n_haed: 4")
        cases.append(("unknown knob", t, position(t, "model.n_haed", "model.n_haed"),
                      "unknown key", []))
        # an unknown top-level key
        t = C.micro_spec(corpus, steps=40, seeds=(0,)) + "seedz: 3\n"
        cases.append(("unknown top-level key", t, position(t, "seedz", "seedz"), "unknown key",
                      []))
        # a bad --set: pseudo-file --set, line = argument number
        t = C.micro_spec(corpus, steps=40, seeds=(0,))
        cases.append(("bad --set", t, (2, None), "model.n_head",
                      ["--set", "train.lr=0.01", "--set", "model.n_head=four"]))
        # an existing, finished output that the invalid specs must not touch
        good = C.write(os.path.join(tmp, "good.yaml"), C.micro_spec(corpus, steps=40, seeds=(0,)))
        existing = os.path.join(tmp, "existing.h5")
        C.run(["run", good, "-o", existing], expect_rc=0)
        for i, (what, text, (line, col), msg, sets) in enumerate(cases):
            spec = C.write(os.path.join(tmp, "bad%d.yaml" % i), text)
            rc, so, err = C.run(["plan", spec] + sets)
            assert rc == 2, "plan, %s: exit %s, expected 2\n%s" % (what, rc, err)
            for ranks in ((None, 2) if i == 0 else (None,)):  # mpirun is slow to start
                out = os.path.join(tmp, "out%d-%s.h5" % (i, ranks))
                rc, so, err = C.run(["run", spec, "-o", out] + sets, ranks=ranks)
                label = "%s (%s)" % (what, "in-process" if ranks is None else "mpirun -n 2")
                assert rc == 2, "%s: exit %s, expected 2\n%s" % (label, rc, err)
                f, l, c, m = one_error_line(err, label, ranks)
                want_file = "--set" if sets else spec
                assert f == want_file and l == line and (col is None or c == col) and msg in m, \
                    "%s: error %s:%d:%d: %s; expected %s:%d:%s ...%s..." % (
                        label, f, l, c, m, want_file, line, col, msg)
                for p in (out, out + ".d", out + ".tmp"):
                    assert not os.path.exists(p), "%s: created %s" % (label, p)
                # and with an existing output, --force or --resume must not touch it
                for flag in (("--force", "--resume") if ranks is None else ("--force",)):
                    before = snapshot(existing)
                    rc, so, err = C.run(["run", spec, "-o", existing, flag] + sets, ranks=ranks)
                    assert rc == 2, "%s %s on an existing output: exit %s\n%s" % (label, flag,
                                                                                  rc, err)
                    assert_untouched(before, existing, "%s with %s" % (label, flag))


def test_existing_output_and_force():
    with C.workdir("cli-force") as tmp:
        corpus = C.corpus_path(tmp)
        a = C.write(os.path.join(tmp, "a.yaml"), C.micro_spec(corpus, steps=40, seeds=(0, 1)))
        b = C.write(os.path.join(tmp, "b.yaml"), C.micro_spec(corpus, steps=40, seeds=(5,)))
        out = os.path.join(tmp, "out.h5")
        C.run(["run", a, "-o", out], expect_rc=0)
        for ranks in (None, 2):
            before = snapshot(out)
            rc, so, err = C.run(["run", b, "-o", out], ranks=ranks)
            assert rc == 2, "existing OUT.h5 without --force: exit %s, expected 2\n%s" % (rc, err)
            assert "--force" in err and "--resume" in err, "unclear refusal: %s" % err
            assert_untouched(before, out, "run without --force")
        # OUT.h5.d alone (OUT.h5 deleted by hand) is refused too
        os.rename(out, out + ".saved")
        before = snapshot(out)
        rc, so, err = C.run(["run", b, "-o", out])
        assert rc == 2, "existing OUT.h5.d without --force: exit %s\n%s" % (rc, err)
        assert_untouched(before, out, "run without --force (journal only)")
        os.rename(out + ".saved", out)
        # --force overwrites: a stale checkpoint goes too
        os.makedirs(out + ".d/ckpt", exist_ok=True)
        C.write(out + ".d/ckpt/0123456789abcdef.ckpt", "stale")
        rc, so, err = C.run(["run", b, "-o", out, "--force"], ranks=2)
        assert rc == 0, "--force: exit %s\n%s" % (rc, err)
        v = C.View(out)
        C.assert_complete(v, 1, "--force output")
        assert [v.runs[r]["seed"] for r in v.order] == [5], "--force kept old runs: %s" % v.order
        assert v.attrs.get("sessions") == 1, "sessions %r after --force" % v.attrs.get("sessions")
        js, torn = C.journal_state(C.journal_path(out))
        assert len(js) == 1, "journal after --force plans %d runs" % len(js)
        assert not os.path.exists(out + ".d/ckpt/0123456789abcdef.ckpt"), \
            "--force left a stale checkpoint"


def test_resume_changed_spec():
    with C.workdir("cli-resume") as tmp:
        corpus = C.corpus_path(tmp)
        s01 = C.write(os.path.join(tmp, "s01.yaml"),
                      C.micro_spec(corpus, steps=40, seeds=(0, 1), grid=GRID))
        s0 = C.write(os.path.join(tmp, "s0.yaml"),
                     C.micro_spec(corpus, steps=40, seeds=(0,), grid=GRID))
        s012 = C.write(os.path.join(tmp, "s012.yaml"),
                       C.micro_spec(corpus, steps=40, seeds=(0, 1, 2), grid=GRID))
        lr = C.write(os.path.join(tmp, "lr.yaml"), C.micro_spec(
            corpus, steps=40, seeds=(0, 1), grid=GRID).replace("lr: 1e-2", "lr: 2e-2"))
        out = os.path.join(tmp, "out.h5")
        C.run(["run", s01, "-o", out], expect_rc=0)
        v01 = C.View(out)
        C.assert_complete(v01, 4, "first sweep")
        # dropping runs (seed 1) or changing every run (lr) is refused
        for spec, what in ((s0, "drops seed 1"), (lr, "changes train.lr")):
            for ranks in (None, 2):
                before = snapshot(out)
                rc, so, err = C.run(["run", spec, "-o", out, "--resume"], ranks=ranks)
                assert rc == 2, "resume with a spec that %s: exit %s, expected 2\n%s" % (
                    what, rc, err)
                assert "resume" in err and "seed" in err, "unclear message (%s): %s" % (what, err)
                if what == "drops seed 1":
                    assert any(n in err for n in ("activation=relu/seed1", "activation=gelu/seed1")), \
                        "the refusal does not name a dropped run: %s" % err
                assert_untouched(before, out, "resume with a spec that %s" % what)
        # only adding seeds: appended, old runs kept
        rc, so, err = C.run(["run", s012, "-o", out, "--resume"], ranks=2)
        assert rc == 0, "resume adding seed 2: exit %s\n%s" % (rc, err)
        assert re.search(r"6 runs planned \(4 already finished\)", err), err
        new_names = sorted(C.reported_finished(err))
        assert new_names == ["activation=gelu/seed2", "activation=relu/seed2"], \
            "resume ran %s" % new_names
        v = C.View(out)
        C.assert_complete(v, 6, "resumed sweep")
        C.assert_same(v01, v, "before", "after adding seeds", only_ids=v01.order,
                      ignore_cols=C.RUNS_PLACEMENT)
        assert v.order[:4] == v01.order, "old runs moved: %s -> %s" % (v01.order, v.order)
        ref_out = os.path.join(tmp, "ref.h5")
        C.run(["run", s012, "-o", ref_out], expect_rc=0)
        C.assert_same(C.View(ref_out), v, "fresh", "resumed",
                      ignore_cols=C.RUNS_PLACEMENT | C.RUNS_HISTORY)
        # resuming a finished sweep: nothing to run, nothing changes
        rc, so, err = C.run(["run", s012, "-o", out, "--resume"])
        assert rc == 0 and not C.reported_finished(err), "resume of a finished sweep: %s\n%s" % (
            rc, err)
        C.assert_same(v, C.View(out), "finished", "resumed again", ignore_cols=C.RUNS_PLACEMENT)


def test_plan_json():
    with C.workdir("cli-plan") as tmp:
        corpus = C.corpus_path(tmp)
        # the documented example: 40 runs
        example = os.path.join(C.SOURCE_DIR, "tests", "specs", "example.yaml")
        if os.path.exists(example):
            plan = C.plan_json(example, env={"ABLATE_DATA": corpus})
            assert len(plan) == 40, "example.yaml plans %d runs, expected 40" % len(plan)
            assert plan[0]["name"] == "baseline/n_head=1/activation=gelu/d_model=32/mlp_ratio=4/seed1", \
                plan[0]["name"]
            check_plan(plan)
        spec = C.write(os.path.join(tmp, "s.yaml"), C.micro_spec(
            corpus, steps=40, seeds=(0, 7), grid=GRID + "  model.n_head: [2, 4]\n",
            variants="  baseline: {}\n  post: {model.norm: post}\n"))
        plan = C.plan_json(spec)
        assert len(plan) == 16, "plans %d runs, expected 2 variants x 4 points x 2 seeds" % len(plan)
        check_plan(plan)
        assert plan[0]["name"] == "baseline/activation=relu/n_head=2/seed0", plan[0]["name"]
        assert [p["seed"] for p in plan[:2]] == [0, 7], [p["seed"] for p in plan[:4]]
        # the sweep's /runs agrees with the plan
        out = os.path.join(tmp, "out.h5")
        C.run(["run", spec, "-o", out], ranks=2, expect_rc=0, timeout=240)
        v = C.View(out)
        C.assert_complete(v, 16, "sweep")
        for p in plan:
            r = v.runs.get(p["id"])
            assert r is not None, "planned run %s not in the file" % p["id"]
            assert (r["name"], r["seed"], r["params"]) == (p["name"], p["seed"], p["params"]), \
                "run %s: file %s, plan %s" % (p["id"], (r["name"], r["seed"], r["params"]),
                                              (p["name"], p["seed"], p["params"]))
            assert abs(r["flops_per_token"] - p["flops_per_token"]) <= 1e-5 * p["flops_per_token"]
            for k, val in p["config"].items():
                if k in r and k != "model.vocab_size" and not isinstance(val, str):
                    assert r[k] == val, "run %s %s: file %r plan %r" % (p["name"], k, r[k], val)


def check_plan(plan):
    ids = set()
    for p in plan:
        for k in ("name", "id", "seed", "params", "flops_per_token", "config"):
            assert k in p, "plan entry without %s: %s" % (k, p)
        assert re.fullmatch(r"[0-9a-f]{16}", p["id"]), p["id"]
        assert p["id"] not in ids, "duplicate id %s" % p["id"]
        ids.add(p["id"])
        assert isinstance(p["params"], int) and p["params"] > 0, p["params"]
        assert p["flops_per_token"] > 0
        assert p["name"].endswith("/seed%d" % p["seed"]), (p["name"], p["seed"])
        cfg = p["config"]
        for label in p["name"].split("/")[:-1]:
            if "=" not in label:
                continue
            short, val = label.split("=", 1)
            keys = [k for k in cfg if k == short or k.endswith("." + short)]
            assert len(keys) == 1, "%s: no knob for %s" % (p["name"], short)
            got = cfg[keys[0]]
            ok = str(got) == val or (not isinstance(got, str) and float(got) == float(val))
            assert ok, "%s: config %s = %r" % (p["name"], keys[0], got)


def test_help():
    for args in (["--help"], ["train", "--help"], ["run", "--help"], ["plan", "--help"],
                 ["inspect", "--help"]):
        rc, so, err = C.run(args)
        assert rc == 0, "ablate %s: exit %s\n%s" % (" ".join(args), rc, err)
        assert "usage" in so.lower(), "ablate %s printed no usage on stdout:\n%s%s" % (
            " ".join(args), so, err)
    with C.workdir("cli-usage") as tmp:
        for args in (["run", "x.yaml"], ["run", "x.yaml", "-o", "y.h5", "--bogus"], ["plan"]):
            rc, so, err = C.run(args, cwd=tmp)
            assert rc == 2, "ablate %s: exit %s, expected 2 (usage)\n%s" % (" ".join(args), rc,
                                                                             err)
            assert os.listdir(tmp) == [], "ablate %s created %s" % (" ".join(args), os.listdir(tmp))


def train_events(args):
    rc, so, err = C.run(["train"] + args + ["--json"], tag="train")
    assert rc == 0, "ablate train %s: exit %s\n%s" % (" ".join(args), rc, err)
    return [json.loads(l) for l in so.splitlines() if l.strip()]


def g9(x):
    """A value as `ablate train --json` prints it (%.9g): equal text means equal values to
    the precision the JSON carries (float32 values exactly)."""
    return "%.9g" % x


def test_train_run():
    with C.workdir("cli-train-run") as tmp:
        corpus = C.corpus_path(tmp)
        spec = C.write(os.path.join(tmp, "s.yaml"), C.micro_spec(
            corpus, steps=30, seeds=(0, 1), eval_every=10, stats_every=10,
            variants="  baseline: {}\n  gelu: {model.activation: gelu}\n"))
        # --set of a knob a variant sets: trains the base with it (was "same configuration")
        ev = train_events([spec, "--set", "model.activation=gelu", "--set", "train.steps=3"])
        assert ev[0]["event"] == "start" and ev[0]["config"]["model.activation"] == "gelu", ev[0]
        assert ev[-1]["event"] == "end" and ev[-1]["status"] == "done", ev[-1]
        out = os.path.join(tmp, "out.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        v = C.View(out)
        plan = {p["name"]: p for p in C.plan_json(spec)}
        for sel, name in (("gelu/seed1", "gelu/seed1"), (plan["baseline/seed1"]["id"],
                                                          "baseline/seed1")):
            rid = plan[name]["id"]
            ev = train_events([spec, "--run", sel])
            by = {}
            for e in ev:
                by.setdefault(e["event"], []).append(e)
            assert by["start"][0]["config"] == plan[name]["config"], "config of %s differs" % sel
            steps = {k[1]: r for k, r in v.tables["steps"].items() if k[0] == rid}
            assert sorted(steps) == [e["step"] for e in by["step"]], "steps of %s" % sel
            for e in by["step"]:
                r = steps[e["step"]]
                for col in ("loss", "lr", "grad_norm"):
                    assert g9(e[col]) == g9(r[col]), "%s step %d %s: train %r, sweep %r" % (
                        sel, e["step"], col, e[col], r[col])
            evals = {k[1]: r for k, r in v.tables["evals"].items() if k[0] == rid}
            assert sorted(evals) == [e["step"] for e in by["eval"]], "evals of %s" % sel
            for e in by["eval"]:
                assert g9(e["val_loss"]) == g9(evals[e["step"]]["val_loss"]), (sel, e)
            texts = {k[1]: r["text"] for k, r in v.tables["samples"].items() if k[0] == rid}
            for e in by["sample"]:
                assert texts.get(e["kind"]) == e["text"], "sample %s of %s differs" % (e["kind"],
                                                                                       sel)
            assert g9(by["end"][0]["final_val_loss"]) == g9(v.runs[rid]["final_val_loss"])
        for args, what in ((["--run", "nosuch/seed0"], "no run"),
                           (["--run", "gelu/seed1", "--seed", "3"], "--seed")):
            rc, so, err = C.run(["train", spec] + args)
            assert rc == 2 and what in err, "train %s: exit %s\n%s" % (args, rc, err)


# A refusal costs next to no CPU: `plan` took 7 s of it (15-24 s under load) to refuse a batch
# of 10^8 rows, looping over every row count up to it for the cross-entropy's scratch;
# it takes ~0.03 s now. A CPU-time limit (not a wall-clock one: the load of the
# machine does not count) two orders of magnitude from either.
PLAN_CPU_LIMIT = 2


def test_limits():
    with C.workdir("cli-limits") as tmp:
        corpus = C.corpus_path(tmp)
        base = C.micro_spec(corpus, steps=10, seeds=(0,))
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        binf = os.path.join(tmp, "t.bin")
        with open(binf, "wb") as f:
            f.write(struct.pack("<256i", *([20240520, 1, 3000] + [0] * 253)))
            f.write(struct.pack("<3000H", *[(i * 7) % 1000 for i in range(3000)]))
        cases = [
            # (what, spec text, (line snippet, token) of the error, words)
            ("memory (batch 1e8)", base.replace("batch_size: 8", "batch_size: 100000000"),
             ("batch_size: 1", "100000000"), "TiB of memory"),
            ("model.vocab_size below the data's",
             base.replace('tokenizer: char', 'tokenizer: tokens, vocab_size: 500')
                 .replace(corpus, binf).replace('prompt: "ROMEO:"', 'prompt: "1 2"')
                 .replace("preset: micro", "preset: micro\n  model: {vocab_size: 600}"),
             ("vocab_size: 500", "500"), "out of range"),
            ("prompt outside the vocabulary", base.replace("ROMEO:", "ROMEO{"),
             ("prompt:", '"ROMEO{'), "not in the corpus vocabulary"),
            ("FIFO as data.path", base.replace(corpus, fifo), ("data:", '"'), "not a regular file"),
            # the calibrated budget overflowed (a run failed for the wrong
            # cause; train trained by the clock)
            ("calibrated train.seconds 1e30",
             base.replace("steps: 10,", "seconds: 1.0e+30, calibrate: 2,"),
             ("seconds:", "1.0e+30"), "with train.calibrate is more than"),
        ]
        for i, (what, text, (snippet, token), words) in enumerate(cases):
            spec = C.write(os.path.join(tmp, "l%d.yaml" % i), text)
            line, col = position(text, snippet, token)
            for cmd in (["plan", spec], ["train", spec],
                        ["run", spec, "-o", os.path.join(tmp, "o%d.h5" % i)]):
                rc, so, err = C.run(cmd, timeout=30, cpu_limit=PLAN_CPU_LIMIT)
                assert rc == 2, "%s, %s: exit %s, expected 2\n%s" % (what, cmd[0], rc, err)
                f, l, c, m = one_error_line(err, "%s (%s)" % (what, cmd[0]), None)
                assert (f, l, c) == (spec, line, col) and words in m, \
                    "%s (%s): %s:%d:%d: %s; expected %s:%d:%d ...%s..." % (
                        what, cmd[0], f, l, c, m, spec, line, col, words)
            out = os.path.join(tmp, "o%d.h5" % i)
            for p in (out, out + ".d"):
                assert not os.path.exists(p), "%s: run created %s" % (what, p)
        # numeric options parse strictly; -o needs a file name; nothing is written
        spec = C.write(os.path.join(tmp, "ok.yaml"), base)
        work = os.path.join(tmp, "cwd")
        os.mkdir(work)
        for args in (["run", spec, "-o", "v.h5", "--view-interval", "banana"],
                     ["run", spec, "-o", "v.h5", "--view-interval", "10s"],
                     ["run", spec, "-o", "v.h5", "--view-interval", "nan"],
                     ["run", spec, "-o", "v.h5", "--max-run-memory", "lots"],
                     ["run", spec, "-o", ""], ["run", spec, "-o", "sub/"],
                     ["train", spec, "--seed", "1x"], ["train", spec, "--seed", "-1"],
                     ["plan", spec, "--max-run-memory", "0"]):
            rc, so, err = C.run(args, cwd=work)
            assert rc == 2, "ablate %s: exit %s, expected 2\n%s" % (args, rc, err)
            assert os.listdir(work) == [], "ablate %s wrote %s" % (args, os.listdir(work))
        # a limit that is given is the limit
        rc, so, err = C.run(["plan", spec, "--max-run-memory", "1M"])
        assert rc == 2 and "(--max-run-memory)" in err, "plan under a 1 MiB limit: %s\n%s" % (
            rc, err)
        rc, so, err = C.run(["plan", spec, "--max-run-memory", "2G"])
        assert rc == 0 and "limit per run is 2.00 GiB" in so, so


if __name__ == "__main__":
    C.main([("invalid_spec", test_invalid_spec),
            ("existing_output_and_force", test_existing_output_and_force),
            ("resume_changed_spec", test_resume_changed_spec),
            ("plan_json", test_plan_json),
            ("help", test_help),
            ("train_run", test_train_run),
            ("limits", test_limits)])
