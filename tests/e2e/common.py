"""Shared helpers for the end-to-end tests of `ablate run` (tests/e2e/*.py).

Run a test by hand with the Python that has numpy and h5py, e.g.
    ABLATE_BIN=build/ablate /usr/bin/python3 tests/e2e/test_rank_identity.py
Every test file takes its cases as the C tests do (main() and select() below): no argument
runs them all, `--list` names them, `test_join.py hung refused` runs those two; CTest has
each case as its own test (tests/CMakeLists.txt, ablate_py_test: `ctest -R e2e_join.hung`).
CTest provides ABLATE_BIN, ABLATE_TEST_CORPUS, ABLATE_PYTHON and the Open MPI root
variables (tests/CMakeLists.txt); every one of them has a fallback here.

What is here:
  - environment: the ablate binary, an environment for MPI as root, temp dirs, a corpus;
  - specs: a tiny micro-preset spec builder;
  - processes: running ablate (in-process or under mpirun), each in its own session so
    that the whole MPI job (mpirun and its ranks, which get their own process groups)
    can be found, signalled and waited for;
  - the journal (OUT.h5.d/journal) read directly, per src/orchestrator/record/journal.h;
  - OUT.h5 read into comparable structures (runs by id, metric tables keyed by run id,
    timing columns dropped) and compared exactly.
Set ABLATE_E2E_KEEP=1 to keep the temp dirs (they are always kept when a test fails).
"""

import contextlib
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ABLATE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))


# ---------------------------------------------------------------- environment

def ablate_bin():
    """$ABLATE_BIN, else a built ablate under the source tree, else None: importing a test
    needs no binary (`--list` runs without one); main() refuses to run a case without it."""
    b = os.environ.get("ABLATE_BIN")
    if b:
        return os.path.abspath(b)
    for d in ("build-e2e", "build"):
        p = os.path.join(SOURCE_DIR, d, "ablate")
        if os.access(p, os.X_OK):
            return p
    return None


BIN = ablate_bin()
MPIRUN = shutil.which("mpirun") or "mpirun"


def test_env():
    """The environment for ablate: MPI as root allowed (as CTest sets it), oversubscription
    allowed. OPENBLAS_CORETYPE is never touched."""
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    return env


ENV = test_env()


def log(*a):
    print(*a, flush=True)


def workdir_persistent(name):
    """A temp dir that lives until the test process exits (shared references)."""
    import atexit
    d = tempfile.mkdtemp(prefix="ablate-e2e-%s-" % name)
    if not os.environ.get("ABLATE_E2E_KEEP"):
        atexit.register(shutil.rmtree, d, True)
    return d


def _identity(path):
    st = os.stat(path)
    return "%s %d %d %d" % (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)


_SHARED = {}


def shared_sweep(tag, spec_text, timeout=600):
    """An uninterrupted reference sweep several cases compare with: spec_text written to
    SPEC and `ablate run SPEC -o OUT.h5` run in-process to exit 0, once. Returns (SPEC, OUT.h5),
    which the caller only reads.

    CTest runs each case in its own process; so that a reference computed for one case is
    not computed again for the next, CTest gives ABLATE_TEST_CACHE (a directory of the build,
    tests/CMakeLists.txt) and the sweep is kept there, under a lock, by the hash of what
    makes it: the spec's text, the binary's identity (path, inode, size, mtime) and the
    corpus's (every data path the spec names); a rebuilt binary starts the directory afresh.
    Without ABLATE_TEST_CACHE (a test run by hand) it is kept for the process only."""
    import fcntl
    import hashlib
    if (tag, spec_text) in _SHARED:
        return _SHARED[(tag, spec_text)]
    base = os.environ.get("ABLATE_TEST_CACHE")
    if not base:
        d = workdir_persistent(tag)
        _SHARED[(tag, spec_text)] = _run_shared(d, spec_text, timeout)
        return _SHARED[(tag, spec_text)]
    binary = hashlib.sha256(_identity(BIN).encode()).hexdigest()[:16]
    ident = [spec_text, binary] + [_identity(m) for m in re.findall(
        r'path: "([^"]+)"', spec_text) if os.path.exists(m)]
    key = hashlib.sha256("\n".join(ident).encode()).hexdigest()[:16]
    root = os.path.join(base, binary)
    if not os.path.isdir(root):
        # the references of an earlier binary are no use to this one
        for old in os.listdir(base) if os.path.isdir(base) else []:
            shutil.rmtree(os.path.join(base, old), ignore_errors=True)
        os.makedirs(root, exist_ok=True)
    d = os.path.join(root, "%s-%s" % (tag, key))
    with open(d + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent case waits for the first to finish
        if not os.path.exists(os.path.join(d, "complete")):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            _run_shared(d, spec_text, timeout)
            write(os.path.join(d, "complete"), "")
        else:
            log("  reference %s: kept from an earlier case (%s)" % (tag, d))
    _SHARED[(tag, spec_text)] = (os.path.join(d, "spec.yaml"), os.path.join(d, "ref.h5"))
    return _SHARED[(tag, spec_text)]


def _run_shared(d, spec_text, timeout):
    spec, out = write(os.path.join(d, "spec.yaml"), spec_text), os.path.join(d, "ref.h5")
    t0 = time.monotonic()
    run(["run", spec, "-o", out], expect_rc=0, timeout=timeout, tag="ref")
    log("  reference: %.1f s" % (time.monotonic() - t0))
    return spec, out


class Skip(Exception):
    """Raised by a test that cannot run here (e.g. needs root); main() reports it."""


@contextlib.contextmanager
def workdir(name):
    """A fresh temp dir; removed on success unless ABLATE_E2E_KEEP is set, kept on failure."""
    d = tempfile.mkdtemp(prefix="ablate-e2e-%s-" % name)
    ok = False
    try:
        yield d
        ok = True
    finally:
        if ok and not os.environ.get("ABLATE_E2E_KEEP"):
            shutil.rmtree(d, ignore_errors=True)
        else:
            log("  (kept %s)" % d)


_CORPUS_DIR = []


def corpus_path(tmp=None):
    """ABLATE_TEST_CORPUS when it is a readable file, else a generated ~200 KB text (one per
    test process, in a temp dir removed at exit, so every spec of a test names the same
    data path and so plans the same run ids)."""
    p = os.environ.get("ABLATE_TEST_CORPUS")
    if p and os.path.isfile(p) and os.access(p, os.R_OK) and os.path.getsize(p) > 50000:
        return os.path.abspath(p)
    if not _CORPUS_DIR:
        import atexit
        d = tempfile.mkdtemp(prefix="ablate-e2e-corpus-")
        atexit.register(shutil.rmtree, d, True)
        _CORPUS_DIR.append(d)
    out = os.path.join(_CORPUS_DIR[0], "corpus.txt")
    if os.path.exists(out):
        return out
    rng = random.Random(20240601)
    words = ("the and of to my is that in you not with it me his be your this but he have "
             "as so will what her thy all no do shall by if are our lord king good now sir "
             "come well love more let they would night death heart speak hath make").split()
    names = ["ROMEO", "JULIET", "KING HENRY", "FIRST CITIZEN", "MENENIUS", "GLOUCESTER"]
    parts, size = [], 0
    while size < 200_000:
        lines = [names[rng.randrange(len(names))] + ":"]
        for _ in range(rng.randint(1, 5)):
            w = [rng.choice(words) for _ in range(rng.randint(4, 10))]
            w[0] = w[0].capitalize()
            lines.append(" ".join(w) + rng.choice([",", ".", ";", "!", "?"]))
        block = "\n".join(lines) + "\n\n"
        parts.append(block)
        size += len(block)
    with open(out, "w") as f:
        f.write("".join(parts))
    return out


# ---------------------------------------------------------------- specs

def micro_spec(corpus, steps=80, seeds=(0, 1, 2), grid=None, variants=None, eval_every=20,
               stats_every=20, eval_tokens=512, sample_tokens=32, batch_size=8, extra_base=""):
    """A tiny spec. grid/variants: YAML text of those sections' bodies (indented by the
    caller with two spaces), or None."""
    s = [
        "description: ablate e2e test",
        'data: {path: "%s", tokenizer: char, val_fraction: 0.1}' % corpus,
        "base:",
        "  preset: micro",
        "  train: {lr: 1e-2, batch_size: %d, steps: %d, warmup_steps: 5, eval_every: %d, "
        "eval_tokens: %d}" % (batch_size, steps, eval_every, eval_tokens),
        "  stats: {every: %d}" % stats_every,
        '  sample: {prompt: "ROMEO:", tokens: %d}' % sample_tokens,
    ]
    if extra_base:
        s += ["  " + l for l in extra_base.strip("\n").split("\n")]
    if grid:
        s += ["grid:", grid.rstrip("\n")]
    if variants:
        s += ["variants:", variants.rstrip("\n")]
    s.append("seeds: [%s]" % ", ".join(str(x) for x in seeds))
    return "\n".join(s) + "\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------- processes

def command(args, ranks=None):
    """ranks None: ablate in-process (no mpirun); else mpirun -n ranks --oversubscribe."""
    if ranks is None:
        return [BIN] + list(args)
    return [MPIRUN, "-n", str(ranks), "--oversubscribe", BIN] + list(args)


class Job:
    """An ablate (or mpirun) process started in its own session; stdout/stderr go to files."""

    def __init__(self, args, ranks=None, cwd=None, tag="job", env=None, cpu_limit=None):
        """cpu_limit: seconds of CPU time the process may use (RLIMIT_CPU), or None."""
        self.cmd = command(args, ranks)
        self.ranks = ranks
        fd, self.err_path = tempfile.mkstemp(prefix="ablate-e2e-%s-" % tag, suffix=".err")
        os.close(fd)
        self.out_path = self.err_path[:-4] + ".out"
        self._err = open(self.err_path, "w")
        self._out = open(self.out_path, "w")
        self.t0 = time.monotonic()
        limit = None
        if cpu_limit:
            import resource

            def limit():
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit))
        self.proc = subprocess.Popen(self.cmd, stdout=self._out, stderr=self._err, cwd=cwd,
                                     env=dict(ENV, **(env or {})), start_new_session=True,
                                     preexec_fn=limit)
        self.sid = self.proc.pid
        self.rc = None

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def stdout(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def poll(self):
        if self.rc is None:
            self.rc = self.proc.poll()
        return self.rc

    def wait(self, timeout):
        """Waits for the leader; on timeout kills the whole session and raises."""
        try:
            self.rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = self.stacks()
            self.kill_all()
            raise AssertionError("timeout after %.0f s: %s\nstderr:\n%s\n%s"
                                 % (timeout, " ".join(self.cmd), self.stderr()[-3000:], stacks))
        return self.rc

    def pids(self):
        return session_pids(self.sid)

    def stacks(self):
        """Every thread's backtrace of each live ablate rank (gdb, when installed): what a
        hung job was waiting for, in the failure message of the test that timed out."""
        if not shutil.which("gdb"):
            return "(no gdb: no backtraces of the hung ranks)"
        out = []
        for rank, pid in sorted(self.ablate_ranks().items()):
            p = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex",
                                "thread apply all bt 12"], capture_output=True, text=True,
                               timeout=60)
            bt = [l for l in p.stdout.splitlines() if l.startswith(("#", "Thread"))]
            out.append("rank %d (pid %d):\n%s" % (rank, pid, "\n".join(bt[-80:])))
        return "\n".join(out)

    def ablate_ranks(self):
        """{rank: pid} of the live ablate processes of this job."""
        out = {}
        real = os.path.realpath(BIN)
        for pid in self.pids():
            try:
                if os.path.realpath("/proc/%d/exe" % pid) != real:
                    continue
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            rank = 0
            for kv in env:
                if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                    rank = int(kv.split(b"=", 1)[1])
            out[rank] = pid
        return out

    def signal_leader_group(self, sig):
        """The leader's process group: in-process ablate, or mpirun alone (which forwards
        SIGUSR1/SIGTERM to the ranks; they have their own process groups)."""
        try:
            os.killpg(self.sid, sig)
        except ProcessLookupError:
            pass

    def kill_all(self, sig=signal.SIGKILL):
        kill_session(self.sid, sig)
        self.reap(20)

    def reap(self, timeout=20):
        """Waits until no process of the session is alive (zombies do not count),
        SIGKILLing stragglers after half the timeout."""
        t_end = time.monotonic() + timeout
        killed = False
        while True:
            self.poll()
            left = self.pids()
            if not left and self.rc is not None:
                break
            now = time.monotonic()
            if now > t_end - timeout / 2 and not killed:
                kill_session(self.sid, signal.SIGKILL)
                killed = True
            if now > t_end:
                raise AssertionError("processes of %s still alive: %s" % (self.cmd, left))
            time.sleep(0.02)
        self.close()

    def close(self):
        for f in (self._err, self._out):
            if not f.closed:
                f.close()

    def finish(self, timeout):
        """Waits for the job to end and every process of it to be gone; (rc, stderr)."""
        rc = self.wait(timeout)
        self.reap(20)
        return rc, self.stderr()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """Whatever happened: no process of the job left, output files removed."""
        self.kill_all()
        self.close()
        self.cleanup_files()
        return False

    def cleanup_files(self):
        for p in (self.err_path, self.out_path):
            try:
                os.unlink(p)
            except OSError:
                pass


def _proc_stat(pid):
    with open("/proc/%d/stat" % pid, "rb") as f:
        s = f.read()
    fields = s[s.rindex(b")") + 2:].split()
    # state ppid pgrp session ...
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def session_pids(sid):
    """Live (non-zombie) processes of session sid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            state, _, _, session = _proc_stat(int(name))
        except (OSError, ValueError, IndexError):
            continue
        if session == sid and state not in ("Z", "X"):
            out.append(int(name))
    return out


def kill_session(sid, sig=signal.SIGKILL):
    for pid in session_pids(sid):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def join_together(args, ranks=(None, 2), timeout=300):
    """Processes started at once with the same args (one per entry of ranks: None
    in-process, N under mpirun -n N), e.g. `run --join` after one was killed; each must
    exit 0. Returns their stderr, joined."""
    jobs = [Job(args, ranks=r, tag="join%d" % i) for i, r in enumerate(ranks)]
    try:
        for j in jobs:
            rc = j.wait(timeout)
            assert rc == 0, "exit %s\n%s" % (rc, j.stderr()[-3000:])
        return "".join(j.stderr() for j in jobs)
    finally:
        for j in jobs:
            j.kill_all()
            j.close()


def wait_until(cond, job, what, timeout=120):
    """Polls cond() until it is true: a state (a file, a journal record), never a time. Fails
    at once when the job ended first, or after timeout seconds (a hang)."""
    t_end = time.monotonic() + timeout
    while not cond():
        if job is not None and job.poll() is not None and not cond():
            raise AssertionError("ended (rc %s) before %s\n%s" % (job.rc, what,
                                                                  job.stderr()[-3000:]))
        if time.monotonic() > t_end:
            raise AssertionError("no %s after %.0f s" % (what, timeout))
        time.sleep(0.005)


def hold_env(hold_dir, step=1, runs=None):
    """The test hook of src/orchestrator/process/run_exec.c: every attempt (of the run ids
    in runs, or all) that has taken `step` steps creates HOLD_DIR/ID.held and waits before
    each further step, in progress, until a signal or HOLD_DIR/ID.go or HOLD_DIR/go (a due
    periodic checkpoint is still taken): a signal or kill sent once a .held file exists
    always finds the run running."""
    os.makedirs(hold_dir, exist_ok=True)
    env = {"ABLATE_TEST_HOLD_DIR": hold_dir, "ABLATE_TEST_HOLD_STEP": str(step)}
    if runs:
        env["ABLATE_TEST_HOLD_RUNS"] = ",".join(runs)
    return env


def held(hold_dir):
    """Run ids held by the hook now."""
    return sorted(f[:-5] for f in os.listdir(hold_dir) if f.endswith(".held"))


def dispatch_order(spec):
    """Run ids in the order a sweep starts them (most expensive first, then plan order)."""
    return [r["id"] for r in sorted(plan_json(spec), key=lambda r: (-r["flops"], r["index"]))]


def release(hold_dir, run_id=None):
    """Lets a held run go on (HOLD_DIR/ID.go), or every run (HOLD_DIR/go)."""
    write(os.path.join(hold_dir, (run_id + ".go") if run_id else "go"), "")


def run(args, ranks=None, timeout=180, cwd=None, expect_rc=None, tag="run", env=None,
        cpu_limit=None):
    """Runs ablate to completion; returns (rc, stdout, stderr). env: extra variables;
    cpu_limit: seconds of CPU time it may use."""
    j = Job(args, ranks=ranks, cwd=cwd, tag=tag, env=env, cpu_limit=cpu_limit)
    try:
        rc = j.wait(timeout)
        j.reap(20)
        out, err = j.stdout(), j.stderr()
    finally:
        j.close()
        j.cleanup_files()
    if expect_rc is not None and rc != expect_rc:
        raise AssertionError("%s: exit %s, expected %s\nstderr:\n%s\nstdout:\n%s"
                             % (" ".join(j.cmd), rc, expect_rc, err[-4000:], out[-2000:]))
    return rc, out, err


DONE_RE = re.compile(r"^\[(\d+)/(\d+)\] (\S+) (done|diverged|FAILED)[: ]", re.M)


def reported_finished(stderr_text):
    """Names of the runs the progress lines on stderr reported finished."""
    return [m.group(3) for m in DONE_RE.finditer(stderr_text)]


# ---------------------------------------------------------------- journal

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _CRC_T
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


JREC = {1: "header", 2: "plan", 3: "run_begin", 4: "events", 5: "run_end", 6: "checkpoint",
        7: "sweep_end", 8: "damage"}
RUN_STATUS = ["done", "diverged", "failed", "interrupted"]


def journal_records(path, offsets=False):
    """(records, torn_bytes): the valid records (type, run, payload) up to the first
    incomplete or corrupt one; with offsets, (type, run, payload, offset, total bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    recs, off = [], 0
    while off + 17 <= len(data):
        if data[off:off + 4] != b"ABLJ":
            break
        typ, run, n = struct.unpack_from("<BII", data, off + 4)
        if off + 17 + n > len(data):
            break
        (crc,) = struct.unpack_from("<I", data, off + 13 + n)
        if crc32c(data[off + 4:off + 13 + n]) != crc:
            break
        rec = (typ, run, data[off + 13:off + 13 + n])
        recs.append(rec + (off, 17 + n) if offsets else rec)
        off += 17 + n
    return recs, len(data) - off


def _str(p, o):
    (n,) = struct.unpack_from("<I", p, o)
    return p[o + 4:o + 4 + n].decode("utf-8", "replace"), o + 4 + n


def journal_state(path):
    """What the journal says, mirroring src/orchestrator/record/resume.c: {index: dict(id, name,
    seed, attempt, finished, status, ckpt_step, ends)} plus the torn tail size. `ends` counts
    the run's final RUN_END records (any attempt; an attempt stopped at a checkpoint ends
    with status interrupted, which is not final)."""
    recs, torn = journal_records(path)
    runs = {}
    for typ, run, p in recs:
        if typ == 2:
            rid = p[:16].decode()
            (seed,) = struct.unpack_from("<Q", p, 16)
            name, _ = _str(p, 24)
            runs[run] = dict(id=rid, name=name, seed=seed, attempt=0, finished=False,
                             status=None, ckpt_step=0, ends=0)
            continue
        r = runs.get(run)
        if r is None:
            continue
        if typ == 3:
            attempt, _rank, resumed = struct.unpack_from("<Iiq", p, 0)
            if attempt < r["attempt"]:
                continue
            r["attempt"] = attempt
            r["finished"] = False
            if resumed == 0:
                r["ckpt_step"] = 0
        elif typ == 5:
            attempt, _rank = struct.unpack_from("<Ii", p, 0)
            _host, o = _str(p, 8)
            # the tag (event_codec.h): the kind, plus 0x80 (the version-2 fields) or 0x40 (a
            # varint count of the fields follows); the status is the first field
            kind, o = p[o] & 0x3F, o + 1
            if p[o - 1] & 0x40:
                while p[o] & 0x80:
                    o += 1
                o += 1
            status = p[o]
            if RUN_STATUS[status] != "interrupted" if status < len(RUN_STATUS) else True:
                r["ends"] += 1
            if attempt < r["attempt"] or kind != 5:
                continue
            r["attempt"] = attempt
            r["status"] = RUN_STATUS[status] if status < len(RUN_STATUS) else str(status)
            r["finished"] = r["status"] != "interrupted"
        elif typ == 6:
            attempt, step = struct.unpack_from("<Iq", p, 0)
            if attempt >= r["attempt"]:
                r["ckpt_step"] = step
    return runs, torn


def slurm_reachable():
    """True once a SLURM answers: the single-node slurm-local started when its start.sh is
    found ($ABLATE_SLURM_LOCAL, else ../shared/slurm-local beside the source tree; CI has
    it), else whatever sbatch and sinfo reach; False when none does. Raises AssertionError
    when slurm-local is there but does not start."""
    local = os.environ.get("ABLATE_SLURM_LOCAL") or os.path.join(
        SOURCE_DIR, "..", "shared", "slurm-local")
    start = os.path.join(local, "start.sh")
    if os.path.isfile(start):
        r = subprocess.run(["bash", start], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError("slurm-local did not start (exit %d):\n%s%s"
                                 % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        return True
    if not shutil.which("sbatch"):
        return False
    try:
        return subprocess.run(["sinfo"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def digest(path):
    """The SHA-256 of a file's bytes (hex): that a refusal left a file as it was."""
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line(err, what):
    """The one non-empty line of stderr; fails (naming `what`) when there are more."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, "%s: stderr should be one line:\n%s" % (what, err)
    return lines[0]


def damage_record(jp, rtype, at, mask):
    """Flips the bits `mask` of byte `at` of the middle record of type rtype (4 EVENTS,
    5 RUN_END, ...) in journal jp, as a bad sector or a cosmic ray would; returns the record's
    offset, its length, its run index and that run's name."""
    recs, _ = journal_records(jp, offsets=True)
    of_type = [r for r in recs if r[0] == rtype]
    target = of_type[len(of_type) // 2]
    offset, run = target[3], target[1]
    state, _ = journal_state(jp)
    with open(jp, "r+b") as f:
        f.seek(offset + at)
        b = f.read(1)
        f.seek(offset + at)
        f.write(bytes([b[0] ^ mask]))
    return offset, target[4], run, state[run]["name"]


def journal_path(out):
    return out + ".d/journal"


# ---------------------------------------------------------------- OUT.h5

TABLES = ("steps", "evals", "acts", "attn", "samples")
TABLE_KEYS = {"steps": ("step",), "evals": ("step",), "acts": ("step", "layer"),
              "attn": ("step", "layer", "head"), "samples": ("kind",)}
# Columns that depend on when and where a run ran, not on what it computed.
TIMING = {"steps": {"time"}, "evals": {"time"}, "samples": {"tokens_per_s"},
          "runs": {"train_seconds", "tokens_per_s", "start_utc", "attempt_start_utc", "end_utc",
                   "peak_rss", "blas_threads", "attempt_blas_threads", "slurm_job_id", "slurm_array_task_id",
                   "slurm_restart_count", "slurm_partition", "slurm_nodelist"}}
# /runs columns that legitimately differ between equivalent sweeps.
RUNS_PLACEMENT = {"rank", "host"}
RUNS_HISTORY = {"index", "attempts", "resumed_from_step", "last_checkpoint_step"}


def _py(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return "nan" if v != v else v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


class View:
    """OUT.h5 as comparable data:
    runs:   {id: {column: value}}  (every /runs column but the timing ones)
    order:  [id, ...] in /runs row order
    tables: {name: {(id, key...): {column: value}}}  (timing columns and `run` dropped)
    dups:   [(table, key)] rows whose key repeats
    attrs:  root attributes."""

    def __init__(self, path):
        self.path = path
        self.runs, self.order, self.tables, self.dups = {}, [], {}, []
        with h5py.File(path, "r") as f:
            self.attrs = {k: _py(v) for k, v in f.attrs.items()}
            r = f["runs"][()]
            names = r.dtype.names
            for row in r:
                d = {c: _py(row[c]) for c in names if c not in TIMING["runs"]}
                rid = d["id"]
                if rid in self.runs:
                    self.dups.append(("runs", rid))
                self.runs[rid] = d
                self.order.append(rid)
            for t in TABLES:
                rows = {}
                if t in f:
                    a = f[t][()]
                    cols = [c for c in a.dtype.names if c != "run" and c not in TIMING.get(t, ())]
                    runcol = a["run"]
                    for i in range(len(a)):
                        ri = int(runcol[i])
                        rid = self.order[ri] if 0 <= ri < len(self.order) else "?run%d" % ri
                        row = a[i]
                        d = {c: _py(row[c]) for c in cols}
                        key = (rid,) + tuple(d[k] for k in TABLE_KEYS[t])
                        if key in rows:
                            self.dups.append((t, key))
                        rows[key] = d
                self.tables[t] = rows

    def status(self):
        return {rid: r["status"] for rid, r in self.runs.items()}

    def names(self):
        return {r["name"]: rid for rid, r in self.runs.items()}

    def counts(self, rid):
        return {t: sum(1 for k in rows if k[0] == rid) for t, rows in self.tables.items()}


def compare_views(a, b, la="A", lb="B", ignore_cols=(), only_ids=None, max_diffs=25):
    """Differences (list of strings) between two views: same run ids, same /runs columns
    (minus ignore_cols and timing), and identical rows in every metric table."""
    diffs = []
    ignore = set(ignore_cols)
    ids_a, ids_b = set(a.runs), set(b.runs)
    if only_ids is not None:
        ids_a &= set(only_ids)
        ids_b &= set(only_ids)
    for rid in sorted(ids_a - ids_b):
        diffs.append("run %s (%s) only in %s" % (rid, a.runs[rid]["name"], la))
    for rid in sorted(ids_b - ids_a):
        diffs.append("run %s (%s) only in %s" % (rid, b.runs[rid]["name"], lb))
    for v, l in ((a, la), (b, lb)):
        for d in v.dups:
            diffs.append("%s: duplicate row %s" % (l, d))
    common = ids_a & ids_b
    for rid in sorted(common):
        ra, rb = a.runs[rid], b.runs[rid]
        for c in sorted(set(ra) | set(rb)):
            if c in ignore:
                continue
            if ra.get(c, "<missing>") != rb.get(c, "<missing>"):
                diffs.append("runs[%s %s].%s: %s=%r %s=%r" % (rid, ra["name"], c, la,
                                                              ra.get(c), lb, rb.get(c)))
    for t in TABLES:
        ta, tb = a.tables.get(t, {}), b.tables.get(t, {})
        ka = {k for k in ta if k[0] in common}
        kb = {k for k in tb if k[0] in common}
        for k in sorted(ka - kb, key=repr)[:5]:
            diffs.append("/%s row %s only in %s" % (t, k, la))
        for k in sorted(kb - ka, key=repr)[:5]:
            diffs.append("/%s row %s only in %s" % (t, k, lb))
        if len(ka ^ kb) > 10:
            diffs.append("/%s: %d rows differ in presence" % (t, len(ka ^ kb)))
        n = 0
        for k in sorted(ka & kb, key=repr):
            if ta[k] != tb[k]:
                n += 1
                if n <= 5:
                    cols = [c for c in ta[k] if ta[k][c] != tb[k].get(c)]
                    diffs.append("/%s row %s differs in %s: %s=%s %s=%s" % (
                        t, k, cols, la, [ta[k][c] for c in cols], lb, [tb[k][c] for c in cols]))
        if n > 5:
            diffs.append("/%s: %d rows differ in all" % (t, n))
    return diffs[:max_diffs] + (["... %d more" % (len(diffs) - max_diffs)]
                                if len(diffs) > max_diffs else [])


def assert_same(a, b, la, lb, **kw):
    d = compare_views(a, b, la, lb, **kw)
    if d:
        raise AssertionError("%s and %s differ:\n  " % (la, lb) + "\n  ".join(d))


def assert_complete(v, n_runs, label):
    """Every planned run exactly once, all done, with metric rows."""
    problems = []
    if len(v.order) != n_runs:
        problems.append("%d rows in /runs, expected %d" % (len(v.order), n_runs))
    if v.dups:
        problems.append("duplicate rows: %s" % v.dups[:5])
    for rid in v.order:
        r = v.runs[rid]
        if r["status"] != "done":
            problems.append("run %s (%s) status %s" % (rid, r["name"], r["status"]))
        c = v.counts(rid)
        if c["steps"] != r["train.steps"] or c["evals"] == 0 or c["samples"] == 0:
            problems.append("run %s (%s) has rows %s" % (rid, r["name"], c))
    if problems:
        raise AssertionError("%s incomplete:\n  " % label + "\n  ".join(problems))


def plan_json(spec, sets=(), env=None):
    import json
    args = ["plan", spec, "--json"]
    for s in sets:
        args += ["--set", s]
    rc, out, err = run(args, expect_rc=0, tag="plan", env=env)
    return [json.loads(l) for l in out.splitlines() if l.strip()]


# ---------------------------------------------------------------- test driver

SKIP_RC = 77  # tests/CMakeLists.txt: SKIP_RETURN_CODE


def select(names, argv=None):
    """The cases to run, as a C test program takes them (tests/test_util.h): argv
    (sys.argv[1:] by default) empty runs every case; `--list` prints the case names one a
    line and exits 0 (CMake lists them so at configure time: nothing may run before it);
    NAME... runs those, in the file's order; an unknown name exits 2 naming the known
    ones. Returns the chosen names."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--list"]:
        print("\n".join(names), flush=True)
        sys.exit(0)
    unknown = [a for a in argv if a not in names]
    if unknown:
        sys.stderr.write("%s: no case %s (the cases: %s)\n" % (
            os.path.basename(sys.argv[0]), ", ".join("'%s'" % u for u in unknown),
            ", ".join(names)))
        sys.exit(2)
    return [n for n in names if not argv or n in argv]


def main(tests, argv=None):
    """Runs the cases (name, fn) that select() chooses from argv, in order, printing
    PASS/FAIL/SKIP and times; exit 1 if any failed, 77 if every one was skipped."""
    chosen = select([name for name, _ in tests], argv)
    tests = [t for t in tests if t[0] in chosen]
    if BIN is None:
        sys.exit("ABLATE_BIN is not set and no built ablate was found under %s" % SOURCE_DIR)
    failed, skipped = [], []
    t_all = time.monotonic()
    for name, fn in tests:
        t0 = time.monotonic()
        log("== %s" % name)
        try:
            fn()
        except Skip as e:
            skipped.append(name)
            log("SKIP %s: %s" % (name, e))
        except Exception:
            failed.append(name)
            log(traceback.format_exc().rstrip())
            log("FAIL %s (%.1f s)" % (name, time.monotonic() - t0))
        else:
            log("PASS %s (%.1f s)" % (name, time.monotonic() - t0))
    log("%d/%d passed in %.1f s%s%s" % (len(tests) - len(failed) - len(skipped), len(tests),
                                         time.monotonic() - t_all,
                                         (": failed " + ", ".join(failed)) if failed else "",
                                         ("; skipped " + ", ".join(skipped)) if skipped else ""))
    sys.exit(1 if failed else SKIP_RC if len(skipped) == len(tests) else 0)
