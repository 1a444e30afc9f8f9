"""ablate installed like HPC software: `cmake --install BUILD --prefix P`, then, with the
source and build trees out of reach (a tmpfs mounted over the source tree in a private mount
namespace, so nothing can be read from the checkout), everything runs from P alone:
  installed_prefix: with only P/bin on PATH, as a module would set it up:
  - the layout: commands in P/bin, the batch scripts in P/libexec/ablate (not P/bin), the
    analysis package byte-compiled, uPlot, LICENSE, man pages, module files, the smoke test;
  - ablate, ablate-submit and ablate-report say one version (--version);
  - the quickstart spec from P/share/ablate/sweeps trains (shortened with --set);
  - GPT-2 tokenization finds the vocabulary in P/share/ablate/gpt2;
  - a SLURM dry-run (P/bin/ablate-submit) checks and sizes the sweep with the ablate beside
    it (a broken `ablate` earlier on PATH is not used), names itself ablate-submit and
    gives the jobs P/libexec/ablate's scripts and P/bin/ablate-report;
  - P/bin/ablate-report writes report.md and report.html from the installed package and
    uPlot, and the finish job (P/libexec/ablate/ablate-finish.sbatch, run by hand with the
    environment the dry run gives it) writes the report too;
  - none of it writes into P (a root run writes no __pycache__).
  modules: the installed Lmod module file, loaded with Debian's lmod in a clean environment
    (env -i), runs `ablate --version`, `ablate plan` on an installed spec, `ablate-report
    --help` and `import ablate_analysis` from another directory; and the Tcl module file,
    alone on a module path, runs `ablate --version`.
Hiding the source tree needs root (or CAP_SYS_ADMIN) for the mount namespace:
installed_prefix skips without it, modules runs without hiding it.
"""
import os
import re
import shutil
import subprocess

from common import BIN, SOURCE_DIR, Skip, corpus_path, log, main, test_env, workdir

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"


def can_hide():
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return "cannot make a mount namespace here (needs root): %s" % probe.stderr.decode()
    return None


def build_cache(key):
    with open(os.path.join(os.path.dirname(BIN), "CMakeCache.txt")) as f:
        m = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(key), f.read(), re.M)
    return m.group(1) if m else ""


def install(d):
    if os.path.realpath(d).startswith(os.path.realpath(SOURCE_DIR) + os.sep):
        raise Skip("the temporary directory is inside the source tree")
    prefix = os.path.join(d, "prefix")
    r = subprocess.run(["cmake", "--install", os.path.dirname(BIN), "--prefix", prefix],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return prefix


def run_hidden(script_text, d, env, hide=True):
    script = os.path.join(d, "installed.sh")
    with open(script, "w") as f:
        f.write(script_text)
    env = dict(env, SRC=SOURCE_DIR, WORK=d)
    cmd = ["bash", script]
    if hide:
        cmd = ["unshare", "-m", "--propagation", "private"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    log(r.stdout[-4000:])
    log(r.stderr[-3000:])
    return r


HIDE = r"""
if [ "${HIDE:-1}" = 1 ]; then
    mount -t tmpfs -o size=1m ablate-hidden "$SRC"
    [ ! -e "$SRC/CMakeLists.txt" ] || { echo "source tree still visible"; exit 90; }
fi
"""


def files_under(p):
    out = set()
    for root, dirs, files in os.walk(p):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(root, n), p))
    return out


def test_installed_prefix():
    why = can_hide()
    if why:
        raise Skip(why)
    gpt2 = os.path.join(os.environ.get("ABLATE_GPT2_VOCAB", ""), "encoder.json")
    uplot = os.path.join(os.environ.get("ABLATE_UPLOT", ""), "uPlot.iife.min.js")
    with workdir("install") as d:
        prefix = install(d)
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.split()[1]
        must = ["bin/ablate", "bin/ablate-submit", "bin/ablate-report",
                "libexec/ablate/ablate-sweep.sbatch", "libexec/ablate/ablate-sweep-srun.sbatch",
                "libexec/ablate/ablate-finish.sbatch",
                "share/ablate/sweeps/quickstart.yaml", "share/ablate/docs/spec.md",
                "share/ablate/LICENSE", "share/ablate/CITATION.cff", "share/ablate/tests/smoke.sh",
                "share/ablate/modulefiles/ablate/%s.lua" % version,
                "share/ablate/modulefiles/ablate/%s" % version]
        if shutil.which("help2man"):
            must += ["share/man/man1/ablate.1", "share/man/man1/ablate-submit.1"]
        for f in must:
            assert os.path.exists(os.path.join(prefix, f)), "not installed: " + f
        for f in ("ablate-sweep.sbatch", "ablate-finish.sbatch", "ablate-sweep-srun.sbatch"):
            assert not os.path.exists(os.path.join(prefix, "bin", f)), "in bin/: " + f
        pyc = [f for f in files_under(prefix) if f.endswith(".pyc")]
        assert any("ablate_analysis/__pycache__/report." in f for f in pyc), "not byte-compiled"
        with open(os.path.join(prefix, "bin", "ablate-report")) as f:
            shebang = f.readline().strip()
        python = build_cache("ABLATE_REPORT_PYTHON")
        assert shebang == "#!" + (python or "/usr/bin/env python3"), (shebang, python)
        has_vocab = os.path.isfile(gpt2)
        if has_vocab:
            assert os.path.isfile(os.path.join(prefix, "share/ablate/gpt2/encoder.json"))
        has_uplot = os.path.isfile(uplot)
        if has_uplot:
            assert os.path.isfile(os.path.join(prefix, "share/ablate/uplot/uPlot.iife.min.js"))
        shutil.copy(corpus_path(), os.path.join(d, "corpus.txt"))
        os.makedirs(os.path.join(d, "decoy"))
        with open(os.path.join(d, "decoy", "ablate"), "w") as f:
            f.write("#!/bin/sh\necho 'the ablate on PATH ran' >&2\nexit 99\n")
        os.chmod(os.path.join(d, "decoy", "ablate"), 0o755)
        before = files_under(prefix)
        r = run_hidden(HIDE + r"""set -eu
unset ABLATE_BIN ABLATE_SOURCE_DIR ABLATE_SLURM_DIR ABLATE_GPT2_VOCAB ABLATE_TEST_CORPUS ABLATE_UPLOT ABLATE_REPORT PYTHONPATH
export PATH="$PREFIX/bin:/usr/bin:/bin" ABLATE_DATA="$WORK/corpus.txt"
cd "$WORK"
for t in ablate ablate-submit ablate-report; do "$t" --version; done > versions.txt
ablate run "$PREFIX/share/ablate/sweeps/quickstart.yaml" -o q.h5 --set train.steps=12 \
    --set train.eval_every=6 --set train.eval_tokens=512 --set sample.tokens=8
ablate inspect q.h5
if [ "$HAS_VOCAB" = 1 ]; then
    printf 'To be, or not to be: that is the question.\n' > t.txt
    ablate tokenize t.txt -o t.bin
    ablate tokenize --decode t.bin > back.txt
    cmp t.txt back.txt
    # without the vocabulary, the error names where an install keeps it (it named P/data/gpt2)
    mv "$PREFIX/share/ablate/gpt2" "$WORK/gpt2-aside"
    if ablate tokenize t.txt -o t2.bin 2> novocab.txt; then exit 1; fi
    mv "$WORK/gpt2-aside" "$PREFIX/share/ablate/gpt2"
    grep -q "$PREFIX/bin/../share/ablate/gpt2" novocab.txt || { cat novocab.txt; exit 1; }
fi
mkdir sub
ablate-submit --help | head -n 1 > submit-help.txt
PATH="$WORK/decoy:$PATH" "$PREFIX/bin/ablate-submit" "$PREFIX/share/ablate/sweeps/quickstart.yaml" \
    -o sub/q.h5 --report "$WORK/rep-job" --dry-run > dry.txt
cat dry.txt
ablate-report q.h5 -o report
test -s report/report.md
# the finish job, by hand, as the dry run would start it (the sweep is q.h5's)
report_cmd=$(grep -o 'ABLATE_REPORT=[^ ]*' dry.txt | head -n 1 | cut -d= -f2)
bin=$(grep -o 'ABLATE_BIN=[^ ]*' dry.txt | head -n 1 | cut -d= -f2)
ABLATE_BIN=$bin ABLATE_REPORT=$report_cmd bash "$PREFIX/libexec/ablate/ablate-finish.sbatch" q.h5 "$WORK/rep-job" > finish.txt 2>&1 || { cat finish.txt; exit 1; }
test -s rep-job/report.md
echo "installed: all ran"
""", d, dict(test_env(), PREFIX=prefix, HAS_VOCAB="1" if has_vocab else "0"))
        assert r.returncode == 0, "the installed ablate failed (exit %d)" % r.returncode
        assert "installed: all ran" in r.stdout
        assert os.path.isfile(os.path.join(d, "report", "report.md"))
        if has_uplot:
            assert os.path.getsize(os.path.join(d, "report", "report.html")) > 0, "no report.html"
            assert os.path.getsize(os.path.join(d, "rep-job", "report.html")) > 0
        with open(os.path.join(d, "versions.txt")) as f:
            lines = f.read().splitlines()
        assert len(lines) == 3 and all(l.split()[-1] in (version, "(%s)" % version) or
                                       (" %s" % version) in l for l in lines), lines
        with open(os.path.join(d, "submit-help.txt")) as f:
            assert f.read().startswith("usage: ablate-submit "), "help names slurm/submit"
        with open(os.path.join(d, "dry.txt")) as f:
            dry = f.read()
        for want in ("ABLATE_BIN=%s/bin/ablate" % prefix,
                     "ABLATE_REPORT=%s/bin/ablate-report" % prefix,
                     "%s/libexec/ablate/ablate-sweep.sbatch" % prefix,
                     "%s/libexec/ablate/ablate-finish.sbatch" % prefix):
            assert want in dry, (want, dry)
        assert "slurm/submit" not in dry and "build/ablate" not in dry, dry
        written = sorted(files_under(prefix) - before)
        assert not written, "the runs wrote into the prefix: %s" % written[:10]


def test_modules():
    if not os.path.isfile(LMOD_INIT):
        raise Skip("no lmod (%s; scripts/install-deps.sh installs it)" % LMOD_INIT)
    hide = can_hide() is None
    with workdir("modules") as d:
        prefix = install(d)
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.split()[1]
        shutil.copy(corpus_path(), os.path.join(d, "corpus.txt"))
        tcl = os.path.join(d, "tcl", "ablate")
        os.makedirs(tcl)
        shutil.copy(os.path.join(prefix, "share/ablate/modulefiles/ablate", version), tcl)
        r = run_hidden(HIDE + r"""set -eu
# a clean environment: what a user's login shell has, and the module
exec env -i HOME="$WORK" USER=nobody PATH=/usr/bin:/bin PREFIX="$PREFIX" WORK="$WORK" \
    ABLATE_DATA="$WORK/corpus.txt" $MPI_ROOT_ENV bash --noprofile --norc -eu -c '
source /usr/share/lmod/lmod/init/bash
module use "$PREFIX/share/ablate/modulefiles"
module load ablate
mkdir -p "$WORK/elsewhere" && cd "$WORK/elsewhere"
echo "lua: $(ablate --version)"
ablate plan "$ABLATE_ROOT/share/ablate/sweeps/quickstart.yaml" | tail -n 2
ablate-report --help | head -n 1
python3 -c "import ablate_analysis; print(\"lua: imported\", ablate_analysis.__file__)"
module purge
command -v ablate && exit 91
module use "$WORK/tcl"
module unuse "$PREFIX/share/ablate/modulefiles"
module load ablate
echo "tcl: $(ablate --version)"
echo "modules: all ran"
'
""", d, dict(test_env(), PREFIX=prefix, HIDE="1" if hide else "0",
             MPI_ROOT_ENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"), hide=hide)
        assert r.returncode == 0, "the module run failed (exit %d)" % r.returncode
        out = r.stdout
        assert "modules: all ran" in out
        assert "lua: ablate %s" % version in out and "tcl: ablate %s" % version in out, out
        assert "usage: ablate-report" in out and "lua: imported %s/lib" % prefix in out, out


if __name__ == "__main__":
    main([("installed_prefix", test_installed_prefix), ("modules", test_modules)])
