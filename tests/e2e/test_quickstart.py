"""The README's quickstart example is what scripts/quickstart.sh prints.

readme_output: runs scripts/quickstart.sh itself with this build's ablate
(ABLATE_QUICKSTART_BIN: no install, no build) into a temp dir (ABLATE_QUICKSTART_OUT), on
Tiny Shakespeare, and compares its end with the README's example (the ```text block after
the `scripts/quickstart.sh` command): the same verdict table rows (configuration, baseline
and verdict words; the digits may differ from machine to machine) and the same
`quickstart:` lines with digits and paths masked; every contrast resolved (better, worse or
equivalent), and the page it names exists. The README's example is on Tiny Shakespeare, so
another corpus (ABLATE_TEST_CORPUS, when it is not Tiny Shakespeare) skips the case: offline
the quickstart trains on the Debian license texts, where the verdicts differ (README).

no_page: without uPlot no report.html is written, and the quickstart names no page.

The sweep is the quickstart's own: 20 micro runs of 600 steps, ~20 s on 2 cores (each case).
"""

import hashlib
import os
import re
import subprocess
import tempfile
import shutil

import common as C

README = os.path.join(C.SOURCE_DIR, "README.md")
# Tiny Shakespeare (karpathy/char-rnn's input.txt), the corpus of the README's example
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+|-)\s+(\S+)\s+\[[^\]]*\]\s+(\S.*?)\s*$")
RESOLVED = {"better", "worse", "equivalent"}


def readme_example():
    """The ```text block that follows the README's `scripts/quickstart.sh` block."""
    with open(README) as f:
        text = f.read()
    m = re.search(r"^```sh\nscripts/quickstart\.sh\n```\n(.*?)^```text\n(.*?)^```$", text,
                  re.M | re.S)
    assert m, "README.md: no ```text example after the ```sh scripts/quickstart.sh block"
    return m.group(2)


def verdict_rows(text):
    """[(configuration, baseline, verdict)] of the verdict table (the lines after its
    header `configuration  baseline  n  difference  interval  verdict`)."""
    lines = text.split("\n")
    head = [i for i, l in enumerate(lines) if re.match(r"^configuration\s+baseline\s+n\s", l)]
    assert len(head) == 1, "one verdict table expected:\n%s" % text
    rows = []
    for l in lines[head[0] + 1:]:
        m = ROW.match(l)
        if not m:
            break
        rows.append((m.group(1), m.group(2), m.group(5)))
    return rows


def shape(line):
    """A line with what varies between machines masked: words holding a '/' (paths, URLs)
    and numbers."""
    words = ["PATH" if "/" in w else w for w in line.split()]
    return re.sub(r"[-+]?\d+(\.\d+)?", "#", " ".join(words))


def quickstart_lines(text):
    return [shape(l) for l in text.split("\n") if l.startswith("quickstart: ")
            and not l.startswith(("quickstart: corpus", "quickstart: running as root",
                                  "quickstart: mpirun"))]


def test_readme_output():
    corpus = os.environ.get("ABLATE_TEST_CORPUS", "")
    if not os.path.isfile(corpus):
        raise C.Skip("ABLATE_TEST_CORPUS is not a file: the README's example is on Tiny "
                     "Shakespeare")
    with open(corpus, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != TINY_SHAKESPEARE_SHA256:
            raise C.Skip("%s is not Tiny Shakespeare, the corpus of the README's example"
                         % corpus)
    example = readme_example()
    want = verdict_rows(example)
    assert want and all(v in RESOLVED for _, _, v in want), (
        "the README's example should show resolved verdicts: %s" % want)
    tmp = tempfile.mkdtemp(prefix="ablate-quickstart-")
    try:
        env = dict(C.ENV, ABLATE_QUICKSTART_BIN=C.BIN, ABLATE_QUICKSTART_OUT=tmp,
                   ABLATE_CORPUS=corpus, PYTHONUNBUFFERED="1")
        # stdout and stderr in one stream, in the order a terminal shows them
        p = subprocess.run(["bash", os.path.join(C.SOURCE_DIR, "scripts", "quickstart.sh")],
                           cwd=C.SOURCE_DIR, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=900)
        out = p.stdout
        assert p.returncode == 0, "quickstart.sh exit %d:\n%s" % (p.returncode, out[-4000:])
        got = verdict_rows(out)
        C.log("  quickstart's verdicts: %s" % ", ".join("%s %s" % (c, v) for c, _, v in got))
        C.log("  %s" % [l for l in out.split("\n") if l.startswith("quickstart: done")])
        assert got == want, ("the quickstart printed the verdicts\n  %s\nthe README's example "
                             "shows\n  %s\n(update README.md's example from this run)"
                             % (got, want))
        want_lines, got_lines = quickstart_lines(example), quickstart_lines(out)
        assert got_lines == want_lines, (
            "the quickstart's lines differ from the README's example (digits and paths "
            "masked):\n%s\nthe README:\n%s" % ("\n".join(got_lines), "\n".join(want_lines)))
        page = re.search(r"^quickstart: page: +file://(\S+)$", out, re.M)
        assert page and os.path.isfile(page.group(1)), "no page named: %s" % out[-2000:]
        assert page.group(1) == os.path.join(os.path.realpath(tmp), "quickstart-report",
                                             "report.html"), page.group(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_no_page():
    """Without uPlot (install-deps not run, or its npm fetch failed) ablate-report writes no
    report.html; the quickstart then names no page (it used to print the page's URL all the
    same), nor one an earlier run left in the report's directory."""
    tmp = tempfile.mkdtemp(prefix="ablate-quickstart-")
    try:
        stale = os.path.join(tmp, "quickstart-report", "report.html")
        os.makedirs(os.path.dirname(stale))
        C.write(stale, "<html>an earlier run's page</html>\n")
        no_uplot = os.path.join(tmp, "no-uplot")
        os.makedirs(no_uplot)
        env = dict(C.ENV, ABLATE_QUICKSTART_BIN=C.BIN, ABLATE_QUICKSTART_OUT=tmp,
                   ABLATE_CORPUS=C.corpus_path(), ABLATE_UPLOT=no_uplot, PYTHONUNBUFFERED="1")
        p = subprocess.run(["bash", os.path.join(C.SOURCE_DIR, "scripts", "quickstart.sh")],
                           cwd=C.SOURCE_DIR, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=900)
        out = p.stdout
        assert p.returncode == 0, "quickstart.sh exit %d:\n%s" % (p.returncode, out[-4000:])
        assert "report.html not written" in out, out[-3000:]
        assert not re.search(r"^quickstart: page:", out, re.M), (
            "the quickstart names a page it did not write:\n%s" % out[-2000:])
        assert re.search(r"^quickstart: no page: .*uPlot", out, re.M), out[-2000:]
        assert not os.path.exists(stale), "the earlier run's page is still there"
        assert os.path.isfile(os.path.join(tmp, "quickstart-report", "report.md"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    C.main([("readme_output", test_readme_output), ("no_page", test_no_page)])
