"""Group commit: with many ranks, rank 0 syncs finished runs' RUN_END
records in groups on a writer thread and announces a run done (progress line, view,
scheduler) only after the sync that covers it. The test hook ABLATE_TEST_KILL_BEFORE_SYNC=K
kills rank 0 (SIGKILL) just before its K-th group sync, the group's RUN_END records written
but not synced, and says which journal bytes: no run whose RUN_END lies there may have been
reported done, every run reported done has its RUN_END before them, and --resume then
completes the sweep.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

RUNS = 24
HOOK_RE = re.compile(r"test hook: killed before syncing journal bytes (\d+)-(\d+)")


def test_kill_between_write_and_sync():
    with C.workdir("group_commit") as d:
        spec = C.write(os.path.join(d, "s.yaml"),
                       C.micro_spec(C.corpus_path(d), steps=1, seeds=range(RUNS), eval_every=0,
                                    stats_every=0, eval_tokens=16, sample_tokens=0))
        out = os.path.join(d, "out.h5")
        rc, _, err = C.run(["run", spec, "-o", out], ranks=3, tag="killed",
                           env={"ABLATE_TEST_KILL_BEFORE_SYNC": "2"})
        m = HOOK_RE.search(err)
        assert rc != 0 and m, "rank 0 was not killed by the hook (exit %s):\n%s" % (rc, err[-3000:])
        a, b = int(m.group(1)), int(m.group(2))
        reported = set(C.reported_finished(err))
        state, _ = C.journal_state(C.journal_path(out))
        names = {i: r["name"] for i, r in state.items()}
        recs, _ = C.journal_records(C.journal_path(out), offsets=True)
        ends = [(run, off, n) for typ, run, _, off, n in recs if typ == 5]
        unsynced = {names[run] for run, off, n in ends if off >= a and off + n <= b}
        synced = {names[run] for run, off, n in ends if off + n <= a}
        assert unsynced, "no RUN_END between bytes %d and %d: the hook proved nothing" % (a, b)
        assert not reported & unsynced, "reported done before their sync: %s" % sorted(
            reported & unsynced)
        assert reported <= synced, "reported done without a synced RUN_END: %s" % sorted(
            reported - synced)
        C.log("  %d runs reported done, %d RUN_END(s) written but not synced at the kill"
              % (len(reported), len(unsynced)))
        rc, _, err = C.run(["run", spec, "-o", out, "--resume"], ranks=3, tag="resume")
        assert rc == 0, "resume: exit %d\n%s" % (rc, err[-3000:])
        state, _ = C.journal_state(C.journal_path(out))
        assert len(state) == RUNS and all(r["finished"] for r in state.values()), state


if __name__ == "__main__":
    C.main([("kill_between_write_and_sync", test_kill_between_write_and_sync)])
