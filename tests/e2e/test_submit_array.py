"""issue 18 item 5: `slurm/submit --array N` and SLURM's MaxArraySize. SLURM refuses an
array whose largest index reaches MaxArraySize (default 1001: at most 1000 tasks); submit
says so before anything is submitted: with the site's value (scontrol show config) it
refuses, without one it notes the default.

Cheap by design: no SLURM is needed; stand-ins for scontrol and sinfo on PATH answer as a
site would, and every submit is a --dry-run.
"""

import os
import stat
import subprocess

import common as C

SUBMIT = os.path.join(C.SOURCE_DIR, "slurm", "submit")

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


if __name__ == "__main__":
    C.main([("max_array_size", test_max_array_size)])
