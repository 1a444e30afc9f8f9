"""`ablate run --join`: many independent processes on one sweep (src/orchestrator/schedule/join.h).

Cases (each ends with every run finished exactly once across all journals and every value
identical to one uninterrupted plain sweep):
  four:    4 joined processes of mixed sizes (in-process, mpirun -n 3, in-process,
           mpirun -n 2); one is killed with -9 while it holds a run with a checkpoint, one
           is stopped with SIGUSR1 (exit 3) and a fifth starts late; the killed one's run is
           taken over from its checkpoint;
  random:  3 processes, one killed with -9 at a random moment (the seed is printed), twice
           (CTest join_random: Release only, like long_history);
  hung:    a process stopped with SIGSTOP stops renewing its lease (--lease 1.5): its run is
           taken over, and the other process ends the sweep, leaving the last view to the
           stopped one (still running); once continued it abandons the run, builds that view
           and leaves with exit 0;
  plan_once: the first process's journal plans every run, a later one only the runs it
           trains; it builds no view at start, and no final view once the first's covers
           every journal;
  refused: a process planning other runs (another --set) is refused before it writes
           anything; --join on a plain sweep's output, a plain run on a joined output, and
           --force while a joined process is alive are refused; --force once none is
           alive starts over."""
import glob
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = "  baseline: {}\n  gelu: {model.activation: gelu}\n"
SEEDS = (0, 1, 2, 3)
N_RUNS = 2 * len(SEEDS)
IGNORE = C.RUNS_PLACEMENT | C.RUNS_HISTORY | {"message"}
_REF = {}


def spec_and_ref(tmp):
    """The spec and its uninterrupted reference (computed once for every case:
    C.shared_sweep)."""
    if "ref" not in _REF:
        corpus = C.corpus_path(tmp)
        spec, out = C.shared_sweep("join-ref", C.micro_spec(
            corpus, steps=300, seeds=SEEDS, variants=VARIANTS, eval_every=100,
            stats_every=25), timeout=600)
        v = C.View(out)
        C.assert_complete(v, N_RUNS, "reference")
        _REF["ref"] = (spec, v)
    return _REF["ref"]


def journals(out):
    return sorted(glob.glob(out + ".d/join/procs/*/journal"))


def states(out):
    return [C.journal_state(j)[0] for j in journals(out)]


def finished_counts(out):
    """{run id: number of final RUN_ENDs over all journals}."""
    n = {}
    for st in states(out):
        for r in st.values():
            n[r["id"]] = n.get(r["id"], 0) + r["ends"]
    return n


def check_exactly_once(out, label):
    n = finished_counts(out)
    assert len(n) == N_RUNS and all(c == 1 for c in n.values()), \
        "%s: final ends per run: %s" % (label, n)


def check_same(out, ref, label):
    rc, _, err = C.run(["view", out], expect_rc=0, tag="view")
    v = C.View(out)
    C.assert_complete(v, N_RUNS, label)
    C.assert_same(ref, v, "reference", label, ignore_cols=IGNORE)
    check_exactly_once(out, label)
    return v


def join_args(spec, out, *extra):
    return ["run", spec, "-o", out, "--join", "--checkpoint-every", "0.1"] + list(extra)


def wait_until(cond, timeout, what, jobs=()):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timeout waiting for %s\n%s" % (
        what, "\n".join(j.stderr()[-1500:] for j in jobs)))


def proc_journal(out, job):
    """The journal of a job's process (its rank 0 pid is in the directory's name)."""
    pids = set(job.ablate_ranks().values()) | {job.proc.pid}
    for j in journals(out):
        if int(os.path.basename(os.path.dirname(j)).rsplit("-", 1)[1]) in pids:
            return j
    return None


def holds_checkpointed_run(out, job):
    j = proc_journal(out, job)
    if not j:
        return False
    st, _ = C.journal_state(j)
    return any(not r["finished"] and r["ckpt_step"] > 0 and r["attempt"] > 0
               for r in st.values())


def stop_all(jobs):
    """Kills what a failed case left running (continued first: SIGSTOP holds SIGKILL off
    nothing, but a stopped mpirun would not forward it)."""
    for j in jobs:
        if j.poll() is None:
            os.killpg(j.sid, signal.SIGCONT)
            j.kill_all()
        j.close()


# ---------------------------------------------------------------- cases

def test_four():
    with C.workdir("join-four") as tmp:
        spec, ref = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        a = C.Job(join_args(spec, out), tag="a")
        b = C.Job(join_args(spec, out), ranks=3, tag="b")
        # test hook: k's and u's runs are held from step 20 (their periodic checkpoints
        # still taken), so each holds a checkpointed run in progress when it is killed or
        # signalled, however fast the others finish the sweep
        k = C.Job(join_args(spec, out), tag="k", env=C.hold_env(os.path.join(tmp, "hk"), 20))
        u = C.Job(join_args(spec, out), ranks=2, tag="u",
                  env=C.hold_env(os.path.join(tmp, "hu"), 20))
        jobs = [a, b, k, u]
        late = None
        try:
            wait_until(lambda: holds_checkpointed_run(out, k), 120, "k to checkpoint a run", jobs)
            k.kill_all(signal.SIGKILL)
            k.reap(20)
            wait_until(lambda: holds_checkpointed_run(out, u), 120, "u to checkpoint a run", jobs)
            u.signal_leader_group(signal.SIGUSR1)
            late = C.Job(join_args(spec, out), tag="late")
            jobs.append(late)
            rcs = {}
            for name, j in (("a", a), ("b", b), ("u", u), ("late", late)):
                rcs[name] = j.wait(300)
            assert rcs == {"a": 0, "b": 0, "u": 3, "late": 0}, \
                "exit statuses %s\n%s" % (rcs, "\n".join(j.stderr()[-2000:] for j in jobs))
            taken = [ln for j in jobs for ln in j.stderr().splitlines() if "taken over" in ln]
            assert any("from its checkpoint" in ln for ln in taken), \
                "no run was taken over from a checkpoint: %s" % taken
            v = check_same(out, ref, "four joined processes")
            # late keeps a journal unless the others had finished every run before it
            # joined: it then says so and forgets itself (join_forget)
            done_before = "the joined sweep is already complete" in late.stderr()
            assert len(journals(out)) == (4 if done_before else 5), journals(out)
            assert any(v.runs[r]["resumed_from_step"] > 0 for r in v.runs), \
                "no run shows a resume from a checkpoint"
            C.log("  takeovers: %d; exit statuses %s" % (len(taken), rcs))
        finally:
            stop_all(jobs)


def test_random():
    seed = int(os.environ.get("ABLATE_E2E_SEED", time.time()))
    rnd = random.Random(seed)
    C.log("  seed %d (ABLATE_E2E_SEED reproduces it)" % seed)
    for round_ in range(2):
        with C.workdir("join-random") as tmp:
            spec, ref = spec_and_ref(tmp)
            out = os.path.join(tmp, "out.h5")
            jobs = [C.Job(join_args(spec, out), ranks=rnd.choice([None, 2, 3]), tag="r%d" % i)
                    for i in range(3)]
            victim = rnd.randrange(3)
            delay = rnd.uniform(0.2, 4.0)
            try:
                time.sleep(delay)
                jobs[victim].kill_all(signal.SIGKILL)
                jobs[victim].reap(20)
                for i, j in enumerate(jobs):
                    if i != victim:
                        assert j.wait(300) == 0, j.stderr()[-3000:]
                check_same(out, ref, "round %d: kill -9 of process %d after %.2f s"
                           % (round_, victim, delay))
            finally:
                stop_all(jobs)


def test_hung():
    with C.workdir("join-hung") as tmp:
        spec, ref = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        # test hook: h's runs are held from step 20 (checkpoints still taken), so h holds a
        # checkpointed run that cannot finish before SIGSTOP
        h = C.Job(join_args(spec, out, "--lease", "1.5"), tag="hung",
                  env=C.hold_env(os.path.join(tmp, "hold"), 20))
        jobs = [h]
        try:
            wait_until(lambda: holds_checkpointed_run(out, h), 120, "a checkpoint", jobs)
            os.killpg(h.sid, signal.SIGSTOP)
            # the lease runs from h's last heartbeat (touched every lease/4 until the stop),
            # not from the stop: its age when the takeover is seen must exceed the lease
            # (the taker compares heartbeat mtimes, both set by this machine's clock)
            alive = glob.glob(out + ".d/join/procs/*/alive")
            assert len(alive) == 1, alive
            last_beat = os.stat(alive[0]).st_mtime
            o = C.Job(join_args(spec, out, "--lease", "1.5"), tag="other")
            jobs.append(o)
            wait_until(lambda: "taken over from" in o.stderr(), 60, "the takeover", jobs)
            age = time.time() - last_beat
            assert age >= 1.5, "taken over %.2f s after h's last heartbeat, within the lease" % age
            # o trains every run and ends while h is still stopped, its journal locked: the
            # last view is left to h, which builds it once continued (before, each
            # process ending built it, one after another)
            assert o.wait(300) == 0, o.stderr()[-3000:]
            assert "its last view is left to the 1 joined process still running" in o.stderr(), \
                o.stderr()[-3000:]
            C.release(os.path.join(tmp, "hold"))  # h abandons its run and ends
            os.killpg(h.sid, signal.SIGCONT)
            assert h.wait(120) == 0, h.stderr()[-3000:]
            assert "abandoning it here" in h.stderr(), h.stderr()[-3000:]
            assert "left to" not in h.stderr() and "not rebuilt" not in h.stderr(), \
                h.stderr()[-3000:]
            assert C.View(out).attrs["status"] == "complete", "h did not build the last view"
            check_same(out, ref, "hung process taken over")
            C.log("  taken over %.1f s after the hung process's last heartbeat (lease 1.5 s)" % age)
        finally:
            stop_all(jobs)


def test_refused():
    with C.workdir("join-refused") as tmp:
        spec, ref = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        # test hook: the runs after the first are held at step 1 until SIGUSR1, so the
        # process cannot complete the sweep before it (exit 0, not 3)
        hold = C.hold_env(os.path.join(tmp, "hold"), 1, C.dispatch_order(spec)[1:])
        with C.Job(join_args(spec, out), tag="live", env=hold) as live:
            wait_until(lambda: C.reported_finished(live.stderr()), 120, "a run", [live])
            os.killpg(live.sid, signal.SIGSTOP)  # alive (its journal locked) meanwhile
            try:
                before = sorted(os.listdir(out + ".d/join/procs"))
                rc, _, err = C.run(join_args(spec, out, "--set", "train.lr=0.02"), tag="plan")
                assert rc == 2 and "different plan" in err and "join/plan" in err, (rc, err)
                assert len(err.strip().splitlines()) == 1, err
                assert sorted(os.listdir(out + ".d/join/procs")) == before
                rc, _, err = C.run(["run", spec, "-o", out, "--resume"], tag="plain")
                assert rc == 2 and "is a joined sweep" in err, (rc, err)
                rc, _, err = C.run(["run", spec, "-o", out, "--force"], tag="force")
                assert rc == 2 and "--force refused" in err, (rc, err)
                rc, _, err = C.run(join_args(spec, out, "--force"), tag="join-force")
                assert rc == 2 and "cannot be combined" in err, (rc, err)
            finally:
                os.killpg(live.sid, signal.SIGCONT)
            live.signal_leader_group(signal.SIGUSR1)
            assert live.wait(300) == 3, live.stderr()[-3000:]
        assert sorted(os.listdir(out + ".d/join/procs")) == before, "a refused process left files"
        done = sum(c for c in finished_counts(out).values())
        assert done >= 1 and all(c <= 1 for c in finished_counts(out).values())
        plain = os.path.join(tmp, "plain.h5")
        C.run(["run", spec, "-o", plain, "--set", "train.steps=3"], expect_rc=0, tag="p")
        rc, _, err = C.run(join_args(spec, plain, "--set", "train.steps=3"), tag="join-plain")
        assert rc == 2 and "single sweep" in err, (rc, err)
        C.run(["run", spec, "-o", out, "--force", "--set", "train.steps=3"], expect_rc=0,
              tag="force-after")
        assert not os.path.exists(out + ".d/join")


def plans_and_begun(journal):
    """The run indices a journal plans (PLAN records, in order) and begins (RUN_BEGIN)."""
    recs, _ = C.journal_records(journal)
    return [run for typ, run, _p in recs if typ == 2], {run for typ, run, _p in recs if typ == 3}


def test_plan_once():
    """The plan is journaled once, no view is built at a joined process's start,
    and the complete sweep's view once. The first process's journal plans every run and
    join/plan_journal names it; a process joining later plans only the runs it trains (its
    journal does not grow with the sweep's runs) and builds no view at start (its view
    builds held by the test hook: it finishes a run before any). At the end both final
    builds are held until both processes have ended the sweep; the first then builds, and
    the second finds that view covering every journal byte and does not build again. The
    view holds every run, with the plain sweep's values."""
    with C.workdir("join-plan-once") as tmp:
        spec, ref = spec_and_ref(tmp)
        out = os.path.join(tmp, "out.h5")
        hold, va, vb = (os.path.join(tmp, d) for d in ("hold", "va", "vb"))
        os.makedirs(va)
        os.makedirs(vb)
        marker = out + ".d/join/plan_journal"
        # a's runs are held from step 1, so b trains the others; a's builds after its first
        # (at start) are held too
        a = C.Job(join_args(spec, out, "--view-interval", "3600"), tag="a",
                  env=dict(C.hold_env(hold, 1), ABLATE_TEST_HOLD_VIEW=va,
                           ABLATE_TEST_HOLD_VIEW_AFTER="1"))
        jobs = [a]
        try:
            wait_until(lambda: os.path.exists(marker) and os.path.exists(out) and C.held(hold),
                       120, "a's plan journal, its first view and a held run", jobs)
            b = C.Job(join_args(spec, out, "--view-interval", "3600"), tag="b",
                      env={"ABLATE_TEST_HOLD_VIEW": vb})
            jobs.append(b)
            wait_until(lambda: C.reported_finished(b.stderr()), 120, "a run finished by b", jobs)
            assert not os.path.exists(os.path.join(vb, "view.held")), \
                "b built a view before it finished a run"
            C.release(hold)
            # both final builds wait: both journals hold their SWEEP_END
            wait_until(lambda: all(os.path.exists(os.path.join(d, "view.held")) for d in (va, vb)),
                       300, "both final views", jobs)
            C.write(os.path.join(va, "view.go"), "")
            assert a.wait(300) == 0, a.stderr()[-3000:]
            C.write(os.path.join(vb, "view.go"), "")
            assert b.wait(300) == 0, b.stderr()[-3000:]
            assert "not rebuilt" not in a.stderr() and "not rebuilt" in b.stderr(), \
                "a: %s\nb: %s" % (a.stderr()[-1500:], b.stderr()[-1500:])
        finally:
            stop_all(jobs)
            for j in jobs:
                j.cleanup_files()
        assert C.View(out).attrs["status"] == "complete"
        with open(marker) as f:
            ja = f.read().strip()
        jb = [j for j in journals(out) if j != ja]
        assert ja in journals(out) and len(jb) == 1, (ja, journals(out))
        plans_a, _ = plans_and_begun(ja)
        plans_b, begun_b = plans_and_begun(jb[0])
        assert sorted(plans_a) == list(range(N_RUNS)), plans_a
        assert sorted(plans_b) == sorted(begun_b) and 0 < len(plans_b) < N_RUNS, \
            (plans_b, begun_b)
        check_same(out, ref, "plan once")
        C.log("  b planned the %d runs it trained of %d; its final view was a's" %
              (len(plans_b), N_RUNS))


CASES = [("four", test_four), ("hung", test_hung), ("refused", test_refused),
         ("plan_once", test_plan_once), ("random", test_random)]

if __name__ == "__main__":
    # CTest has `random` as join_random (Release only), the others as e2e_join.CASE (also
    # under the sanitizers)
    C.main(CASES)
