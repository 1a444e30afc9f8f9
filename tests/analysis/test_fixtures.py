"""The committed sweep files of the analysis tests (tests/fixtures/analysis, made by
tests/analysis/make_fixtures.py) against the current code: each loads with the current
loader at the newest schema version it reads, and each equals in structure what the
current build writes for the same sweep: the same datasets, the same columns with the same
types, the same root attributes, the same runs with the same status. Values (losses,
times) are not compared: they depend on the build's flags and the machine (-march=native)."""
import os
import sys

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sweeps as W  # noqa: E402
import make_fixtures as M  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis.load import SCHEMA_VERSIONS  # noqa: E402

C = W.C
FILES = {}
REGENERATE = ("regenerate with `ABLATE_BIN=build/ablate /usr/bin/python3 "
              "tests/analysis/make_fixtures.py` and commit tests/fixtures/analysis")


def committed(name):
    return os.path.join(W.FIXTURE_DIR, name + ".h5")


def test_loads():
    """Every fixture loads, at the newest schema version the loader reads."""
    for name in W.FIXTURES:
        sw = aa.load(W.fixture(name, FILES["dir"]))
        assert sw.schema_version == max(SCHEMA_VERSIONS), (
            "%s is schema %d, the loader's newest is %d: %s" % (
                name, sw.schema_version, max(SCHEMA_VERSIONS), REGENERATE))
        assert len(sw.runs) and len(sw.steps) and not sw.partial, name


def structure(path):
    """(datasets with their column types, root attribute names, (run name, status)...)."""
    with h5py.File(path, "r") as f:
        sets = {}
        for k, d in f.items():
            dt = d.dtype
            sets[k] = [(n, str(dt.fields[n][0])) for n in dt.names] if dt.names else str(dt)
        runs = [(n.decode(), s) for n, s in zip(f["runs"]["name"], f["runs"]["status"])]
        return sets, sorted(f.attrs.keys()), runs


def test_matches_build():
    """What make_fixtures.py makes with this build has the committed files' structure."""
    fresh = M.make(FILES["dir"])
    problems = []
    for name, path in fresh.items():
        (sa, aa_, ra), (sb, ab, rb) = structure(committed(name)), structure(path)
        if set(sa) != set(sb):
            problems.append("%s: datasets %s committed, %s written" % (
                name, sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa))))
        for k in set(sa) & set(sb):
            if sa[k] != sb[k]:
                a, b = dict(sa[k]) if isinstance(sa[k], list) else {"": sa[k]}, \
                    dict(sb[k]) if isinstance(sb[k], list) else {"": sb[k]}
                diff = sorted(set(a.items()) ^ set(b.items()))
                problems.append("%s: /%s columns differ: %s" % (name, k, diff[:8]))
        if aa_ != ab:
            problems.append("%s: root attributes %s committed, %s written" % (
                name, sorted(set(aa_) - set(ab)), sorted(set(ab) - set(aa_))))
        if ra != rb:
            problems.append("%s: runs (name, status) differ:\n  %s\n  %s" % (name, ra, rb))
    assert not problems, "\n".join(problems) + "\n" + REGENERATE


if __name__ == "__main__":
    W.main_in_workdir("analysis-fixtures", FILES, [("loads", test_loads),
                                                   ("matches_build", test_matches_build)])
