"""The README's two commands in its order: scripts/quickstart.sh leaves
its build dir configured with BUILD_TESTING=OFF; scripts/run-tests.sh run next on the same
dir must turn testing on itself and refuse a pass that would run no test.

Cheap by design: both scripts stop after their configure step here (ABLATE_CONFIGURE_ONLY,
ABLATE_TESTS_LIST_ONLY; no install, no build, no test run), in a temp build dir
(ABLATE_BUILD_DIR), so the check is the scripts' own configure and ctest lines.
"""

import os
import re
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ABLATE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))


def script(name, build, extra_env, *args):
    env = dict(os.environ, ABLATE_BUILD_DIR=build, **extra_env)
    p = subprocess.run(["bash", os.path.join(SOURCE_DIR, "scripts", name)] + list(args),
                       cwd=SOURCE_DIR, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def cache_value(build, key):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split("=", 1)[1].strip()
    return None


def test_quickstart_then_run_tests():
    tmp = tempfile.mkdtemp(prefix="ablate-scripts-")
    try:
        build = os.path.join(tmp, "build")
        rc, out, err = script("quickstart.sh", build, {"ABLATE_CONFIGURE_ONLY": "1"})
        assert rc == 0, "quickstart configure failed (%d): %s" % (rc, err[-2000:])
        assert cache_value(build, "BUILD_TESTING") == "OFF", "the quickstart's cache: %s" % (
            cache_value(build, "BUILD_TESTING"))

        rc, out, err = script("run-tests.sh", build, {"ABLATE_TESTS_LIST_ONLY": "1"})
        m = re.search(r"^Total Tests: (\d+)", out, re.M)
        assert rc == 0 and m and int(m.group(1)) > 0, (
            "run-tests.sh after the quickstart lists no test (rc %d):\n%s\n%s" % (rc, out, err))
        assert cache_value(build, "BUILD_TESTING") == "ON"
        for name in ("e2e_slurm", r"analysis_report\.loader", r"e2e_join\.hung",
                     r"test_engine\.determinism"):
            assert re.search(r"Test +#\d+: %s$" % name, out, re.M), "%s not listed" % name
        print("run-tests.sh after the quickstart: %s tests" % m.group(1))

        # a pass that would run nothing is an error, not a green line
        rc, out, err = script("run-tests.sh", build, {"ABLATE_TESTS_LIST_ONLY": "1"},
                              "-R", "^no-such-test$")
        assert rc != 0, "run-tests.sh accepted a pass with no test:\n%s" % out
        assert "no test" in err, err
        # and every real ctest pass of the script refuses zero tests
        with open(os.path.join(SOURCE_DIR, "scripts", "run-tests.sh")) as f:
            text = f.read()
        passes = [l for l in text.split("\n") if re.search(r"\bctest --", l)]
        assert len(passes) == 3 and all("--no-tests=error" in l for l in passes), passes
        assert text.count("-DBUILD_TESTING=ON") >= 3, "every configure turns testing on"
        print("ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, HERE)
    import common as C
    C.main([("quickstart_then_run_tests", test_quickstart_then_run_tests)])
