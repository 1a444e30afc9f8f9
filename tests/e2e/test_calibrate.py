"""Calibrated fixed time (train.calibrate): a sweep with train.seconds and
train.calibrate K times each configuration K times before any run, journals every trial
(CALIBRATION records), and trains each run for exactly
    round(median tokens/s x train.seconds / tokens per step)
steps, recomputed here from the file's /calibration table. A sweep killed with -9 once a
trial is journaled, and again once every trial is (a run held in progress), times no trial
twice on --resume. calibrate without a time budget, and with --join, is a located error.
"""
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

K = 2
SECONDS = 0.5
BATCH = 8
CONTEXT = 16  # the micro preset
JREC_CALIBRATION = 12


def spec_text(corpus, budget="seconds: %g, calibrate: %d, calibrate_steps: 100" % (SECONDS, K)):
    return "\n".join([
        "description: calibrated fixed time",
        'data: {path: "%s", tokenizer: char, val_fraction: 0.1}' % corpus,
        "base:",
        "  preset: micro",
        "  train: {lr: 1e-2, batch_size: %d, %s, warmup_steps: 5, eval_every: 0, "
        "eval_tokens: 512}" % (BATCH, budget),
        "  stats: {every: 0}",
        '  sample: {prompt: "ROMEO:", tokens: 8}',
        "grid:",
        "  model.n_head: [1, 2]",
        "seeds: [0, 1]",
    ]) + "\n"


def calibration_records(out):
    """(group, trial) of every CALIBRATION record in the journal, in order."""
    recs, _ = C.journal_records(C.journal_path(out))
    got = []
    for typ, _run, p in recs:
        if typ != JREC_CALIBRATION:
            continue
        group, o = C._str(p, 0)
        _config, o = C._str(p, o)
        (trial,) = struct.unpack_from("<I", p, o)
        got.append((group, trial))
    return got


def check_file(out):
    import h5py
    with h5py.File(out, "r") as f:
        cal = f["calibration"][:]
        runs = f["runs"][:]
    by_group = {}
    for row in cal:
        by_group.setdefault(row["group"].decode(), []).append(row)
    assert len(by_group) == 2, "configurations in /calibration: %s" % sorted(by_group)
    for g, rows in by_group.items():
        assert sorted(int(r["trial"]) for r in rows) == list(range(1, K + 1)), (g, rows)
        for r in rows:
            assert r["tokens_per_s"] > 0 and r["host"] and r["blas_core"] and r["utc"], r
            assert int(r["steps"]) == 100 and int(r["warmup"]) == 3, r
    for r in runs:
        g = r["group"].decode()
        tps = sorted(float(x["tokens_per_s"]) for x in by_group[g])
        median = (tps[(K - 1) // 2] + tps[K // 2]) / 2
        want = max(1, math.floor(median * SECONDS / (BATCH * CONTEXT) + 0.5))
        name = r["name"].decode()
        assert r["status"].decode() == "done", (name, r["status"])
        assert int(r["steps"]) == want, "%s trained %d steps, calibrated %d" % (
            name, r["steps"], want)
        assert int(r["calibrated_steps"]) == want and int(r["calib_trials"]) == K, name
        assert r["calib_tokens_per_s"] == median and r["calib_tokens_per_s_min"] == tps[0] and \
            r["calib_tokens_per_s_max"] == tps[-1], name
        assert r["train.calibrate"] == K and r["train.seconds"] == SECONDS, name
    C.log("  %d runs trained their calibrated steps: %s" % (len(runs), sorted(
        {(r["name"].decode().split("/")[0], int(r["steps"])) for r in runs})))


def test_kill_resume():
    """Two workers: killed once a trial is journaled, then once a run trains (every trial
    journaled); each resume times only what is missing, and the view has K per config."""
    tmp = C.workdir_persistent("calibrate")
    spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
    out = os.path.join(tmp, "out.h5")
    hold = os.path.join(tmp, "hold")
    env = C.hold_env(hold)
    with C.Job(["run", spec, "-o", out], ranks=3, env=env, tag="cal1") as job:
        C.wait_until(lambda: os.path.exists(C.journal_path(out)) and calibration_records(out),
                     job, "a CALIBRATION record")
        job.kill_all()
    first = calibration_records(out)
    C.log("  killed with %d trial(s) journaled" % len(first))
    with C.Job(["run", spec, "-o", out, "--resume"], ranks=3, env=env, tag="cal2") as job:
        C.wait_until(lambda: os.path.isdir(hold) and C.held(hold), job, "a run in progress")
        err = job.stderr()
        job.kill_all()
    assert "(%d journaled before)" % len(first) in err, err
    second = calibration_records(out)
    assert second[:len(first)] == first, (first, second)
    assert len(second) == 2 * K and len(set(second)) == 2 * K, second
    rc, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=3, expect_rc=0, tag="cal3")
    assert "0 trial(s) to time (%d journaled before)" % (2 * K) in err, err
    assert calibration_records(out) == second, "a trial was timed again"
    check_file(out)


def test_in_process():
    """One process times the trials in line; the same steps arithmetic."""
    tmp = C.workdir_persistent("calibrate1")
    spec = C.write(os.path.join(tmp, "s.yaml"), spec_text(C.corpus_path(tmp)))
    out = os.path.join(tmp, "out.h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag="cal-inproc")
    assert len(calibration_records(out)) == 2 * K
    check_file(out)
    _, text, _ = C.run(["inspect", out], expect_rc=0, tag="cal-inspect")
    import h5py
    with h5py.File(out, "r") as f:
        steps = {int(x) for x in f["runs"]["calibrated_steps"]}
    assert "calibration (train.calibrate" in text and \
        all("-> %d steps" % n in text for n in steps), text


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_workers_sleep():
    """A worker with nothing to do sleeps between probes (Open MPI's blocking probe spins a
    whole core): while one worker holds the sweep's only run (the test hook, sleeping), the
    other (idle) worker rank is measured over a window of at least a second of wall time and must
    use under 5% of a core. The window measures; it synchronizes nothing (the held run is a
    state: its .held file)."""
    tmp = C.workdir_persistent("calibrate-idle")
    text = spec_text(C.corpus_path(tmp)).replace("grid:\n  model.n_head: [1, 2]\n", "")
    spec = C.write(os.path.join(tmp, "s.yaml"), text.replace("seeds: [0, 1]", "seeds: [0]"))
    out = os.path.join(tmp, "out.h5")
    hold = os.path.join(tmp, "hold")
    with C.Job(["run", spec, "-o", out], ranks=3, env=C.hold_env(hold), tag="idle") as job:
        C.wait_until(lambda: os.path.isdir(hold) and C.held(hold), job, "the run held")
        ranks = job.ablate_ranks()
        begins = [p for typ, _run, p in C.journal_records(C.journal_path(out))[0] if typ == 3]
        (busy,) = struct.unpack_from("<i", begins[-1], 4)  # RUN_BEGIN: u32 attempt, i32 rank
        workers = [ranks[r] for r in sorted(ranks) if r > 0 and r != busy]
        assert len(ranks) == 3 and len(workers) == 1, (ranks, busy)
        import time
        t0, c0 = time.monotonic(), [cpu_seconds(p) for p in workers]
        while time.monotonic() - t0 < 1.0:
            time.sleep(0.1)
        wall = time.monotonic() - t0
        share = [(cpu_seconds(p) - c) / wall for p, c in zip(workers, c0)]
        C.log("  the idle worker rank used %.4f of a core while rank %d held the run" %
              (share[0], busy))
        assert max(share) < 0.05, "a waiting worker spins: %s of a core" % share


def test_errors():
    """calibrate without a time budget: FILE:LINE:COL naming the key; with --join: refused."""
    tmp = C.workdir_persistent("calibrate-err")
    corpus = C.corpus_path(tmp)
    bad = C.write(os.path.join(tmp, "bad.yaml"), spec_text(corpus, "steps: 20, calibrate: 2"))
    for cmd in (["plan", bad], ["run", bad, "-o", os.path.join(tmp, "x.h5")]):
        rc, _, err = C.run(cmd, expect_rc=2, tag="cal-err")
        line = [l for l in err.splitlines() if "train.calibrate" in l]
        assert line and line[0].startswith(bad + ":5:") and "needs a time budget" in line[0], err
        assert not os.path.exists(os.path.join(tmp, "x.h5.d")), "files left behind"
    good = C.write(os.path.join(tmp, "good.yaml"), spec_text(corpus))
    rc, _, err = C.run(["run", good, "-o", os.path.join(tmp, "j.h5"), "--join"], expect_rc=2,
                       tag="cal-join")
    assert good + ":5:" in err and "cannot be used with --join" in err, err
    # ablate train: its trials in line, then exactly the calibrated steps
    import json
    import re
    rc, out, err = C.run(["train", good, "--json"], expect_rc=0, tag="cal-train")
    trials = re.findall(r"calibration: trial \d/%d: ([0-9.]+) tokens/s" % K, err)
    steps = re.search(r"calibration: median .* = (\d+) steps", err)
    end = [json.loads(l) for l in out.splitlines() if '"event":"end"' in l][-1]
    assert len(trials) == K and steps and end["steps"] == int(steps.group(1)), (err, end)
    rc, out, _ = C.run(["plan", good], expect_rc=0, tag="cal-plan")
    assert "calibration" in out and "2 configuration(s) x %d trial(s)" % K in out, out


if __name__ == "__main__":
    C.main([("errors", test_errors), ("in_process", test_in_process),
            ("kill_resume", test_kill_resume), ("idle_workers_sleep", test_idle_workers_sleep)])
