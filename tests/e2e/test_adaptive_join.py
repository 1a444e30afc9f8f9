"""A replicate: sweep under `ablate run --join`: processes that share one sweep
decide from the union of their results and end with exactly the decisions and run statuses
of one uninterrupted process.

The spec and the reference are test_adaptive.py's. Two joined processes start together;
each holds the first run of seed index 2 it gets (the test hold hook; seed 2 is handed out
only once a look left a contrast open, so the look-0 decisions are durable by then). The
first to hold one is SIGKILLed there; a third process (under mpirun, 2 ranks) joins in its
place, then the other is let go, and one of them takes the killed one's run over. Then
/decisions (sorted by contrast and look: their journal order depends on timing),
/contrasts, the rule and each run's status (done or not_needed) must equal the
reference's, every decision must be the mean paired difference
of exactly seeds 1..n of both arms (from /runs), the view shows each decision once though
every process journaled it, and a process joining with another rule is refused in one line
without leaving a file.
"""
import math
import os
import re
import shutil
import signal
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import test_adaptive as A  # noqa: E402


def join_args(spec, out):
    return ["run", spec, "-o", out, "--join"]


def journals(out):
    d = out + ".d/join/procs"
    return sorted(os.path.join(d, p, "journal") for p in os.listdir(d)
                  if os.path.exists(os.path.join(d, p, "journal")))


def proc_journal(out, job):
    """The journal of an in-process job (its pid ends the directory's name)."""
    for j in journals(out):
        if os.path.basename(os.path.dirname(j)).endswith("-%d" % job.proc.pid):
            return j
    return None


def n_decisions(path):
    return sum(1 for r in C.journal_records(path)[0] if r[0] == 11)


def check_seeds_1_to_n(out):
    """Each decision's difference is the mean of final_val_loss(config seed k) - (baseline
    seed k) over exactly k = 0..n-1, from the view's own /runs."""
    with h5py.File(out, "r") as f:
        loss = {C._py(r["name"]): float(r["final_val_loss"]) for r in f["runs"][()]}
        contrasts = {int(r["contrast"]): (C._py(r["configuration"]), C._py(r["baseline"]))
                     for r in f["contrasts"][()]}
        rows = f["decisions"][()]
    checked = 0
    for r in rows:
        if C._py(r["verdict"]) == "unstable" or C._py(r["note"]) == "budget":
            continue
        cfg, base = contrasts[int(r["contrast"])]
        n = int(r["n"])
        d = [loss["%s/seed%d" % (cfg, k)] - loss["%s/seed%d" % (base, k)] for k in range(n)]
        assert math.isclose(sum(d) / n, float(r["difference"]), rel_tol=0, abs_tol=1e-12), \
            "contrast %s at n=%d: difference %r, seeds 1..n give %r" % (
                cfg, n, float(r["difference"]), sum(d) / n)
        checked += 1
    assert checked, "no decision to check"


def test_joined():
    with C.workdir("adaptive-joined") as tmp:
        joined(tmp)


def joined(tmp):
    spec = C.write(os.path.join(tmp, "spec.yaml"), A.spec_text(C.corpus_path(tmp)))
    ref_out = os.path.join(tmp, "ref.h5")
    rc, _, err = C.run(["run", spec, "-o", ref_out], tag="ref")
    assert rc == 0, err[-3000:]
    ref = A.decisions(ref_out)
    assert any(r[-2] == "open" for r in ref[0]), "no contrast stayed open at its first look"

    out = os.path.join(tmp, "out.h5")
    seed2 = [r["id"] for r in C.plan_json(spec) if r["name"].endswith("/seed2")]
    holds = [os.path.join(tmp, "hold%d" % i) for i in range(2)]
    jobs = [C.Job(join_args(spec, out), tag="p%d" % i, env=C.hold_env(h, step=1, runs=seed2))
            for i, h in enumerate(holds)]
    late = None
    try:
        C.wait_until(lambda: any(C.held(h) for h in holds), jobs[0], "a held run of seed 2")
        k = 0 if C.held(holds[0]) else 1
        victim, other = jobs[k], jobs[1 - k]
        mine = proc_journal(out, victim)
        assert mine and n_decisions(mine) > 0, "no decision journaled by the process held"
        C.kill_session(victim.sid, signal.SIGKILL)
        victim.reap(30)
        # the sweep cannot end before the killed process's run trains, and the other holds
        # every seed-2 run it gets: the late one joins an unfinished sweep
        late = C.Job(join_args(spec, out), ranks=2, tag="late")  # mpirun: rank 0 + a worker
        C.wait_until(lambda: "joined the sweep as" in late.stderr(), late, "the late join")
        C.release(holds[1 - k])  # the other goes on, its later seed-2 runs too
        for name, j in (("other", other), ("late", late)):
            rc = j.wait(180)
            assert rc == 0, "%s: exit %s\n%s" % (name, rc, j.stderr()[-3000:])
        errs = other.stderr() + late.stderr()
        assert "taken over" in errs, errs[-3000:]
        got = A.decisions(out)
        A.check_same(ref, got, "joined")
        check_seeds_1_to_n(out)
        with h5py.File(out, "r") as f:
            assert int(f.attrs["joined_processes"]) == 3, dict(f.attrs)
            assert C._py(f.attrs["status"]) == "complete", C._py(f.attrs["status"])
        per_journal = [n_decisions(j) for j in journals(out)]
        assert sum(per_journal) > len(ref[0]) and max(per_journal) <= len(ref[0]), per_journal
        assert "decided differently" not in errs, errs[-3000:]
        C.log("joined: %d decisions, journaled %s times by the processes, identical to one "
              "process's" % (len(ref[0]), per_journal))
    finally:
        for j in jobs + ([late] if late else []):
            j.kill_all()
            j.close()
            j.cleanup_files()
        for h in holds:
            shutil.rmtree(h, ignore_errors=True)

    # a joined process with another rule is refused in one line, leaving no file
    spec2 = C.write(os.path.join(tmp, "spec2.yaml"),
                    open(spec).read().replace("alpha: 0.2", "alpha: 0.1"))
    before = sorted(os.listdir(out + ".d/join/procs"))
    rc, _, err = C.run(join_args(spec2, out), tag="rule")
    lines = [ln for ln in err.splitlines() if "different replicate: section" in ln]
    assert rc != 0 and len(lines) == 1, (rc, err[-2000:])
    # at the key, in this process's spec, with what the sweep's rule has spent (its alpha
    # ledger), and both values as the spec writes them (it printed hex floats: 0x1.999...p-3)
    assert (spec2 + ":") in lines[0] and ": replicate.alpha: cannot join" in lines[0], lines[0]
    assert "'alpha 0.2' there, 'alpha 0.1' here" in lines[0], lines[0]
    assert re.search(r"spent [0-9.e-]+ of alpha 0.2 in [1-9][0-9]* looks? \(the alpha ledger\)",
                     lines[0]), lines[0]
    assert sorted(os.listdir(out + ".d/join/procs")) == before
    # joining the complete sweep leaves nothing either
    rc, _, err = C.run(join_args(spec, out), tag="complete")
    assert rc == 0 and "already complete" in err, (rc, err[-2000:])
    assert sorted(os.listdir(out + ".d/join/procs")) == before


if __name__ == "__main__":
    C.main([("joined", test_joined)])
