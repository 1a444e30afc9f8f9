"""What a --resume (and `ablate view`) must refuse rather than change the data unseen.
Each case failed before its fix.

  journal_symlink    OUT.h5.d/journal a symbolic link to another file: --resume reported a
                     torn tail, truncated the link's target and appended a journal to it;
                     `ablate view` read it. Both refuse in one line naming the link, and the
                     target keeps every byte.
  replicate_removed  a replicate: sweep resumed with its replicate: section replaced by
                     seeds: was accepted and trained the runs the rule had settled without,
                     the file still labelled adaptive; a replicate: section added to a
                     seeds: sweep on resume likewise. Both refused (exit 2, one line), the
                     journal unchanged.
Run one case alone: test_resume_guards.py NAME.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402



def test_journal_symlink():
    with C.workdir("journal-symlink") as tmp:
        spec = C.write(os.path.join(tmp, "s.yaml"),
                       C.micro_spec(C.corpus_path(tmp), steps=4, seeds=(0, 1), eval_every=0))
        out = os.path.join(tmp, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="sweep")
        jp = C.journal_path(out)
        # another file, with what would read as a torn tail after the journal's records
        target = os.path.join(tmp, "precious.bin")
        with open(jp, "rb") as f:
            data = f.read()
        with open(target, "wb") as f:
            f.write(data + b"ABLJ\x04 half a record")
        before = C.digest(target)
        os.replace(jp, jp + ".moved")
        os.symlink(target, jp)
        for args, tag in ((["run", spec, "-o", out, "--resume"], "resume"),
                          (["view", out], "view")):
            rc, _, err = C.run(args, tag=tag)
            assert rc != 0, "%s through a symlinked journal: exit 0\n%s" % (tag, err[-2000:])
            line = C.one_line(err, tag)
            assert "symbolic link" in line and jp in line, line
            assert C.digest(target) == before, "%s changed the link's target" % tag
            assert os.path.islink(jp), "%s replaced the link" % tag


REPLICATE = ("replicate:\n"
             "  seeds: {min: 2, max: 3}\n"
             "  looks: [2, 3]\n"
             "  resolve: 0.05\n"
             "  alpha: 0.2\n")
VARIANTS = "  baseline: {}\n  lr_hi: {train.lr: 3.0e-2}\n"


def test_replicate_removed():
    with C.workdir("replicate-removed") as tmp:
        corpus = C.corpus_path(tmp)
        seeds_text = C.micro_spec(corpus, steps=8, variants=VARIANTS, seeds=(0, 1, 2),
                                  eval_every=4, stats_every=4, sample_tokens=4)
        adaptive_text = re.sub(r"^seeds: .*$", REPLICATE.rstrip("\n"), seeds_text, flags=re.M)
        adaptive = C.write(os.path.join(tmp, "adaptive.yaml"), adaptive_text)
        fixed = C.write(os.path.join(tmp, "fixed.yaml"), seeds_text)
        for began, then, tag in ((adaptive, fixed, "removed"), (fixed, adaptive, "added")):
            out = os.path.join(tmp, tag + ".h5")
            C.run(["run", began, "-o", out], expect_rc=0, tag=tag)
            jp = C.journal_path(out)
            j0, v0 = C.digest(jp), C.digest(out)
            rc, _, err = C.run(["run", then, "-o", out, "--resume"], tag=tag + "-resume")
            assert rc == 2, "%s: resume exit %s, expected 2\n%s" % (tag, rc, err[-2000:])
            line = C.one_line(err, tag)
            assert "replicate: section" in line and then in line, line
            assert C.digest(jp) == j0 and C.digest(out) == v0, "%s: the refusal wrote" % tag


if __name__ == "__main__":
    C.main([("journal_symlink", test_journal_symlink),
            ("replicate_removed", test_replicate_removed)])
