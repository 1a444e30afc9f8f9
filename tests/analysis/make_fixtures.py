"""Writes the committed sweep files of the analysis tests, tests/fixtures/analysis/NAME.h5,
from the tiny sweeps of tests/analysis/sweeps.py, with the ablate binary (ABLATE_BIN, else
build/ablate):

    ABLATE_BIN=build/ablate /usr/bin/python3 tests/analysis/make_fixtures.py [NAME...]

Run it when the schema changes (tests/analysis/test_fixtures.py fails and says so), then
commit the files. The sweeps run in a temporary directory with the corpus copied in as
data/corpus.txt and the binary run as `ablate` from PATH, so the files name relative paths
only (the spec, data.path, the command line): nothing of the machine that made them but
its build attributes and host name.

make(outdir, names) is also what test_fixtures.py runs to compare a fresh file with the
committed one."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sweeps as W  # noqa: E402
C = W.C

OUT = os.path.join(os.path.dirname(HERE), "fixtures", "analysis")


def make(outdir, names=None):
    """Builds the fixtures `names` (all of W.FIXTURES by default) into outdir; returns their
    paths by name."""
    if C.BIN is None:
        sys.exit("ABLATE_BIN is not set and no built ablate was found under %s" % C.SOURCE_DIR)
    names = list(names or W.FIXTURES)
    corpus = C.corpus_path()
    tmp = tempfile.mkdtemp(prefix="ablate-fixtures-")
    cwd, saved = os.getcwd(), (C.corpus_path, C.BIN, C.ENV.get("PATH"))
    made = {}
    try:
        # relative paths in the files: the sweeps run in tmp, their corpus data/corpus.txt,
        # the binary run as `ablate` from PATH (the view's command_line is its argv)
        os.chdir(tmp)
        os.mkdir("data")
        shutil.copy(corpus, os.path.join("data", "corpus.txt"))
        C.corpus_path = lambda tmp=None: os.path.join("data", "corpus.txt")
        C.ENV["PATH"] = os.path.dirname(C.BIN) + os.pathsep + (saved[2] or "")
        C.BIN = "ablate"
        for name in names:
            path = W.FIXTURES[name](".")
            made[name] = os.path.join(outdir, name + ".h5")
            shutil.copy(path, made[name])
    finally:
        os.chdir(cwd)
        C.corpus_path, C.BIN = saved[0], saved[1]
        if saved[2] is None:
            C.ENV.pop("PATH", None)
        else:
            C.ENV["PATH"] = saved[2]
        shutil.rmtree(tmp, ignore_errors=True)
    return made


if __name__ == "__main__":
    unknown = [n for n in sys.argv[1:] if n not in W.FIXTURES]
    if unknown:
        sys.exit("make_fixtures: no fixture %s (the fixtures: %s)"
                 % (", ".join(unknown), ", ".join(W.FIXTURES)))
    for name, path in make(OUT, sys.argv[1:]).items():
        print("%s: %d bytes" % (os.path.relpath(path), os.path.getsize(path)))
