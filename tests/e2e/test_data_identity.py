"""Data identity: a sweep never mixes two data files silently.

Cases:
  tac_resume:  a sweep stopped with SIGUSR1 once its run has a checkpoint; the data file is
               replaced by its lines in reverse order (same characters, other text);
               --resume is refused (exit 2, one line naming both files' digests and sizes)
               and nothing written before is touched (journal bytes, the checkpoint);
               then --accept-data-change: the run starts over from step 0 on the new data
               (never partly on each) and the new identity is journaled;
  charset:     a finished sweep, the data replaced by a text with another character set,
               --resume with one more seed is refused;
  join:        two --join processes started in different directories, each with its own
               data.txt (the spec names "data.txt"): the second is refused;
  worker_copy: mpirun with rank 0 and the worker in different directories (two nodes, two
               copies of data.txt): the worker refuses its copy, the run fails;
  accept:      --resume --accept-data-change trains the new seed on the new data; /runs
               shows each run's data digest and puts the two runs in different groups."""
import glob
import hashlib
import os
import signal
import struct
import subprocess
import sys
import time

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def corpus_text():
    with open(C.corpus_path()) as f:
        return f.read()


def tac(text):
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(reversed(lines))


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def journal_bytes(out):
    with open(C.journal_path(out), "rb") as f:
        return f.read()


def expect_refused(args, old_sha, new_sha, cwd=None):
    rc, _, err = C.run(args, expect_rc=None, tag="refused", cwd=cwd, timeout=120)
    assert rc == 2, "expected exit 2, got %s:\n%s" % (rc, err)
    lines = [l for l in err.splitlines() if old_sha[:12] in l and new_sha[:12] in l]
    assert len(lines) == 1, ("expected one line naming both digests (%s..., %s...):\n%s"
                             % (old_sha[:12], new_sha[:12], err))
    return lines[0]


def tac_resume(d):
    data = C.write(os.path.join(d, "data.txt"), corpus_text())
    old = sha(data)
    spec = C.write(os.path.join(d, "spec.yaml"),
                   C.micro_spec(data, steps=3000, seeds=(0,), eval_every=1000))
    out = os.path.join(d, "out.h5")
    with C.Job(["run", spec, "-o", out, "--checkpoint-every", "0.2"], tag="tac") as j:
        t_end = time.monotonic() + 120
        while not glob.glob(out + ".d/ckpt/*.ckpt"):  # wait for a checkpoint on disk
            assert j.poll() is None, "sweep ended early:\n%s" % j.stderr()
            assert time.monotonic() < t_end, "no checkpoint:\n%s" % j.stderr()
            time.sleep(0.05)
        j.signal_leader_group(signal.SIGUSR1)
        rc, err = j.finish(120)
        assert rc == 3, "SIGUSR1: exit %s\n%s" % (rc, err)
    C.write(data, tac(corpus_text()))
    new = sha(data)
    assert new != old and sorted(corpus_text()) == sorted(open(data).read())
    before = journal_bytes(out)
    ckpts = sorted(glob.glob(out + ".d/ckpt/*.ckpt"))
    line = expect_refused(["run", spec, "-o", out, "--resume"], old, new)
    C.log("refused: " + line)
    assert data in line, line
    assert journal_bytes(out) == before, "the refused resume changed the journal"
    assert sorted(glob.glob(out + ".d/ckpt/*.ckpt")) == ckpts, "checkpoints changed"
    # accepted: the checkpointed run starts over on the new data (never partly on each)
    jp = C.journal_path(out)
    with C.Job(["run", spec, "-o", out, "--resume", "--accept-data-change",
                "--checkpoint-every", "0.2"], tag="tac-accept") as j:
        t_end = time.monotonic() + 120
        while not any(typ == 6 and struct.unpack_from("<I", p)[0] == 2
                      for typ, _, p in C.journal_records(jp)[0]):  # attempt 2 checkpointed
            assert j.poll() is None, "resume ended early:\n%s" % j.stderr()
            assert time.monotonic() < t_end, "no checkpoint:\n%s" % j.stderr()
            time.sleep(0.05)
        j.signal_leader_group(signal.SIGUSR1)
        rc, err = j.finish(120)
        assert rc == 3, "SIGUSR1: exit %s\n%s" % (rc, err)
    assert old[:12] in err and new[:12] in err, err
    recs = C.journal_records(jp)[0]
    begins = [struct.unpack_from("<Iiq", p) for typ, _, p in recs if typ == 3]
    assert begins[-1][0] == 2 and begins[-1][2] == 0, \
        "attempt 2 resumed from step %d of the old data" % begins[-1][2]
    assert sum(1 for typ, _, _ in recs if typ == 9) == 2, "the accepted data is not journaled"


def finished_sweep(d, name, seeds=(0,)):
    data = C.write(os.path.join(d, "data.txt"), corpus_text())
    spec = C.write(os.path.join(d, "spec.yaml"), C.micro_spec(data, steps=20, seeds=seeds,
                                                              eval_every=10, stats_every=10))
    out = os.path.join(d, "out.h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag=name)
    return data, out


def charset(d):
    data, out = finished_sweep(d, "charset")
    old = sha(data)
    C.write(data, corpus_text().translate({ord(c): None for c in "zZqQxX"}))  # fewer characters
    new = sha(data)
    spec2 = C.write(os.path.join(d, "spec2.yaml"),
                    C.micro_spec(data, steps=20, seeds=(0, 1), eval_every=10, stats_every=10))
    before = journal_bytes(out)
    line = expect_refused(["run", spec2, "-o", out, "--resume"], old, new)
    C.log("refused: " + line)
    assert journal_bytes(out) == before, "the refused resume changed the journal"
    with h5py.File(out, "r") as f:
        assert len(f["runs"]) == 1
    # the flag means nothing without a sweep to differ from
    rc, _, err = C.run(["run", spec2, "-o", os.path.join(d, "new.h5"), "--accept-data-change"],
                       tag="flag")
    assert rc == 2 and "--accept-data-change applies to --resume and --join" in err, (rc, err)
    assert not os.path.exists(os.path.join(d, "new.h5.d")), "a refused command wrote files"


def join(d):
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    os.makedirs(a)
    os.makedirs(b)
    da = C.write(os.path.join(a, "data.txt"), corpus_text())
    db = C.write(os.path.join(b, "data.txt"), tac(corpus_text()))
    spec = C.write(os.path.join(d, "spec.yaml"),
                   C.micro_spec("data.txt", steps=20, seeds=(0, 1), eval_every=10,
                                stats_every=10))
    out = os.path.join(d, "out.h5")
    C.run(["run", spec, "-o", out, "--join"], cwd=a, expect_rc=0, tag="join-a")
    procs = sorted(os.listdir(out + ".d/join/procs"))
    line = expect_refused(["run", spec, "-o", out, "--join"], sha(da), sha(db), cwd=b)
    C.log("refused: " + line)
    assert sorted(os.listdir(out + ".d/join/procs")) == procs, "the refused process left files"


def worker_copy(d):
    """mpirun with rank 0 in one directory and the worker in another (as on two nodes with
    different copies of data.txt): the worker refuses to train on its copy; the run fails
    with a message naming the file and both digests, nothing trains on the other data."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    os.makedirs(a)
    os.makedirs(b)
    da = C.write(os.path.join(a, "data.txt"), corpus_text())
    db = C.write(os.path.join(b, "data.txt"), tac(corpus_text()))
    spec = C.write(os.path.join(d, "spec.yaml"),
                   C.micro_spec("data.txt", steps=20, seeds=(0,), eval_every=10,
                                stats_every=10))
    out = os.path.join(d, "out.h5")
    args = [C.BIN, "run", spec, "-o", out]
    cmd = [C.MPIRUN, "--oversubscribe", "-n", "1", "-wdir", a] + args + \
          [":", "-n", "1", "-wdir", b] + args
    p = subprocess.run(cmd, env=C.ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, universal_newlines=True)
    assert p.returncode == 1, "expected exit 1 (a run failed), got %s:\n%s" % (p.returncode,
                                                                             p.stderr)
    with h5py.File(out, "r") as f:
        r = f["runs"][0]
        msg = r["message"].decode() if isinstance(r["message"], bytes) else str(r["message"])
        assert r["status"].decode() == "failed", r["status"]
        assert sha(db)[:12] in msg and sha(da)[:12] in msg and "data.txt" in msg, msg
        assert len(f["steps"]) == 0, "trained on the worker's copy"
    C.log("failed as expected: " + msg)


def accept(d):
    data, out = finished_sweep(d, "accept")
    old = sha(data)
    C.write(data, tac(corpus_text()))
    new = sha(data)
    spec2 = C.write(os.path.join(d, "spec2.yaml"),
                    C.micro_spec(data, steps=20, seeds=(0, 1), eval_every=10, stats_every=10))
    rc, _, err = C.run(["run", spec2, "-o", out, "--resume", "--accept-data-change"],
                       expect_rc=0, tag="accept")
    assert old[:12] in err and new[:12] in err, "the accepted change is not reported:\n" + err
    with h5py.File(out, "r") as f:
        runs = f["runs"][()]
        names = runs.dtype.names
        assert "data_sha256" in names, names
        by_seed = {int(r["seed"]): r for r in runs}
        assert by_seed[0]["data_sha256"].decode() == old
        assert by_seed[1]["data_sha256"].decode() == new
        assert by_seed[0]["group"] != by_seed[1]["group"], "runs of different data pooled"
        for r in runs:  # the model that was trained
            assert int(r["model.vocab_size"]) == int(r["data_vocab_size"])


def in_workdir(fn):
    def run():
        with C.workdir("ident-" + fn.__name__) as d:
            fn(d)
    return fn.__name__, run


if __name__ == "__main__":
    C.main([in_workdir(f) for f in (tac_resume, charset, join, worker_copy, accept)])
