"""What a site installing ablate relies on, each cheap (no SLURM, no root):
  isa_refuse: a binary built for instruction sets the CPU lacks refuses at start-up with one
    line naming them, exit 4, instead of dying with SIGILL (tests/isa_probe.c: built for
    AMD's XOP, which no current CPU has, and executing an XOP instruction in main);
  isa_recorded: the build's ISA level (ABLATE_ARCH) is in every results file (c_flags);
  versions: one version, CMakeLists.txt's project(VERSION): ablate, ablate-submit and
    ablate-report print it (ablate with the ISA level it was built for), CITATION.cff, CHANGELOG.md and analysis/pyproject.toml say it;
  release_reproducible: scripts/release.sh makes the same tarball bytes twice from one
    commit (sorted, the commit's time, owner root), with its SHA-256 file;
  submit_backoff: ablate-submit --wait asks scontrol after 2 s, then twice as long each
    time up to a minute (stand-ins for sbatch, scontrol and sleep: no time passes);
  submit_array_fit: --array N larger than the partition's CPUs hold at once is resized to
    what fits, with a note; a task that cannot fit at all is refused (exit 2);
  release_to_module: the chain a site follows: scripts/release.sh
    makes the tarball of the committed HEAD (in a clean clone, HEAD is the tree); it is
    extracted, configured with the defaults (the portable ISA level; BUILD_TESTING=OFF),
    built and installed to a prefix; the extracted tree and its build are then deleted,
    and in a clean environment (env -i, PATH=/usr/bin:/bin) Debian's Lmod loads the
    installed module, which alone runs, from another directory: `ablate --version` (the
    portable level), the installed smoke test, ablate-report on a small sweep (report.html
    with uPlot in it) and `ablate-submit --dry-run` (the prefix's ablate and batch scripts).
    Skips without git, lmod, or GPT-2's vocabulary and uPlot (which the install carries).
"""
import glob
import os
import re
import shutil
import stat
import subprocess
import tarfile

import common as C

SUBMIT = os.path.join(C.SOURCE_DIR, "slurm", "submit")
REPORT = os.path.join(C.SOURCE_DIR, "analysis", "ablate-report")


def cmake_version():
    with open(os.path.join(C.SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"^project\(ablate VERSION (\S+)", f.read(), re.M).group(1)


def test_isa_refuse():
    probe = os.environ.get("ABLATE_ISA_PROBE")
    if not probe or not os.path.exists(probe):
        raise C.Skip("no isa_probe (not an x86-64 build)")
    with open("/proc/cpuinfo") as f:
        flags = [l for l in f if l.startswith("flags")][:1]
    if flags and " xop" in flags[0]:
        raise C.Skip("this CPU has XOP: the probe's level is not missing here")
    r = subprocess.run([probe], capture_output=True, text=True, timeout=30)
    C.log("  isa_probe: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    assert r.returncode == 4, "exit %d (-4 is SIGILL: the check did not run)" % r.returncode
    assert "main ran" not in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "built for bdver4" in lines[0] and "lacks" in lines[0] and "XOP" in lines[0] \
        and "FMA4" in lines[0] and "ABLATE_ARCH" in lines[0], lines[0]
    assert "AVX2," not in lines[0]  # only what is missing here (this CPU has AVX2 in CI)


def test_isa_recorded():
    arch = os.environ.get("ABLATE_ARCH_BUILT", "")
    with C.workdir("isa_recorded") as d:
        spec = C.write(os.path.join(d, "s.yaml"),
                       C.micro_spec(C.corpus_path(d), steps=1, seeds=(0,), eval_every=1,
                                    sample_tokens=0))
        out = os.path.join(d, "s.h5")
        C.run(["run", spec, "-o", out], expect_rc=0)
        import h5py
        with h5py.File(out, "r") as f:
            flags = f.attrs["c_flags"]
        flags = flags.decode() if isinstance(flags, bytes) else str(flags)
        C.log("  c_flags: %s" % flags)
        if arch and arch != "none":
            assert "-march=%s" % arch in flags.split(), (arch, flags)
        else:
            assert "-march=" not in flags, flags


def test_versions():
    v = cmake_version()
    for cmd in ([C.BIN, "--version"], [SUBMIT, "--version"], [REPORT, "--version"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and re.search(r"\b%s\b" % re.escape(v), r.stdout), \
            (cmd, r.returncode, r.stdout, r.stderr)
    arch = os.environ.get("ABLATE_ARCH_BUILT")
    if arch:  # and the level it was built for
        r = subprocess.run([C.BIN, "--version"], capture_output=True, text=True, timeout=60)
        assert ("built for %s)" % arch) in r.stdout, r.stdout
    with open(os.path.join(C.SOURCE_DIR, "CITATION.cff")) as f:
        assert re.search(r"^version: %s$" % re.escape(v), f.read(), re.M), "CITATION.cff"
    with open(os.path.join(C.SOURCE_DIR, "analysis", "pyproject.toml")) as f:
        assert re.search(r'^version = "%s"$' % re.escape(v), f.read(), re.M), "pyproject.toml"
    with open(os.path.join(C.SOURCE_DIR, "CHANGELOG.md")) as f:
        text = f.read()
    assert re.search(r"^## (Unreleased|%s)\b" % re.escape(v), text, re.M), "CHANGELOG.md"
    assert re.search(r"^## %s\b" % re.escape(v), text, re.M), "CHANGELOG.md has no " + v


def test_release_reproducible():
    if not os.path.isdir(os.path.join(C.SOURCE_DIR, ".git")):
        raise C.Skip("not a git checkout")
    script = os.path.join(C.SOURCE_DIR, "scripts", "release.sh")
    with C.workdir("release") as d:
        outs = []
        for i in (1, 2):
            o = os.path.join(d, "out%d" % i)
            r = subprocess.run(["bash", script, "HEAD", "-o", o], cwd=C.SOURCE_DIR,
                               capture_output=True, text=True, timeout=300)
            C.log("  release.sh (%d): exit %d\n%s%s" % (i, r.returncode, r.stdout, r.stderr))
            assert r.returncode == 0, r.stderr
            tars = glob.glob(os.path.join(o, "ablate-*.tar.gz"))
            assert len(tars) == 1, os.listdir(o)
            outs.append(tars[0])
        a, b = (open(p, "rb").read() for p in outs)
        assert a == b, "two tarballs of one commit differ"
        sha = open(outs[0] + ".sha256").read().split()
        import hashlib
        assert sha[0] == hashlib.sha256(a).hexdigest() and sha[1] == os.path.basename(outs[0])
        with tarfile.open(outs[0]) as t:
            members = t.getmembers()
        names = [m.name for m in members]
        top = names[0].split("/")[0]
        assert top.startswith("ablate-%s" % cmake_version()), top
        for must in ("CMakeLists.txt", "LICENSE", "CITATION.cff", "CHANGELOG.md",
                     "cmake/git_rev.txt", "src/cli/main.c"):
            assert "%s/%s" % (top, must) in names, must
        assert len({m.mtime for m in members}) == 1 and {m.uid for m in members} == {0}


FAKE_SBATCH = """#!/bin/sh
n=$(cat "$FAKE_DIR/jobs" 2>/dev/null || echo 100); n=$((n + 1)); echo $n > "$FAKE_DIR/jobs"
echo $n
"""
# RUNNING for the first FAKE_POLLS questions about a job, then COMPLETED
FAKE_SCONTROL = """#!/bin/sh
[ "$1 $2" = "show config" ] && exit 1
echo "$*" >> "$FAKE_DIR/scontrol.log"
n=$(wc -l < "$FAKE_DIR/scontrol.log")
if [ "$n" -le "$FAKE_POLLS" ]; then echo "JobId=$4 JobState=RUNNING"; else echo "JobId=$4 JobState=COMPLETED"; fi
"""
FAKE_SLEEP = """#!/bin/sh
echo "$1" >> "$FAKE_DIR/sleeps"
"""
FAKE_SINFO = """#!/bin/sh
# a default partition "debug" of $FAKE_CPUS CPUs, 1 hour
case "$*" in
*%P*) echo "debug* 0/$FAKE_CPUS/0/$FAKE_CPUS 1:00:00" ;;
*) echo "0/$FAKE_CPUS/0/$FAKE_CPUS 1:00:00" ;;
esac
"""


def fake_slurm(d, cpus=""):
    b = os.path.join(d, "bin")
    os.makedirs(b)
    for name, text in (("sbatch", FAKE_SBATCH), ("scontrol", FAKE_SCONTROL),
                       ("sleep", FAKE_SLEEP), ("sinfo", FAKE_SINFO if cpus else "#!/bin/sh\nexit 1\n")):
        p = C.write(os.path.join(b, name), text)
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)
    return dict(C.ENV, ABLATE_BIN=C.BIN, PATH=b + os.pathsep + C.ENV.get("PATH", ""),
                FAKE_DIR=d, FAKE_POLLS="9", FAKE_CPUS=str(cpus))


def test_submit_backoff():
    with C.workdir("submit_backoff") as d:
        env = fake_slurm(d)
        C.write(os.path.join(d, "t.yaml"), C.micro_spec(C.corpus_path(d), steps=1, seeds=(0,)))
        r = subprocess.run([SUBMIT, "t.yaml", "-o", "t.h5", "--wait"], cwd=d, env=env,
                           capture_output=True, text=True, timeout=120)
        C.log("  submit --wait: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        with open(os.path.join(d, "sleeps")) as f:
            sleeps = [int(x) for x in f.read().split()]
        C.log("  sleeps: %s" % sleeps)
        # 9 answers RUNNING (the two jobs' questions together), then both COMPLETED
        assert sleeps[:6] == [2, 4, 8, 16, 32, 60], sleeps
        assert all(s == 60 for s in sleeps[5:]), sleeps


def test_submit_array_fit():
    with C.workdir("submit_array_fit") as d:
        env = fake_slurm(d, cpus=8)
        C.write(os.path.join(d, "t.yaml"), C.micro_spec(C.corpus_path(d), steps=1,
                                                         seeds=tuple(range(12))))

        def submit(*args):
            r = subprocess.run([SUBMIT, "t.yaml", "-o", "t.h5", "--dry-run"] + list(args),
                               cwd=d, env=env, capture_output=True, text=True, timeout=120)
            C.log("  submit %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
            return r
        # 12 runs / 3 tasks: 4 a task, 5 ranks each: 8 CPUs hold one such task at once
        r = submit("--array", "3")
        assert r.returncode == 0 and " --array=1-1 " in r.stdout, r.stdout
        assert "8 CPUs hold 1 task(s) of 5 rank(s)" in r.stderr and "submitting --array 1" in r.stderr, r.stderr
        # 2 ranks x 2 CPUs: 2 tasks fit at once
        r = submit("--array", "6", "--ranks", "2", "--cpus-per-task", "2")
        assert r.returncode == 0 and " --array=1-2 " in r.stdout, r.stdout
        # what fits is left alone
        r = submit("--array", "4", "--ranks", "2")
        assert r.returncode == 0 and " --array=1-4 " in r.stdout and "note: --array" not in r.stderr, r.stderr
        # one task larger than the partition: refused, nothing submitted
        r = submit("--array", "2", "--ranks", "5", "--cpus-per-task", "2")
        assert r.returncode == 2 and "does not fit the partition's 8 CPUs" in r.stderr, r.stderr
        assert "--array=" not in r.stdout


LMOD_INIT = "/usr/share/lmod/lmod/init/bash"

# Run with env -i (test_release_to_module): only what a user's login shell has, and the
# module. The sweep is the smoke test's (2 runs of 6 steps), for a report and a dry run.
CLEAN_ENV_SCRIPT = r"""set -eu
source /usr/share/lmod/lmod/init/bash
module use "$PREFIX/share/ablate/modulefiles"
module load ablate
mkdir -p "$WORK/elsewhere" && cd "$WORK/elsewhere"
found=$(command -v ablate) || { echo "clean: module load ablate put no ablate on PATH ($PATH)"; exit 1; }
echo "which: $found"
version=$(ablate --version)
echo "version: $version"
bash "$ABLATE_ROOT/share/ablate/tests/smoke.sh"
cat "$ABLATE_ROOT"/share/ablate/docs/*.md > corpus.txt
cat > s.yaml <<SPEC
description: release_to_module
data: {path: "$PWD/corpus.txt", tokenizer: char, val_fraction: 0.1}
base:
  preset: micro
  train: {steps: 6, batch_size: 4, eval_every: 3, eval_tokens: 256}
  sample: {prompt: "The", tokens: 4}
variants:
  baseline: {}
  gelu: {model.activation: gelu}
seeds: 1
SPEC
ablate run s.yaml -o s.h5 > run.txt 2>&1 || { cat run.txt; exit 1; }
ablate-report s.h5 -o report > report.txt 2>&1 || { cat report.txt; exit 1; }
mkdir sub
ablate-submit s.yaml -o sub/s.h5 --dry-run > dry.txt
echo "clean: all ran"
"""


def x86_64_v3_missing():
    """The x86-64-v3 features this CPU lacks (the default level's), from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return []
    return [x for x in ("avx2", "fma", "bmi2", "movbe") if x not in flags]


def test_release_to_module():
    import hashlib
    import platform
    import time
    if not os.path.exists(os.path.join(C.SOURCE_DIR, ".git")):
        raise C.Skip("not a git checkout")
    if not os.path.isfile(LMOD_INIT):
        raise C.Skip("no lmod (%s; scripts/install-deps.sh installs it)" % LMOD_INIT)
    vocab = os.environ.get("ABLATE_GPT2_VOCAB") or os.path.join(C.SOURCE_DIR, "data", "gpt2")
    uplot = os.environ.get("ABLATE_UPLOT") or os.path.join(C.SOURCE_DIR, "data", "uplot")
    for f in (os.path.join(vocab, "encoder.json"), os.path.join(uplot, "uPlot.iife.min.js")):
        if not os.path.isfile(f):
            raise C.Skip("no %s (scripts/install-deps.sh fetches it)" % f)
    # the default level: x86-64-v3 on x86-64 (cmake/AblateArch.cmake), else none
    level = "x86-64-v3" if platform.machine() in ("x86_64", "AMD64", "amd64") else "none"
    if level == "x86-64-v3" and x86_64_v3_missing():
        raise C.Skip("this CPU lacks %s: the default level's binary refuses to start here"
                     % ", ".join(x86_64_v3_missing()))
    t0 = time.monotonic()

    def step(what, cmd, timeout, **kw):
        t = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        C.log("  %s: exit %d, %.1f s" % (what, r.returncode, time.monotonic() - t))
        if r.returncode != 0:
            C.log(r.stdout[-4000:] + r.stderr[-4000:])
        assert r.returncode == 0, "%s failed (exit %d)" % (what, r.returncode)
        return r

    with C.workdir("release_to_module") as d:
        # 1. the release tarball of HEAD
        dist = os.path.join(d, "dist")
        step("release.sh HEAD", ["bash", os.path.join(C.SOURCE_DIR, "scripts", "release.sh"),
                                 "HEAD", "-o", dist], 300, cwd=C.SOURCE_DIR)
        tars = glob.glob(os.path.join(dist, "ablate-*.tar.gz"))
        assert len(tars) == 1, "release.sh wrote %s, not one tarball" % os.listdir(dist)
        with open(tars[0], "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        with open(tars[0] + ".sha256") as f:
            assert f.read().split() == [sha, os.path.basename(tars[0])], "its .sha256"
        # 2. extract, configure with the defaults, build, install
        with tarfile.open(tars[0]) as t:
            top = t.getnames()[0].split("/")[0]
        step("tar xzf", ["tar", "xzf", tars[0], "-C", d], 120)
        src = os.path.join(d, top)
        with open(os.path.join(src, "CMakeLists.txt")) as f:
            version = re.search(r"^project\(ablate VERSION (\S+)", f.read(), re.M).group(1)
        assert top.startswith("ablate-%s" % version), (top, version)
        build, prefix = os.path.join(d, "build"), os.path.join(d, "prefix")
        step("configure", ["cmake", "-S", src, "-B", build, "-DBUILD_TESTING=OFF",
                           "-DABLATE_GPT2_VOCAB=" + vocab, "-DABLATE_UPLOT=" + uplot], 300)
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
        assert re.search(r"^ABLATE_ARCH:\w+=%s$" % re.escape(level), cache, re.M), \
            "the default ABLATE_ARCH is not %s" % level
        step("build", ["cmake", "--build", build, "-j%d" % len(os.sched_getaffinity(0))], 600)
        step("install", ["cmake", "--install", build, "--prefix", prefix], 300)
        # from here on the prefix alone: nothing left of the tree it was built from
        shutil.rmtree(src)
        shutil.rmtree(build)
        # 3. the module, in a clean environment
        script = C.write(os.path.join(d, "clean.sh"), CLEAN_ENV_SCRIPT)
        env = ["HOME=" + d, "USER=nobody", "PATH=/usr/bin:/bin", "PREFIX=" + prefix,
               "WORK=" + d]
        if os.geteuid() == 0:  # Open MPI refuses root without these (CI's containers)
            env += ["OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"]
        r = step("module load ablate; smoke, report, submit",
                 ["env", "-i"] + env + ["bash", "--noprofile", "--norc", script], 600, cwd=d)
        C.log(r.stdout[-3000:])
        out = r.stdout
        assert "clean: all ran" in out
        assert "which: %s/bin/ablate\n" % prefix in out, "the module's PATH: " + out[:300]
        assert "version: ablate %s " % version in out and "built for %s)" % level in out, out
        assert "smoke: all ran (%s" % prefix in out, "the smoke test"
        here = os.path.join(d, "elsewhere")
        with open(os.path.join(here, "report", "report.html")) as f:
            html = f.read()
        with open(os.path.join(prefix, "share", "ablate", "uplot", "uPlot.iife.min.js")) as f:
            js = f.read()
        assert js.replace("</", "<\\/") in html, "report.html does not embed uPlot"
        assert '"gelu"' in html, "report.html has not the sweep's variants"
        with open(os.path.join(here, "dry.txt")) as f:
            dry = f.read()
        for want in ("ABLATE_BIN=%s/bin/ablate" % prefix,
                     "%s/libexec/ablate/ablate-sweep.sbatch" % prefix):
            assert want in dry, (want, dry)
    C.log("  release_to_module: %.1f s in all" % (time.monotonic() - t0))


if __name__ == "__main__":
    C.main([("isa_refuse", test_isa_refuse), ("isa_recorded", test_isa_recorded),
            ("versions", test_versions), ("release_reproducible", test_release_reproducible),
            ("submit_backoff", test_submit_backoff), ("submit_array_fit", test_submit_array_fit),
            ("release_to_module", test_release_to_module)])
