"""slurm/submit without a SLURM (tests/e2e/test_slurm.py runs the jobs on one):
  max_array_size: `slurm/submit --array N` and SLURM's MaxArraySize. SLURM
    refuses an array whose largest index reaches MaxArraySize (default 1001: at most 1000
    tasks); submit says so before anything is submitted: with the site's value (scontrol
    show config) it refuses, without one it notes the default.
  data_check: what the check saw goes to the job: the dry run's sweep job
    gets the spec's variables (--spec-env NAME=VALUE as set here, a comma included,
    --spec-unset NAME as unset here; ablate's ABLATE_CACHE_DIR when set) and the identity
    of its data (--expect-data, the SHA-256 'ablate plan --json' gives); the batch script, run by hand with those options but
    another file in ABLATE_DATA, refuses before it starts anything: one line naming the
    variable, the file and both digests, "status 2 (data check)", exit 2; and when the file
    changes after that check, before ablate run reads it, ablate run refuses it
    (--expect-data SHA256=PATH, passed on by the job), exit 2, nothing trained.
  finish_damaged: the finish job run by hand on a sweep whose journal has
    one flipped byte: `ablate view` exits 3 and names the run; the job stops there with exit
    3 ("damaged", submit again to resume), writes no report (it wrote one over the damage).

Cheap by design: no SLURM is needed; stand-ins for scontrol and sinfo on PATH answer as a
site would, and every submit is a --dry-run.
"""

import hashlib
import os
import shlex
import stat
import subprocess

import common as C

SUBMIT = os.path.join(C.SOURCE_DIR, "slurm", "submit")
SWEEP = os.path.join(C.SOURCE_DIR, "slurm", "ablate-sweep.sbatch")

SCONTROL = """#!/bin/sh
# scontrol show config as a site with MaxArraySize $FAKE_MAX_ARRAY ("" = no controller)
[ "$1 $2" = "show config" ] || exit 1
[ -n "$FAKE_MAX_ARRAY" ] || { echo "slurm_load_ctl_conf error: Unable to contact slurm controller" >&2; exit 1; }
printf 'Configuration data as of 2026-01-01T00:00:00\\nMailProg                = /bin/mail\\n'
printf 'MaxArraySize            = %s\\nMaxJobCount             = 10000\\n' "$FAKE_MAX_ARRAY"
"""


def fake_bin(d):
    b = os.path.join(d, "bin")
    os.makedirs(b)
    for name, text in (("scontrol", SCONTROL), ("sinfo", "#!/bin/sh\nexit 0\n")):
        p = C.write(os.path.join(b, name), text)
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)
    return b


def submit(d, b, array, max_array):
    env = dict(C.ENV, ABLATE_BIN=C.BIN, PATH=b + os.pathsep + C.ENV.get("PATH", ""),
               FAKE_MAX_ARRAY=max_array)
    r = subprocess.run([SUBMIT, "t.yaml", "-o", "t.h5", "--dry-run", "--array", str(array)],
                       cwd=d, env=env, capture_output=True, text=True, timeout=120)
    C.log("  --array %d, MaxArraySize %r: exit %d\n%s%s"
          % (array, max_array, r.returncode, r.stdout[-600:], r.stderr))
    return r.returncode, r.stdout, r.stderr


def test_max_array_size():
    with C.workdir("submit_array") as d:
        check(d)


def check(d):
    b = fake_bin(d)
    C.write(os.path.join(d, "t.yaml"), C.micro_spec(C.corpus_path(d), steps=1, seeds=(0, 1)))
    # the default: 1000 tasks fit, 1001 do not; the message names the value and its source
    rc, out, err = submit(d, b, 1000, "1001")
    assert rc == 0 and " --array=1-1000 " in out and "MaxArraySize" not in err, err
    rc, out, err = submit(d, b, 1001, "1001")
    assert rc == 2 and "MaxArraySize is 1001 (scontrol show config" in err and \
        "at most 1000 tasks" in err and "default is 1001" in err, err
    assert "--array=" not in out, out
    # a site that raised it
    rc, out, err = submit(d, b, 5000, "10001")
    assert rc == 0 and " --array=1-5000 " in out, err
    rc, out, err = submit(d, b, 20000, "10001")
    assert rc == 2 and "MaxArraySize is 10001" in err and "at most 10000 tasks" in err, err
    # no controller to ask: the default is noted, the dry run goes on
    rc, out, err = submit(d, b, 1500, "")
    assert rc == 0 and "SLURM's default MaxArraySize is 1001" in err and \
        " --array=1-1500 " in out, err
    rc, out, err = submit(d, b, 1000, "")
    assert rc == 0 and "MaxArraySize" not in err, err


def test_array_refusals():
    """--array refuses train.calibrate before anything is submitted (each task runs ablate
    run --join, which does not run it): exit 2, one line naming the key; the same spec
    without --array goes on (dry run). A tune: sweep is submitted as an array (its tasks
    share the tuning under --join), also with replicate:."""
    with C.workdir("submit_refusals") as d:
        b = fake_bin(d)
        base = C.micro_spec(C.corpus_path(d), steps=2, seeds=(0, 1))
        env = dict(C.ENV, ABLATE_BIN=C.BIN, PATH=b + os.pathsep + C.ENV.get("PATH", ""),
                   FAKE_MAX_ARRAY="1001")
        C.write(os.path.join(d, "t.yaml"), base.replace("steps: 2", "seconds: 30, calibrate: 2"))
        rc, out, err = submit(d, b, 4, "1001")
        lines = [l for l in err.splitlines() if l.strip()]
        assert rc == 2 and "train.calibrate:" in err and "not as an array" in err and \
            "nothing submitted" in err and "--array=" not in out, (rc, err, out)
        assert len([l for l in lines if "not as an array" in l]) == 1, lines
        r = subprocess.run([SUBMIT, "t.yaml", "-o", "t.h5", "--dry-run"], cwd=d, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "not as an array" not in r.stderr, r.stderr
        C.write(os.path.join(d, "t.yaml"), base + "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, "
                "seeds: [1000]}\n")
        rc, out, err = submit(d, b, 4, "1001")
        assert rc == 0 and "--array=1-4" in out and "not as an array" not in err, (rc, err, out)
        # ... and so is one with replicate: (every task decides every rung and every look)
        rep = base.replace("seeds: [0, 1]\n", "variants: {baseline: {}, b: {model.n_head: 2}}\n"
                           "replicate: {seeds: {min: 2, max: 3}, resolve: 0.05}\n")
        C.write(os.path.join(d, "t.yaml"), rep + "tune: {knobs: {train.lr: [1.0e-3, 1.0e-2]}, "
                "seeds: [1000]}\n")
        rc, out, err = submit(d, b, 4, "1001")
        assert rc == 0 and "--array=1-4" in out and "not as an array" not in err, (rc, err, out)


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_data_check():
    with C.workdir("submit_data") as d:
        check_data(d)


def check_data(d):
    b = fake_bin(d)
    with open(C.corpus_path(d)) as f:
        text = f.read()
    a = C.write(os.path.join(d, "a.txt"), text)
    other = C.write(os.path.join(d, "other.txt"), text + "\nmore\n")
    C.write(os.path.join(d, "v.yaml"), C.micro_spec(
        "${ABLATE_DATA:-data/tinyshakespeare.txt}", steps=1, seeds=(0,),
        extra_base="model: {activation: \"${ACT_UNSET_HERE:-gelu}\"}")
        .replace('prompt: "ROMEO:"', 'prompt: "${PROMPT_VAR}"'))
    env = dict(C.ENV, ABLATE_BIN=C.BIN, PATH=b + os.pathsep + C.ENV.get("PATH", ""),
               FAKE_MAX_ARRAY="", ABLATE_DATA=a, PROMPT_VAR="ROMEO, the king")
    env.pop("ACT_UNSET_HERE", None)
    env.pop("ABLATE_GPT2_VOCAB", None)  # (set, it would go to the job, as the cache dir does)
    env["ABLATE_CACHE_DIR"] = os.path.join(d, "cache")
    r = subprocess.run([SUBMIT, "v.yaml", "-o", "v.h5", "--dry-run"], cwd=d, env=env,
                       capture_output=True, text=True, timeout=120)
    C.log("  dry run: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    line = [l for l in r.stdout.splitlines() if "ablate-sweep.sbatch" in l]
    assert r.returncode == 0 and line, r.stdout + r.stderr
    words = shlex.split(line[0])
    args = words[words.index(SWEEP) + 3:]
    sha = sha256_of(a)
    opts = {(k, v) for k, v in zip(args, args[1:]) if k.startswith("--spec-")}
    assert opts == {("--spec-env", "ABLATE_DATA=" + a), ("--spec-env", "PROMPT_VAR=ROMEO, the king"),
                    ("--spec-unset", "ACT_UNSET_HERE"),
                    ("--spec-env", "ABLATE_CACHE_DIR=" + env["ABLATE_CACHE_DIR"])}, args
    expect = [v for k, v in zip(args, args[1:]) if k == "--expect-data"]
    assert len(expect) == 1 and '"sha256":"%s"' % sha in expect[0] and \
        expect[0].endswith('"path":"%s"}' % a), expect
    # the job, with that check but another file in ABLATE_DATA (run here, outside SLURM:
    # it stops before it launches anything)
    job = [a2.replace("ABLATE_DATA=" + a, "ABLATE_DATA=" + other) for a2 in args]
    r = subprocess.run(["bash", SWEEP, "v.yaml", os.path.join(d, "v.h5")] + job, cwd=d,
                       env=env, capture_output=True, text=True, timeout=120)
    C.log("  the job: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    lines = [l for l in r.stdout.splitlines() if l.startswith("ablate job: data check: ")]
    assert r.returncode == 2 and r.stdout.rstrip().endswith("status 2 (data check)"), r.stdout
    assert len(lines) == 1 and all(s in lines[0] for s in (
        "ABLATE_DATA=" + other, other, a, sha, sha256_of(other))), r.stdout
    assert not os.path.exists(os.path.join(d, "v.h5.d")), "the job trained"
    # the check passes, then the file changes before ablate run reads it (a wrapper binary
    # appends to it as `run` starts): ablate run itself refuses (--expect-data), nothing trained
    wrapper = C.write(os.path.join(b, "ablate-late-change"),
                      "#!/bin/sh\n[ \"$1\" = run ] && echo late >> '%s'\nexec '%s' \"$@\"\n"
                      % (a, C.BIN))
    os.chmod(wrapper, 0o755)
    r = subprocess.run(["bash", SWEEP, "v.yaml", os.path.join(d, "v.h5")] + args, cwd=d,
                       env=dict(env, ABLATE_BIN=wrapper), capture_output=True, text=True,
                       timeout=120)
    C.log("  late change: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    text = r.stdout + r.stderr
    assert r.returncode == 2 and "--expect-data: %s is not the data that was checked" % a in text \
        and sha in text, text
    assert not os.path.exists(os.path.join(d, "v.h5.d", "journal")), "the job trained"


FINISH = os.path.join(C.SOURCE_DIR, "slurm", "ablate-finish.sbatch")


def test_finish_damaged():
    with C.workdir("finish_damaged") as d:
        spec = C.write(os.path.join(d, "f.yaml"),
                       C.micro_spec(C.corpus_path(d), steps=10, seeds=(0, 1), eval_every=5,
                                    stats_every=5, sample_tokens=4))
        out = os.path.join(d, "f.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="sweep")
        _, _, _, victim = C.damage_record(C.journal_path(out), 4, 30, 0x5A)
        report = os.path.join(d, "report")
        env = dict(C.ENV, ABLATE_BIN=C.BIN, ABLATE_REPORT="/bin/true")
        r = subprocess.run(["bash", FINISH, out, report], cwd=d, env=env, capture_output=True,
                           text=True, timeout=120)
        C.log("  finish: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        text = r.stdout + r.stderr
        assert r.returncode == 3, "finish over a damaged journal: exit %d" % r.returncode
        assert "journal is damaged" in text and "no report" in text, text
        assert victim in text, text  # the view's line names the run
        assert r.stdout.rstrip().endswith("status 3"), r.stdout


if __name__ == "__main__":
    C.main([("max_array_size", test_max_array_size), ("data_check", test_data_check),
            ("finish_damaged", test_finish_damaged), ("array_refusals", test_array_refusals)])
