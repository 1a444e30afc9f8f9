"""Hostile strings on the terminal: a corpus whose text is mostly ESC
sequences, "<!--", "<script>" and a C1 control (CSI, U+009B), and grid values (so run names)
made of them:

  - run_progress: `ablate run`'s progress lines show the run names and the best run escaped
    as `ablate plan` shows them (\\u001b, \\u009b), never a raw control character;
  - train_output: `ablate train --run`'s human output (the run line, the samples, printed as
    lines) escapes every control character but the line ends; `--json` stays valid JSON
    whose sample text is the exact text (ESC included), the human text its escaped form;
  - train_error: an error quoting the user's string (--run NAME with an ESC) is escaped.

hostile_spec() is also the sweep of tests/analysis (the page and report.md, item 4).
Run one case alone: test_hostile_text.py NAME.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

ESC = "\x1b"
CSI = "\u009b"
# the description and one grid value hold what blanked the page: "<!--" and later "<script"
DESCRIPTION = ("see <!-- old notes; the page uses a <script> tag </script> & <b>bold</b> "
               "| a pipe, \x1b[31mred\x1b[0m")
PROMPTS = ["\x1b[31m<!--<script>", "<", "</script>|&$\\frac$" + CSI]
# the corpus: every character of the prompts, ESC the most frequent (so samples hold it)
LINE = "\x1b[31m\x1b\x1b\x1b<!--\x1b\x1b<script>\x1b\x1b</script>\x1b|&$\\frac$\x1b%s\x1b\n" % CSI


def yaml_quoted(s):
    """s as a YAML double-quoted scalar (control characters as \\xXX, \\e, \\uXXXX)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == ESC:
            out.append("\\e")
        elif ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return '"%s"' % "".join(out)


def hostile_spec(d, steps=10):
    """(spec, corpus) in d: the hostile corpus and a 3-prompt grid of it, 2 seeds (the
    hostile prompt first, so that it is also the progress line's best run)."""
    corpus = os.path.join(d, "hostile.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(LINE * 1500)
    spec = C.write(os.path.join(d, "hostile.yaml"), "\n".join([
        "description: %s" % yaml_quoted(DESCRIPTION),
        "data: {path: %s, tokenizer: char, val_fraction: 0.1}" % yaml_quoted(corpus),
        "base:",
        "  preset: micro",
        "  train: {lr: 1e-2, batch_size: 8, steps: %d, warmup_steps: 2, eval_every: 5, "
        "eval_tokens: 256}" % steps,
        "  stats: {every: 5}",
        "  sample: {prompt: %s, tokens: 32}" % yaml_quoted("<"),
        "grid:",
        "  sample.prompt: [%s]" % ", ".join(yaml_quoted(p) for p in PROMPTS),
        "seeds: [0, 1]", ""]))
    return spec, corpus


def text_escape(s, keep_lines=False):
    """What src/util/json.h's text_escape makes of s (a str decoded with surrogateescape):
    control characters (C0, DEL, C1) as \\u00XX, \\n \\t \\r, bytes outside UTF-8 as \\udcXX;
    keep_lines: \\n and \\t as they are."""
    out = []
    for ch in s:
        o = ord(ch)
        if keep_lines and ch in "\n\t":
            out.append(ch)
        elif ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif o < 0x20 or 0x7f <= o <= 0x9f:
            out.append("\\u%04x" % o)
        elif 0xdc80 <= o <= 0xdcff:
            out.append("\\udc%02x" % (o - 0xdc00))
        else:
            out.append(ch)
    return "".join(out)


def raw_controls(text):
    """The control characters in text (C0, DEL, C1) other than the line end."""
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f})


def hostile_id(spec):
    """The id of the first run of the hostile prompt (ablate plan --json)."""
    runs = C.plan_json(spec)
    runs = runs["runs"] if isinstance(runs, dict) else runs
    return next(r["id"] for r in runs if r.get("name", "").startswith("prompt=" + ESC))


def test_run_progress():
    with C.workdir("hostile-run") as tmp:
        spec, _ = hostile_spec(tmp)
        rc, so, err = C.run(["run", spec, "-o", os.path.join(tmp, "o.h5")], expect_rc=0)
        assert not raw_controls(err), "run prints raw %r:\n%r" % (raw_controls(err), err)
        shown = "prompt=" + text_escape(PROMPTS[0])
        lines = [ln for ln in err.splitlines() if re.match(r"\[\d+/\d+\] ", ln)]
        assert len(lines) == 6, err
        assert any(ln.startswith("[1/6] %s/seed0 done" % shown) for ln in lines), lines
        assert "best" in lines[-1] and "(%s/seed" % shown in lines[-1], lines[-1]
        c1 = "prompt=" + text_escape(PROMPTS[2].replace("/", "_"))
        assert any(c1 in ln and "\\u009b" in ln for ln in lines), lines


def test_train_output():
    with C.workdir("hostile-train") as tmp:
        spec, _ = hostile_spec(tmp)
        rid = hostile_id(spec)
        rc, so, err = C.run(["train", spec, "--run", rid], expect_rc=0)
        assert not raw_controls(err), "train prints raw %r:\n%r" % (raw_controls(err), err)
        assert "ablate: run prompt=%s/seed0 (id %s)" % (text_escape(PROMPTS[0]), rid) in err, err
        human = re.findall(r"^--- (\w+) sample \([^)]*\) ---\n(.*?)\n---$", err, re.M | re.S)
        rc, so, _ = C.run(["train", spec, "--run", rid, "--json"], expect_rc=0)
        events = [json.loads(ln) for ln in so.splitlines()]  # valid JSON, every line
        samples = [(e["kind"], e["text"]) for e in events if e["event"] == "sample"]
        assert len(samples) == 2 and len(human) == 2, (samples, human)
        assert all(ESC in t for _, t in samples), \
            "no ESC in the samples: the test shows nothing %r" % samples
        for (kind, text), (hkind, htext) in zip(samples, human):
            assert kind == hkind, (kind, hkind)
            assert htext == text_escape(text, keep_lines=True), (htext, text)


def test_train_error():
    with C.workdir("hostile-train-error") as tmp:
        spec, _ = hostile_spec(tmp)
        rc, so, err = C.run(["train", spec, "--run", "\x1b]0;pwned\x07nope"], expect_rc=2)
        assert not raw_controls(err), "train prints raw %r:\n%r" % (raw_controls(err), err)
        assert "'\\u001b]0;pwned\\u0007nope'" in err, err


if __name__ == "__main__":
    C.main([("run_progress", test_run_progress), ("train_output", test_train_output),
            ("train_error", test_train_error)])
