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
  alpha_ledger       the file's alpha ledger: the view's replicate_alpha_spent is the sum of
                     the levels of the looks the rule took (replicate_looks_taken of them);
                     a --resume under another rule (alpha, resolve, looks) is refused in one
                     line "FILE:LINE:COL: replicate.KEY: ..." at that key, saying what was
                     spent; so is one without the replicate: section (at seeds:) and one
                     adding it (at replicate:). Before, the refusal named neither the key
                     nor the spend, and the file kept no ledger.
  fixed_continued    a seeds: sweep that was complete (a report of it may have been read)
                     and then resumed with more seeds: the view's looked_at_runs names the
                     earlier complete design, and the report says its fixed-sample tests
                     look at the same contrasts again (before: nothing said so).
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


def specs(tmp):
    """(seeds: spec text, the same with the replicate: section instead, its path in tmp)."""
    seeds_text = C.micro_spec(C.corpus_path(tmp), steps=8, variants=VARIANTS, seeds=(0, 1, 2),
                              eval_every=4, stats_every=4, sample_tokens=4)
    adaptive_text = re.sub(r"^seeds: .*$", REPLICATE.rstrip("\n"), seeds_text, flags=re.M)
    return seeds_text, adaptive_text, C.write(os.path.join(tmp, "adaptive.yaml"), adaptive_text)


def test_replicate_removed():
    with C.workdir("replicate-removed") as tmp:
        seeds_text, adaptive_text, adaptive = specs(tmp)
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


def test_alpha_ledger():
    import h5py
    with C.workdir("alpha-ledger") as tmp:
        seeds_text, adaptive_text, adaptive = specs(tmp)
        out = os.path.join(tmp, "a.h5")
        C.run(["run", adaptive, "-o", out], expect_rc=0, tag="sweep")
        with h5py.File(out, "r") as f:
            attrs = {k: C._py(v) for k, v in f.attrs.items()}
            dec = f["decisions"][()]
        looks = [d for d in dec if d["look"] >= 0 and C._py(d["note"]) != "budget"
                 and d["lo"] == d["lo"]]
        assert looks, dec
        spent = sum(float(d["level"]) for d in looks)
        assert attrs.get("replicate_looks_taken") == len(looks), attrs
        assert abs(attrs.get("replicate_alpha_spent", -1) - spent) < 1e-12, (attrs, spent)
        assert 0 < spent <= attrs["replicate_alpha"] + 1e-12, attrs
        shown = "%.4g" % spent
        lines = adaptive_text.split("\n")
        jp = C.journal_path(out)
        j0 = C.digest(jp)
        cases = (("alpha: 0.2", "alpha: 0.1", "replicate.alpha", "alpha: 0.1"),
                 ("resolve: 0.05", "resolve: 0.07", "replicate.resolve", "resolve: 0.07"))
        for old, new, key, at in cases:
            text = adaptive_text.replace(old, new)
            spec = C.write(os.path.join(tmp, key + ".yaml"), text)
            rc, _, err = C.run(["run", spec, "-o", out, "--resume"], tag=key)
            assert rc == 2, "%s: exit %s\n%s" % (key, rc, err[-2000:])
            line = C.one_line(err, key)
            row = next(i for i, l in enumerate(text.split("\n")) if at in l) + 1
            col = text.split("\n")[row - 1].index(at.split(": ")[1]) + 1
            want = "%s:%d:%d: %s: cannot resume" % (spec, row, col, key)
            assert want in line, (want, line)
            assert "spent %s of alpha 0.2 in %d looks" % (shown, len(looks)) in line, line
            assert C.digest(jp) == j0, "%s: the refusal wrote" % key
        # without the section: refused at seeds:, saying what the rule spent
        fixed = C.write(os.path.join(tmp, "fixed.yaml"), seeds_text)
        rc, _, err = C.run(["run", fixed, "-o", out, "--resume"], tag="removed")
        line = C.one_line(err, "removed")
        row = next(i for i, l in enumerate(seeds_text.split("\n")) if l.startswith("seeds:")) + 1
        col = seeds_text.split("\n")[row - 1].index("[") + 1  # the mark of seeds: is its value
        assert rc == 2 and ("%s:%d:%d: seeds: cannot resume" % (fixed, row, col)) in line, line
        assert "spent %s in %d looks" % (shown, len(looks)) in line, line
        # a seeds: sweep continued with a replicate: section: refused at replicate:
        out2 = os.path.join(tmp, "f.h5")
        C.run(["run", fixed, "-o", out2], expect_rc=0, tag="fixed")
        rc, _, err = C.run(["run", adaptive, "-o", out2, "--resume"], tag="added")
        line = C.one_line(err, "added")
        row = next(i for i, l in enumerate(lines) if l.startswith("replicate:")) + 1
        assert rc == 2 and ("%s:%d:1: replicate: cannot resume" % (adaptive, row)) in line, line
        # a changed budget is not a changed rule: accepted, the ledger unchanged
        budget = C.write(os.path.join(tmp, "budget.yaml"), adaptive_text.replace(
            "alpha: 0.2", "alpha: 0.2\n  budget: {core_hours: 9}"))
        C.run(["run", budget, "-o", out, "--resume"], expect_rc=0, tag="budget")
        with h5py.File(out, "r") as f:
            assert abs(C._py(f.attrs["replicate_alpha_spent"]) - spent) < 1e-12


def _rewrite_replicate(jp, fn):
    """Rewrites the journal jp with fn(payload) in place of every REPLICATE record's payload
    (framing and CRC redone, as the sweep writes them)."""
    import struct
    recs, torn = C.journal_records(jp)
    assert torn == 0, torn
    out = bytearray()
    for typ, run, payload in recs:
        if typ == 10:
            payload = fn(payload)
        body = struct.pack("<BII", typ, run, len(payload)) + payload
        out += b"ABLJ" + body + struct.pack("<I", C.crc32c(body))
    with open(jp, "wb") as f:
        f.write(out)


def test_rule_version():
    """A sweep keeps the sequential rule it began with: a journal whose REPLICATE record
    predates the rule's versions (version 1, its last 4 bytes gone) resumes under version 1
    (said on the log, /decisions' rule recorded as replicate_rule_version 1); one naming a
    version newer than this binary's is refused in one line, nothing written."""
    import h5py
    import struct
    with C.workdir("rule-version") as tmp:
        seeds_text, adaptive_text, adaptive = specs(tmp)
        out = os.path.join(tmp, "a.h5")
        _, _, err = C.run(["run", adaptive, "-o", out], expect_rc=0, tag="sweep")
        assert "sequential rule" not in err, err[-2000:]
        with h5py.File(out, "r") as f:
            this = C._py(f.attrs["replicate_rule_version"])
        assert this >= 3, this
        jp = C.journal_path(out)
        _rewrite_replicate(jp, lambda p: p[:-4])
        _, _, err = C.run(["run", adaptive, "-o", out, "--resume"], expect_rc=0, tag="v1")
        assert "began under version 1 of the sequential rule" in err and \
            "this binary's own is version %d" % this in err, err[-2000:]
        with h5py.File(out, "r") as f:
            assert C._py(f.attrs["replicate_rule_version"]) == 1
        _rewrite_replicate(jp, lambda p: p[:-4] + struct.pack("<I", 99))
        j0 = C.digest(jp)
        rc, _, err = C.run(["run", adaptive, "-o", out, "--resume"], tag="v99")
        line = C.one_line(err, "v99")
        assert rc == 2 and "replicate: cannot resume" in line and "version 99" in line and \
            "newer than this binary's (%d)" % this in line, line
        assert C.digest(jp) == j0, "the refusal wrote"


def test_fixed_continued():
    import subprocess
    import h5py
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with C.workdir("fixed-continued") as tmp:
        corpus = C.corpus_path(tmp)
        specs = [C.write(os.path.join(tmp, "s%d.yaml" % n),
                         C.micro_spec(corpus, steps=8, variants=VARIANTS,
                                      seeds=tuple(range(n)), eval_every=4, stats_every=4,
                                      sample_tokens=4)) for n in (2, 3)]
        out = os.path.join(tmp, "f.h5")
        C.run(["run", specs[0], "-o", out], expect_rc=0, tag="two")
        with h5py.File(out, "r") as f:  # one complete design: nothing looked at before it
            assert "looked_at_runs" not in f.attrs, dict(f.attrs)
        C.run(["run", specs[1], "-o", out, "--resume"], expect_rc=0, tag="three")
        with h5py.File(out, "r") as f:
            assert C._py(f.attrs.get("looked_at_runs")) == "4", dict(f.attrs)
            n = len(f["runs"])
        d = os.path.join(tmp, "rep")
        p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3",
                            os.path.join(root, "analysis", "ablate-report"), out, "-o", d],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        md = open(os.path.join(d, "report.md")).read()
        assert ("**Looked at before:** the sweep was complete at 4 runs before it was "
                "continued to %d" % n) in md, md[:3000]


if __name__ == "__main__":
    C.main([("journal_symlink", test_journal_symlink), ("rule_version", test_rule_version),
            ("replicate_removed", test_replicate_removed),
            ("alpha_ledger", test_alpha_ledger),
            ("fixed_continued", test_fixed_continued)])
