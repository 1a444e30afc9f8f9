"""Faults: per-attempt BLAS provenance, failed writes of the
output, --force over a stopped live view, small address-space limits, SIGINT/SIGHUP and
`ablate inspect` after an abnormal end. Each test waits for the state it needs (a journal
record, a file), never for a time."""
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

# runs that cannot end before the test stops them, however fast the machine
ENDLESS = 1000000


def endless_spec(d, seeds=(1,)):
    return C.write(os.path.join(d, "s.yaml"),
                   C.micro_spec(C.corpus_path(), steps=ENDLESS, seeds=seeds, eval_every=100000,
                                stats_every=100000))


def wait_run_in_progress(job, out, timeout=120):
    """Until the journal on disk shows an attempt begun, not ended, with events after its
    start (it has taken steps). --view-interval 0.1 makes rank 0 flush the journal often."""
    jp = C.journal_path(out)
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if job.poll() is not None:
            raise AssertionError("the sweep ended early (exit %s)\n%s" % (job.rc, job.stderr()))
        st, _ = C.journal_state(jp) if os.path.exists(jp) else ({}, 0)
        recs = C.journal_records(jp)[0] if os.path.exists(jp) else []
        busy = [i for i, r in st.items() if r["attempt"] and not r["finished"]]
        if any(sum(1 for t, run, _ in recs if t == 4 and run == i) >= 2 for i in busy):
            return
        time.sleep(0.01)
    raise AssertionError("no run in progress after %d s\n%s" % (timeout, job.stderr()))


def sweep_end_status(out):
    """The status of the journal's last SWEEP_END record (None if there is none)."""
    recs, _ = C.journal_records(C.journal_path(out))
    ends = [p for t, _, p in recs if t == 7]
    if not ends:
        return None
    p, o, kv = ends[-1], 0, {}
    while o < len(p):
        k, o = C._str(p, o)
        v, o = C._str(p, o)
        kv[k] = v
    return kv.get("status")


def view_segments(out):
    d = os.path.join(out + ".d", "view")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


# ---------------------------------------------------------------- item 3: BLAS per attempt

def wait_attempt_steps(job, out, attempt, timeout=120):
    """Until the journal holds events of that attempt after its history (it has trained)."""
    jp = C.journal_path(out)
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if job.poll() is not None:
            raise AssertionError("the sweep ended early (exit %s)\n%s" % (job.rc, job.stderr()))
        recs = C.journal_records(jp)[0] if os.path.exists(jp) else []
        begun = [i for i, (t, _, p) in enumerate(recs)
                 if t == 3 and struct.unpack_from("<I", p, 0)[0] == attempt]
        if begun and sum(1 for t, _, p in recs[begun[-1]:]
                         if t == 4 and struct.unpack_from("<I", p, 0)[0] == attempt) >= 2:
            return
        time.sleep(0.01)
    raise AssertionError("attempt %d never trained\n%s" % (attempt, job.stderr()))


def test_blas_per_attempt():
    """A run stopped on one machine and resumed on another with a different OpenBLAS core
    mixes both, and /runs.blas_core showed only the first. Each attempt now records its
    core and thread count, and the log warns when an attempt changes them.
    OPENBLAS_CORETYPE is set here for the resumed child process only."""
    import h5py
    with C.workdir("blas-attempt") as d:
        spec = endless_spec(d)
        out = os.path.join(d, "o.h5")
        cores = []
        for attempt, env in ((1, None), (2, "other")):
            if env:
                env = {"OPENBLAS_CORETYPE": "Prescott" if cores[0] != "Prescott" else
                       "Sandybridge"}
            args = ["run", spec, "-o", out, "--view-interval", "0.1"] + (["--resume"] if env
                                                                          else [])
            with C.Job(args, tag="attempt%d" % attempt, env=env) as job:
                wait_attempt_steps(job, out, attempt)
                os.kill(job.proc.pid, signal.SIGUSR1)
                rc, err = job.finish(60)
            assert rc == 3, "attempt %d: exit %s\n%s" % (attempt, rc, err[-2000:])
            with h5py.File(out, "r") as f:
                row = f["runs"][0]
                names = f["runs"].dtype.names
                assert "attempt_blas_core" in names, names
                cores.append(row["attempt_blas_core"].decode())
                first = row["blas_core"].decode()
            C.log("  attempt %d: core %s (first attempt's: %s)" % (attempt, cores[-1], first))
            assert first == cores[0], (first, cores)
            warned = "warning" in err and "BLAS core" in err
            assert warned == (attempt == 2), "attempt %d: warning %s\n%s" % (
                attempt, warned, err[-2000:])
        assert cores[1] == env["OPENBLAS_CORETYPE"] and cores[0] != cores[1], cores
        assert cores[0] in err and cores[1] in err, err[-2000:]


# ---------------------------------------------------------------- item 4: failed writes

def one_error_line(err, label):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and "cannot write" in lines[0], "%s: stderr\n%s" % (label, err)


def test_output_writes():
    """`train --json`, `plan` and `plan --json` exited 0 after failed writes; a full disk
    left half a JSON record; with SIGPIPE ignored `train --json | head -1` trained to the
    end. A failed write is exit 1 with one line, cut back to the last whole record, and a
    closed pipe ends the command."""
    import json
    import subprocess
    with C.workdir("writes") as d:
        spec = endless_spec(d)
        for args in (["train", spec, "--set", "train.steps=3", "--json"], ["plan", spec],
                     ["plan", spec, "--json"]):
            with open("/dev/full", "w") as full:
                p = subprocess.run([C.BIN] + args, stdout=full, stderr=subprocess.PIPE,
                                   env=C.ENV, timeout=120)
            err = p.stderr.decode(errors="replace")
            assert p.returncode == 1, "%s > /dev/full: exit %s\n%s" % (args, p.returncode, err)
            one_error_line(err, " ".join(args[:1] + args[2:]))
        # a file that fills up (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG as ENOSPC would be)
        out = os.path.join(d, "t.json")
        cmd = "ulimit -f 2; trap '' XFSZ; exec \"$0\" \"$@\" > %s" % out
        p = subprocess.run(["bash", "-c", cmd, C.BIN, "train", spec, "--set", "train.steps=200",
                            "--json"], stderr=subprocess.PIPE, env=C.ENV, timeout=120)
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 1, "full file: exit %s\n%s" % (p.returncode, err)
        one_error_line(err, "full file")
        with open(out) as f:
            text = f.read()
        assert text.endswith("\n"), "a record cut in half: ...%r" % text[-80:]
        for line in text.splitlines():
            json.loads(line)
        # SIGPIPE ignored (restore_signals=False keeps Python's SIG_IGN): the run never ends
        # by itself, so only the closed pipe can end it
        p = subprocess.Popen([C.BIN, "train", spec, "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=C.ENV, restore_signals=False,
                             start_new_session=True)
        try:
            json.loads(p.stdout.readline())
            p.stdout.close()
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("train --json went on after its reader closed the pipe")
        finally:
            C.kill_session(p.pid)
            p.wait()
        err = p.stderr.read().decode(errors="replace")
        assert rc == 1, "closed pipe: exit %s\n%s" % (rc, err)
        one_error_line(err, "closed pipe")


# ---------------------------------------------------------------- item 5: --force

def test_force_after_kill():
    """--force after a sweep was killed while its view was live: "cannot remove OUT.h5.d:
    Directory not empty", exit 2, with the journal already deleted, and every later
    --resume, view or --force failed. It now removes everything, segments included."""
    with C.workdir("force-kill") as d:
        spec = endless_spec(d)
        out = os.path.join(d, "o.h5")
        with C.Job(["run", spec, "-o", out, "--view-interval", "0.1"], tag="kill") as job:
            wait_run_in_progress(job, out)
            while not view_segments(out):
                time.sleep(0.01)
            job.kill_all(signal.SIGKILL)
        assert view_segments(out), "the kill left no view segment to test with"
        rc, _, err = C.run(["run", spec, "-o", out, "--force", "--set", "train.steps=3"],
                           tag="force")
        assert rc == 0, "--force: exit %s\n%s" % (rc, err[-2000:])
        assert not [n for n in os.listdir(d) if ".removing." in n], os.listdir(d)
        assert not view_segments(out), view_segments(out)
        v = C.View(out)
        C.assert_complete(v, 1, "after --force")
        rc, _, err = C.run(["run", spec, "-o", out, "--resume", "--set", "train.steps=3"],
                           expect_rc=0, tag="resume")


# ---------------------------------------------------------------- item 6: ulimit -v

def test_address_space():
    """Under `ulimit -v 150000` ablate hung at 100% CPU in OpenBLAS (ignoring SIGTERM); at
    300000 HDF5 crashed on the view thread or OpenBLAS said only "pthread_create failed".
    Now one line names the limit and what needs it, exit 2, the journal untouched. Every
    call has its own timeout: a hang fails the test, it does not hang the suite."""
    import resource
    import subprocess
    with open(C.BIN, "rb") as f:
        if b"__asan_init" in f.read():
            raise C.Skip("AddressSanitizer reserves terabytes of address space: no ulimit -v")
    with C.workdir("ulimit") as d:
        spec = C.write(os.path.join(d, "s.yaml"), C.micro_spec(C.corpus_path(), steps=10,
                                                                seeds=(1, 2)))
        out = os.path.join(d, "o.h5")
        C.run(["run", spec, "-o", out], expect_rc=0, tag="sweep")
        with open(C.journal_path(out), "rb") as f:
            journal = f.read()
        for kib in (150000, 300000, 600000):
            def limit(kib=kib):
                resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, resource.RLIM_INFINITY))
            for args in (["run", spec, "-o", out, "--resume"], ["train", spec]):
                p = subprocess.Popen([C.BIN] + args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=C.ENV, preexec_fn=limit,
                                     start_new_session=True)
                try:
                    so, se = p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    C.kill_session(p.pid)
                    p.communicate()
                    raise AssertionError("ulimit -v %d: %s hung" % (kib, args[0]))
                err = se.decode(errors="replace")
                C.log("  ulimit -v %d, %s: exit %s: %s" % (kib, args[0], p.returncode,
                                                          err.strip()[:100]))
                if p.returncode == 0 and (args[0] == "train" or kib >= 600000):
                    continue  # enough for it on this machine (train peaks near 350 MB)
                lines = [l for l in err.splitlines() if l.strip()]
                assert p.returncode == 2 and len(lines) == 1 and "ulimit -v" in lines[0], \
                    "ulimit -v %d, %s: exit %s\n%s" % (kib, args[0], p.returncode, err[-2000:])
            with open(C.journal_path(out), "rb") as f:
                assert f.read() == journal, "the journal changed under ulimit -v %d" % kib
            left = [n for n in os.listdir(d) if ".tmp." in n]
            assert not left, left


# ---------------------------------------------------------------- item 7: SIGINT, SIGHUP

def test_sigint_sighup():
    """Ctrl-C and a closed terminal killed a single-process sweep at once: no checkpoint,
    the journal's buffer lost, view segments left. Now they checkpoint the run in
    progress and exit 3, as SIGUSR1 does."""
    with C.workdir("sigint") as d:
        spec = endless_spec(d)
        for sig in (signal.SIGINT, signal.SIGHUP):
            out = os.path.join(d, "%s.h5" % sig.name)
            with C.Job(["run", spec, "-o", out, "--view-interval", "0.1"], tag=sig.name) as job:
                wait_run_in_progress(job, out)
                os.kill(job.proc.pid, sig)
                rc, err = job.finish(60)
            assert rc == 3, "%s: exit %s, expected 3\n%s" % (sig.name, rc, err[-2000:])
            assert "%s: checkpointing 1 run(s)" % sig.name in err, err[-2000:]
            st, _ = C.journal_state(C.journal_path(out))
            ck = [r for r in st.values() if r["ckpt_step"] > 0]
            assert ck, "%s: no checkpoint in the journal\n%s" % (sig.name, err[-2000:])
            assert sweep_end_status(out) == "stopped", sweep_end_status(out)
            assert not view_segments(out), view_segments(out)
            rc, so, _ = C.run(["inspect", out], expect_rc=0, tag="inspect")
            assert "sweep stopped" in so, so
            C.log("  %s: exit 3, checkpoint at step %d" % (sig.name, ck[0]["ckpt_step"]))


def test_sigint_mpirun():
    """Ctrl-C on mpirun: mpirun ends the job (it sends SIGTERM to the ranks) and exits with
    its own status; rank 0 leaves a clean stop in the journal and says how to continue."""
    with C.workdir("sigint-mpi") as d:
        spec = endless_spec(d, seeds=(1, 2))
        out = os.path.join(d, "o.h5")
        # mpirun kills the ranks odls_base_sigkill_timeout s (default 1) into its stop: on a
        # loaded machine rank 0 may need longer to write its stop (docs/architecture.md; a
        # much larger value delays mpirun's SIGTERM itself)
        with C.Job(["run", spec, "-o", out, "--view-interval", "0.1"], ranks=2,
                   tag="sigint-mpi", env={"OMPI_MCA_odls_base_sigkill_timeout": "5"}) as job:
            wait_run_in_progress(job, out)
            job.signal_leader_group(signal.SIGINT)
            rc, err = job.finish(60)
        C.log("  mpirun exit %s after SIGINT" % rc)
        assert rc != 0, "mpirun exit 0 after SIGINT"
        assert "stopped; continue with" in err, err[-2000:]
        assert sweep_end_status(out) == "stopped", sweep_end_status(out)


def test_inspect_after_kill():
    """After kill -9 the view still said `sweep running`, and inspect repeated it forever:
    it now checks the journal's lock and says that no process holds it."""
    with C.workdir("inspect-kill") as d:
        spec = endless_spec(d)
        out = os.path.join(d, "o.h5")
        with C.Job(["run", spec, "-o", out, "--view-interval", "0.1"], tag="kill") as job:
            wait_run_in_progress(job, out)
            while not os.path.exists(out):  # the first view is written before training
                time.sleep(0.01)
            rc, so, _ = C.run(["inspect", out], expect_rc=0, tag="inspect-live")
            assert "sweep running" in so, so
            job.kill_all(signal.SIGKILL)
        rc, so, _ = C.run(["inspect", out], expect_rc=0, tag="inspect")
        assert "sweep running" not in so and "no process holds its journal" in so, so


if __name__ == "__main__":
    C.main([("address_space", test_address_space), ("blas_per_attempt", test_blas_per_attempt), ("output_writes", test_output_writes), ("force_after_kill", test_force_after_kill), ("sigint_sighup", test_sigint_sighup), ("sigint_mpirun", test_sigint_mpirun),
            ("inspect_after_kill", test_inspect_after_kill)])
