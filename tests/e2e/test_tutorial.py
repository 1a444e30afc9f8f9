"""docs/tutorial.md runs as written: its blocks in document order, in one
fresh directory laid out like the checkout (build/ holding this build's ablate; analysis/,
scripts/, slurm/, sweeps/ and data/ of the source tree), with ABLATE_CORPUS (the test
corpus) for scripts/get-corpus.sh and ABLATE_DATA set to it:
  ```yaml blocks whose first line is `# NAME` are written to NAME (the reader saves them);
  ```sh blocks run with bash -euo pipefail; ```python blocks with Debian's python3;
  a ```sh block whose first line is a comment naming SLURM runs only where a SLURM is
  reachable: slurm-local is started when found ($ABLATE_SLURM_LOCAL, else
  ../shared/slurm-local next to the source tree, as e2e_slurm does), else sinfo must
  answer; otherwise that block is skipped (said in the log) and the rest still runs.
Small by the tutorial's own leave: every `ablate run`, `ablate plan` and `slurm/submit`
line gets `--set train.steps=N` (ABLATE_TUTORIAL_STEPS, default 100; 0: as written, the
tutorial's full settings). Checked besides each block's exit status: the files the text
says each step writes, and each report's verdict lines name the configurations.

ABLATE_TUTORIAL_SCREENSHOTS=DIR (with ABLATE_TUTORIAL_STEPS=0, as for the committed
docs/img/tutorial-*.png) also takes the page screenshots the tutorial shows, in headless
Chromium (tests/analysis/test_page.py's driver), into DIR.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import common as C

DOC = os.path.join(C.SOURCE_DIR, "docs", "tutorial.md")
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"
STEPS = int(os.environ.get("ABLATE_TUTORIAL_STEPS", "100"))
# the commands that plan or train: they take the tutorial's --set train.steps=N
TRAINS = re.compile(r"(\bablate (run|plan)\b|\bslurm/submit\b)")


def blocks(text):
    """[(lang, code)] of the fenced blocks, in document order."""
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^```(\w*)\n(.*?)^```\n", text, re.M | re.S)]


def smaller(code):
    """Each planning or training line with --set train.steps=STEPS added to its command
    (before a pipe)."""
    if not STEPS:
        return code
    out = []
    for line in code.split("\n"):
        if TRAINS.search(line) and not line.lstrip().startswith("#"):
            cmd, pipe, rest = line.rstrip().partition(" | ")  # the ablate command's own end
            line = cmd + " --set train.steps=%d" % STEPS + pipe + rest
        out.append(line)
    return "\n".join(out)


def checkout_like(d):
    """d laid out as the checkout the tutorial runs in."""
    os.makedirs(os.path.join(d, "build"))
    os.symlink(C.BIN, os.path.join(d, "build", "ablate"))
    for name in ("analysis", "scripts", "slurm", "sweeps", "data"):
        os.symlink(os.path.join(C.SOURCE_DIR, name), os.path.join(d, name))


def verdict_configs(out):
    """The configurations of ablate-report's verdict lines (the table after its header)."""
    lines = out.split("\n")
    head = [i for i, l in enumerate(lines) if l.startswith("configuration ")]
    if not head:
        return []
    return [l.split()[0] for l in lines[head[0] + 1:] if l.strip() and
            not l.startswith(("The ", "ablate-report"))]


def test_tutorial():
    with open(DOC) as f:
        bl = blocks(f.read())
    kinds = [lang for lang, _ in bl]
    assert kinds.count("sh") >= 8 and "python" in kinds and "yaml" in kinds, kinds
    corpus = C.corpus_path()
    slurm = None
    with C.workdir("tutorial") as d:
        checkout_like(d)
        env = dict(C.ENV, ABLATE_CORPUS=corpus, ABLATE_DATA=corpus, ABLATE_BIN=C.BIN,
                   MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
        outputs = []
        for i, (lang, code) in enumerate(bl):
            first = code.split("\n", 1)[0]
            if lang == "yaml":
                m = re.match(r"^# (\S+\.yaml)$", first)
                assert m, "docs/tutorial.md block %d: a yaml block starts `# NAME.yaml`" % i
                C.write(os.path.join(d, m.group(1)), code)
                C.log("  block %d: wrote %s" % (i, m.group(1)))
                continue
            if lang not in ("sh", "python"):
                continue
            if lang == "sh" and first.startswith("#") and "SLURM" in first:
                if slurm is None:
                    slurm = C.slurm_reachable()
                if not slurm:
                    C.log("  block %d: SKIP (no SLURM here): %s" % (i, first))
                    continue
            cmd = ["bash", "-euo", "pipefail", "-c", smaller(code)] if lang == "sh" else \
                [PY, "-c", code]
            t0 = time.monotonic()
            p = subprocess.run(cmd, cwd=d, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=900)
            C.log("  block %d (%s): exit %d, %.1f s" % (i, lang, p.returncode,
                                                       time.monotonic() - t0))
            assert p.returncode == 0, "docs/tutorial.md block %d failed (exit %d):\n%s\n%s" % (
                i, p.returncode, smaller(code), p.stdout[-4000:])
            outputs.append((code, p.stdout))
        text = "\n".join(o for _, o in outputs)
        # what the text says each step leaves behind
        for path in ("heads.h5", "heads.h5.d", "heads-report/report.html",
                     "heads-until-report/report.md", "heads-tuned-report/report.md",
                     "grid-report/report.html",
                     "heads-compared/compare.md", "heads-compared/compare.html"):
            assert os.path.exists(os.path.join(d, path)), "no %s after the tutorial" % path
        if slurm:
            assert os.path.isfile(os.path.join(d, "slurm-runs", "heads-until-report",
                                               "report.md")), "the SLURM sweep wrote no report"
        reports = [o for c, o in outputs if "ablate-report" in c and " -o " in c]
        assert reports, text[-3000:]
        for o in reports:
            C.log("  verdicts: %s" % " | ".join(
                " ".join(l.split()) for l in o.split("\n")
                if not l.startswith(("[", "ablate")) and
                re.search(r"\b(better|worse|equivalent|unresolved|not resolved)\b", l)))
        assert "heads8" in verdict_configs(reports[0]), reports[0][-2000:]
        grid_out = [o for c, o in outputs if "grid-report" in c][0]
        assert len(verdict_configs(grid_out)) == 3, grid_out[-2000:]
        shots = os.environ.get("ABLATE_TUTORIAL_SCREENSHOTS")
        if shots:
            screenshots(d, shots)


def screenshots(d, outdir):
    """The tutorial's pictures of the page: the fixed-seed sweep's verdicts, the replicate:
    sweep's sequential verdicts (each its section `verdict`: table and forest plot), and
    the grid's curves grouped by position encoding, under the bar that holds the legend."""
    sys.path.insert(0, os.path.join(C.SOURCE_DIR, "tests", "analysis"))
    import test_page as TP
    from selenium.webdriver.common.by import By
    drv = TP.browser()
    try:
        drv.set_window_size(1000, 1400)
        for report, name, element, groupby in (
                ("heads-report", "tutorial-verdict.png", "#verdict", None),
                ("heads-until-report", "tutorial-sequential.png", "#verdict", None),
                ("grid-report", "tutorial-grid.png", "#fig-val_loss", "position")):
            drv.get("file://" + os.path.join(d, report, "report.html"))
            TP.wait_ready(drv)
            if groupby:
                TP.js(drv, "const s = document.getElementById('groupby'); s.value = '%s';"
                           "s.dispatchEvent(new Event('change'));" % groupby)
                TP.snapshot(drv)  # every figure drawn again
            el = drv.find_element(By.CSS_SELECTOR, element)
            drv.execute_script("arguments[0].scrollIntoView();", el)
            path = os.path.join(outdir, name)
            if groupby:  # the curves with the sticky bar above them: its legend names them
                drv.set_window_size(1000, 640)
                drv.execute_script(
                    "window.scrollTo(0, arguments[0].getBoundingClientRect().top + "
                    "window.scrollY - document.getElementById('controls').offsetHeight - 8);", el)
                drv.save_screenshot(path)
            else:
                el.screenshot(path)
            C.log("  screenshot %s" % path)
    finally:
        drv.quit()


if __name__ == "__main__":
    C.main([("tutorial", test_tutorial)])
