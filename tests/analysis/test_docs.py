"""The examples of docs/analysis.md run as written: every ```sh and ```python block, in a
directory holding a real sweep file `sweep.h5` with its journal (tests/analysis/sweeps.py),
the project's `analysis/` and `ablate` on PATH; a ```python block followed by a plain ```
block must print exactly that block."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402

DOC = os.path.join(C.SOURCE_DIR, "docs", "analysis.md")
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"


def blocks(text):
    """[(lang, code, expected output or None)] in document order."""
    out = []
    found = list(re.finditer(r"^```(\w*)\n(.*?)^```\n", text, re.M | re.S))
    for i, m in enumerate(found):
        lang = m.group(1)
        if lang not in ("sh", "python"):
            continue
        expect = None
        if i + 1 < len(found) and found[i + 1].group(1) == "" and \
                found[i + 1].start() == m.end():
            expect = found[i + 1].group(2)
        out.append((lang, m.group(2), expect))
    return out


def test_docs():
    with open(DOC) as f:
        bl = blocks(f.read())
    assert sum(1 for b in bl if b[0] == "python") >= 4 and any(b[0] == "sh" for b in bl), bl
    with C.workdir("analysis-docs") as d:
        src = W.variants_sweep(d)
        os.rename(src, os.path.join(d, "sweep.h5"))
        os.rename(src + ".d", os.path.join(d, "sweep.h5.d"))  # its journal, for `ablate view`
        os.symlink(os.path.join(C.SOURCE_DIR, "analysis"), os.path.join(d, "analysis"))
        # `ablate` on PATH as for a user who installed it
        path = os.path.dirname(C.BIN) + os.pathsep + C.ENV.get("PATH", "")
        env = dict(C.ENV, PYTHONPATH=os.path.join(d, "analysis"), MPLBACKEND="Agg", PATH=path)
        for i, (lang, code, expect) in enumerate(bl):
            cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else [PY, "-c", code]
            p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=300)
            C.log("  block %d (%s): exit %d, %d lines" % (i, lang, p.returncode,
                                                          len(p.stdout.splitlines())))
            assert p.returncode == 0, "docs/analysis.md block %d failed:\n%s\n%s\n%s" % (
                i, code, p.stdout[-2000:], p.stderr[-3000:])
            if expect is not None:
                assert p.stdout == expect, "block %d printed:\n%s\nthe docs say:\n%s" % (
                    i, p.stdout, expect)
        assert os.path.isfile(os.path.join(d, "report", "report.md"))
        assert os.path.isfile(os.path.join(d, "report-py", "report.md"))


if __name__ == "__main__":
    C.main([("docs", test_docs)])
