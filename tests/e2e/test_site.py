"""What a site installing ablate relies on (issue 42), each cheap (no SLURM, no root):
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
    what fits, with a note; a task that cannot fit at all is refused (exit 2).
"""
import glob
import os
import re
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


if __name__ == "__main__":
    C.main([("isa_refuse", test_isa_refuse), ("isa_recorded", test_isa_recorded),
            ("versions", test_versions), ("release_reproducible", test_release_reproducible),
            ("submit_backoff", test_submit_backoff), ("submit_array_fit", test_submit_array_fit)])
