"""ablate installed like HPC software: `cmake --install BUILD --prefix P`, then, with the
source and build trees out of reach (a tmpfs mounted over the source tree in a private mount
namespace, so nothing can be read from the checkout), everything runs from P alone with only
P/bin on PATH, as a module would set it up:
  - the quickstart spec from P/share/ablate/sweeps trains (shortened with --set);
  - GPT-2 tokenization finds the vocabulary in P/share/ablate/gpt2;
  - a SLURM dry-run (P/bin/ablate-submit) checks and sizes the sweep;
  - P/bin/ablate-report writes the report from the installed analysis package.
Needs root (or CAP_SYS_ADMIN) for the mount namespace; skips otherwise.
"""
import os
import shutil
import subprocess

from common import BIN, SOURCE_DIR, Skip, corpus_path, log, main, test_env, workdir


def test_installed_prefix():
    if shutil.which("unshare") is None:
        raise Skip("no unshare(1)")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot make a mount namespace here (needs root): %s" % probe.stderr.decode())
    build = os.path.dirname(BIN)
    gpt2 = os.path.join(os.environ.get("ABLATE_GPT2_VOCAB", ""), "encoder.json")
    with workdir("install") as d:
        if os.path.realpath(d).startswith(os.path.realpath(SOURCE_DIR) + os.sep):
            raise Skip("the temporary directory is inside the source tree")
        prefix = os.path.join(d, "prefix")
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        for f in ("bin/ablate", "bin/ablate-submit", "bin/ablate-sweep.sbatch",
                  "bin/ablate-finish.sbatch", "bin/ablate-report",
                  "share/ablate/sweeps/quickstart.yaml", "share/ablate/docs/spec.md"):
            assert os.path.exists(os.path.join(prefix, f)), "not installed: " + f
        has_vocab = os.path.isfile(gpt2)
        if has_vocab:
            assert os.path.isfile(os.path.join(prefix, "share/ablate/gpt2/encoder.json"))
        shutil.copy(corpus_path(), os.path.join(d, "corpus.txt"))
        script = os.path.join(d, "installed.sh")
        with open(script, "w") as f:
            f.write(r"""set -eu
mount -t tmpfs -o size=1m ablate-hidden "$SRC"
[ ! -e "$SRC/CMakeLists.txt" ] || { echo "source tree still visible"; exit 90; }
unset ABLATE_BIN ABLATE_SOURCE_DIR ABLATE_SLURM_DIR ABLATE_GPT2_VOCAB ABLATE_TEST_CORPUS
export PATH="$PREFIX/bin:/usr/bin:/bin" ABLATE_DATA="$WORK/corpus.txt"
cd "$WORK"
ablate run "$PREFIX/share/ablate/sweeps/quickstart.yaml" -o q.h5 --set train.steps=12 \
    --set train.eval_every=6 --set train.eval_tokens=512 --set sample.tokens=8
ablate inspect q.h5
if [ "$HAS_VOCAB" = 1 ]; then
    printf 'To be, or not to be: that is the question.\n' > t.txt
    ablate tokenize t.txt -o t.bin
    ablate tokenize --decode t.bin > back.txt
    cmp t.txt back.txt
fi
mkdir sub
ablate-submit "$PREFIX/share/ablate/sweeps/quickstart.yaml" -o sub/q.h5 --dry-run
ablate-report q.h5 -o report
test -s report/report.md
echo "installed: all ran"
""")
        env = test_env()
        env.update(SRC=SOURCE_DIR, PREFIX=prefix, WORK=d, HAS_VOCAB="1" if has_vocab else "0")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", script],
                           capture_output=True, text=True, env=env, timeout=600)
        log(r.stdout[-3000:])
        log(r.stderr[-3000:])
        assert r.returncode == 0, "the installed ablate failed (exit %d)" % r.returncode
        assert "installed: all ran" in r.stdout
        assert os.path.isfile(os.path.join(d, "report", "report.md"))


if __name__ == "__main__":
    main([("installed_prefix", test_installed_prefix)])
