"""Small input faults, each refused or kept as documented.

  - output_is_input: -o naming the spec, the data file (by another path, a symlink, a hard
    link) or a directory OUT.h5.d that holds the data is refused, with --force too, exit 2,
    one line, nothing deleted;
  - control_chars: control characters in grid values (here an OSC "set title" and a
    clear-screen in a data.path) are shown escaped by `plan` and `inspect` (as --json
    escapes them), never raw; valid UTF-8 passes through;
  - number_grammar: one decimal grammar for every numeric key: lr: 0x10 is refused as
    n_head: 0x2 is, each at FILE:LINE:COL naming the key; decimal forms still parse;
  - join_after_complete: a --join to a sweep whose every run is done exits 0, says so, and
    leaves no new procs/*/journal (in-process and under mpirun); the view stays complete;
  - user_data: /user in OUT.h5 (datasets, groups, attributes) survives `ablate view` and a
    --resume that adds runs; anything else a user added is named in one warning line;
Run one case alone: test_small_faults.py NAME.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402



def test_output_is_input():
    with C.workdir("out-is-input") as tmp:
        data = os.path.join(tmp, "data.txt")
        shutil.copyfile(C.corpus_path(tmp), data)
        spec = C.write(os.path.join(tmp, "s.yaml"), C.micro_spec(data, steps=10, seeds=(0,)))
        os.symlink(data, os.path.join(tmp, "link.h5"))
        os.link(data, os.path.join(tmp, "hard.h5"))
        os.mkdir(os.path.join(tmp, "sub"))
        # the data inside OUT.h5.d: --force would remove the directory with it
        inside = os.path.join(tmp, "o.h5.d")
        os.mkdir(inside)
        data2 = os.path.join(inside, "data.txt")
        shutil.copyfile(data, data2)
        spec2 = C.write(os.path.join(tmp, "s2.yaml"), C.micro_spec(data2, steps=10, seeds=(0,)))
        cases = [(spec, data, "data.txt", "data file"), (spec, data, "./sub/../data.txt",
                                                           "data file"),
                 (spec, data, "link.h5", "data file"), (spec, data, "hard.h5", "data file"),
                 (spec, spec, "s.yaml", "spec"), (spec2, data2, "o.h5", "data file")]
        for i, (sp, victim, out, what) in enumerate(cases):
            before = C.digest(victim)
            for flags in (["--force"], ["--resume"], []) if i == 0 else (["--force"],):
                rc, so, err = C.run(["run", sp, "-o", out] + flags, cwd=tmp)
                label = "-o %s %s" % (out, " ".join(flags))
                assert rc == 2, "%s: exit %s, expected 2\n%s" % (label, rc, err)
                line = C.one_line(err, label)
                assert what in line and "another output" in line, "%s: %s" % (label, line)
                assert os.path.isfile(victim) and C.digest(victim) == before, \
                    "%s changed %s" % (label, victim)
            assert not os.path.exists(os.path.join(tmp, out) + ".d") or out == "o.h5", \
                "-o %s created its journal dir" % out
        assert sorted(os.listdir(inside)) == ["data.txt"], os.listdir(inside)
        # a plain, distinct output still works
        C.run(["run", spec, "-o", "ok.h5"], cwd=tmp, expect_rc=0)


def raw_controls(text):
    """The control characters in text other than the newline that ends each line."""
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f})


def test_control_chars():
    with C.workdir("control-chars") as tmp:
        corpus = C.corpus_path(tmp)
        evil = os.path.join(tmp, "d\x1b]0;pwned\x07\x1b[2J\u00e9.txt")
        shutil.copyfile(corpus, evil)
        grid = '  data.path: ["%s", "%s"]\n' % (
            corpus, evil.replace("\x1b", "\\e").replace("\x07", "\\a"))
        spec = C.write(os.path.join(tmp, "s.yaml"),
                       C.micro_spec(corpus, steps=4, seeds=(0,), grid=grid, eval_every=0))
        rc, so, err = C.run(["plan", spec], expect_rc=0)
        assert not raw_controls(so), "plan prints raw %r:\n%r" % (raw_controls(so), so)
        assert "\\u001b]0;pwned\\u0007\\u001b[2J\u00e9.txt" in so, so
        rc, so, err = C.run(["plan", spec, "--json"], expect_rc=0)
        assert not raw_controls(so) and "\\u001b" in so, so
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        rc, so, err = C.run(["inspect", out], expect_rc=0)
        assert not raw_controls(so), "inspect prints raw %r:\n%r" % (raw_controls(so), so)
        assert "\\u001b" in so and "\u00e9" in so, so


def test_number_grammar():
    with C.workdir("numbers") as tmp:
        corpus = C.corpus_path(tmp)
        base = C.micro_spec(corpus, steps=4, seeds=(0,), eval_every=0)
        bad = [("lr: 1e-2", "lr: 0x10", "train.lr"), ("lr: 1e-2", "lr: 0x1p-4", "train.lr"),
               ("lr: 1e-2", "lr: infinity", "train.lr"), ("lr: 1e-2", 'lr: " 0.01"', "train.lr"),
               ("batch_size: 8", "batch_size: 0x8", "train.batch_size"),
               ("batch_size: 8", "batch_size: 1_0", "train.batch_size"),
               ("steps: 4", "steps: 4e", "train.steps"),
               ("preset: micro", "preset: micro\n  model: {n_head: 0x2}", "model.n_head")]
        for old, new, key in bad:
            text = base.replace(old, new)
            spec = C.write(os.path.join(tmp, "s.yaml"), text)
            rc, so, err = C.run(["plan", spec])
            line = C.one_line(err, new)
            want_line = [i + 1 for i, l in enumerate(text.split("\n"))
                         if new.split("\n")[-1].strip() in l][0]
            assert rc == 2 and line.startswith("%s:%d:" % (spec, want_line)) and key in line, \
                "%s: exit %s: %s" % (new, rc, line)
        # --set reads the same grammar
        spec = C.write(os.path.join(tmp, "s.yaml"), base)
        rc, so, err = C.run(["plan", spec, "--set", "train.lr=0x10"])
        assert rc == 2 and C.one_line(err, "--set").startswith("--set:1:"), err
        for good in ("lr: 0.01", "lr: 1e-2", "lr: .01", "lr: +1E-2", "batch_size: 8.0"):
            old = "lr: 1e-2" if good.startswith("lr") else "batch_size: 8"
            spec = C.write(os.path.join(tmp, "s.yaml"), base.replace(old, good))
            C.run(["plan", spec], expect_rc=0)


def test_join_after_complete():
    with C.workdir("join-complete") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"),
                       C.micro_spec(C.corpus_path(tmp), steps=4, seeds=(0, 1), eval_every=0))
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out, "--join"], expect_rc=0)
        procs = sorted(os.listdir(out + ".d/join/procs"))
        assert len(procs) == 1, procs
        for ranks in (None, None, 2):
            rc, so, err = C.run(["run", spec, "-o", out, "--join"], ranks=ranks, expect_rc=0)
            assert "already complete" in err, err
            now = sorted(os.listdir(out + ".d/join/procs"))
            assert now == procs, "a join after completion left %s" % sorted(set(now) - set(procs))
        C.assert_complete(C.View(out), 2, "after late joins")


def test_user_data():
    import h5py
    import numpy as np
    with C.workdir("user-data") as tmp:
        corpus = C.corpus_path(tmp)
        spec = C.write(os.path.join(tmp, "s.yaml"),
                       C.micro_spec(corpus, steps=4, seeds=(0,), eval_every=0))
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        with h5py.File(out, "a") as f:
            u = f.create_group("user")
            u.attrs["owner"] = "me"
            u.create_dataset("notes", data=np.arange(5.0))
            u.create_group("deep/er").attrs["k"] = 3
            f.create_dataset("notes", data=[1, 2])
            f.attrs["mine"] = "x"

        def check(label):
            with h5py.File(out, "r") as f:
                assert "user" in f, "%s: /user lost" % label
                assert f["user"].attrs["owner"] == "me", label
                assert list(f["user/notes"][()]) == [0, 1, 2, 3, 4], label
                assert f["user/deep/er"].attrs["k"] == 3, label
                return len(f["runs"])

        rc, so, err = C.run(["view", out], expect_rc=0)
        check("ablate view")
        warn = [l for l in err.splitlines() if "not kept" in l]
        assert len(warn) == 1 and "/notes" in warn[0] and "attribute mine" in warn[0] \
            and "/user" in warn[0], err
        # the next rebuild has nothing more to drop: no warning
        rc, so, err = C.run(["view", out], expect_rc=0)
        assert "not kept" not in err, err
        check("second view")
        spec2 = C.write(os.path.join(tmp, "s.yaml"),
                        C.micro_spec(corpus, steps=4, seeds=(0, 1), eval_every=0))
        rc, so, err = C.run(["run", spec2, "-o", out, "--resume", "--view-interval", "0.01"],
                            expect_rc=0)
        assert check("--resume") == 2
        assert "not kept" not in err, err


if __name__ == "__main__":
    C.main([("output_is_input", test_output_is_input),
            ("control_chars", test_control_chars),
            ("number_grammar", test_number_grammar),
            ("join_after_complete", test_join_after_complete),
            ("user_data", test_user_data)])
