"""A replicate: sweep with one baseline seed flagged by the instability rule drops that
seed index from every contrast and trains the next seed index instead: no contrast ends
`unstable` for it before its last look (only that one cannot be filled from the max seeds
planned), each look uses n usable pairs, the decisions' notes name the dropped
run, the log says so when its result comes in, a --resume of the finished sweep replays
exactly the same decisions (each journaled once), and a sweep on 3 ranks makes them too.

Which run is flagged is chosen with the test hook ABLATE_TEST_FLAG_UNSTABLE
(docs/architecture.md, "Test hooks"): a natural blow-up (a huge learning rate) flags every
seed of a configuration alike, not one baseline seed.
"""
import os
import re
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

VARIANTS = ("  baseline: {}\n"
            "  lr_hi: {train.lr: 3.0e-2}\n"
            "  heads2: {model.n_head: 2}\n")
REPLICATE = ("replicate:\n"
             "  seeds: {min: 2, max: 4}\n"
             "  looks: [2, 3, 4]\n"
             "  resolve: 0.05\n"
             "  alpha: 0.2\n")


def spec_text(corpus):
    s = C.micro_spec(corpus, steps=40, variants=VARIANTS, eval_every=20, stats_every=20,
                     sample_tokens=8)
    return re.sub(r"^seeds: .*$", REPLICATE.rstrip("\n"), s, flags=re.M)


def decisions(out):
    with h5py.File(out, "r") as f:
        d = [{k: C._py(row[k]) for k in row.dtype.names} for row in f["decisions"][()]]
        runs = {C._py(r["name"]): (C._py(r["status"]), C._py(r["instability"]))
                for r in f["runs"][()]}
    return d, runs


def test_baseline_seed_dropped():
    with C.workdir("adaptive-drop") as tmp:
        spec = C.write(os.path.join(tmp, "spec.yaml"), spec_text(C.corpus_path(tmp)))
        ids = {r["name"]: r["id"] for r in C.plan_json(spec)}
        out = os.path.join(tmp, "drop.h5")
        env = {"ABLATE_TEST_FLAG_UNSTABLE": ids["baseline/seed0"]}
        rc, _, err = C.run(["run", spec, "-o", out], env=env, tag="drop")
        assert rc == 0, err[-3000:]
        dec, runs = decisions(out)
        assert runs["baseline/seed0"] == ("done", "above_uniform"), runs
        # the replacement: the baseline's seed index 2 trained for the first look
        assert runs["baseline/seed2"][0] == "done", runs
        assert dec, "no decision"
        for d in dec:
            assert d["n"] == [2, 3, 4][d["look"]], d
            if d["verdict"] != "unstable":
                assert d["note"] == "dropped: baseline/seed0 unstable", d
            else:
                # replacements come from the max seeds planned: the last look (4 pairs of
                # the 4 seeds) cannot be filled, and only it ends unstable, saying why
                assert d["look"] == 2 and d["note"] == \
                    "unstable: 1 of 4 seeds dropped: baseline/seed0 unstable", d
        # seed index 0 of the configurations paired with nothing, whether or not it trained
        said = [ln for ln in err.splitlines() if "seed index 0 is dropped" in ln]
        assert len(said) == 1 and "baseline/seed0 unstable" in said[0] and \
            "every contrast" in said[0], err[-3000:]
        # a resume of the finished sweep replays the same decisions and journals none again
        n_journaled = len([r for r in C.journal_records(C.journal_path(out))[0] if r[0] == 11])
        assert n_journaled == len(dec), (n_journaled, len(dec))
        rc, _, err2 = C.run(["run", spec, "-o", out, "--resume"], env=env, tag="resume")
        assert rc == 0, err2[-3000:]
        dec2, runs2 = decisions(out)
        assert dec2 == dec and runs2 == runs, (dec, dec2)
        assert len([r for r in C.journal_records(C.journal_path(out))[0]
                    if r[0] == 11]) == n_journaled
        # on 3 ranks (runs end in another order): the same decisions (which runs trained
        # before a look made them unneeded depends on timing, as always)
        out3 = os.path.join(tmp, "drop3.h5")
        rc, _, err3 = C.run(["run", spec, "-o", out3], ranks=3, env=env, tag="drop3")
        assert rc == 0, err3[-3000:]
        dec3, runs3 = decisions(out3)
        key = lambda d: (d["contrast"], d["look"])  # noqa: E731
        assert sorted(dec3, key=key) == sorted(dec, key=key), (dec, dec3)
        assert runs3["baseline/seed0"] == ("done", "above_uniform"), runs3
        C.log("%d decisions; baseline/seed0 dropped and replaced, the same on 3 ranks and "
              "after --resume" % len(dec))


if __name__ == "__main__":
    C.main([("baseline_seed_dropped", test_baseline_seed_dropped)])
