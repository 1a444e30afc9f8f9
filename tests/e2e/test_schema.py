"""Schema version 2 (docs/hdf5-schema.md) on real sweep files:
  - grouped: /runs variant, group, overrides and one column per grid axis; /evals tokens and
    time equal to the step's;
  - provenance: command line, --set, expanded spec, data file SHA-256, per-run UTC times,
    BLAS threads, peak RSS and the SLURM fields of a faked SLURM environment; c_flags;
  - valid UTF-8 for a non-ASCII corpus and a NUL-containing corpus, in the file and in
    `ablate train --json` (lossless through surrogateescape);
  - stable ids: the journal written by ablate 0.1.0 (tests/fixtures/v1) resumes, its runs
    keep their ids and are not re-run; `ablate inspect` reads its version-1 file;
  - the Python recipes of docs/hdf5-schema.md run against the sweep file."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402

FIXTURE = os.path.join(C.SOURCE_DIR, "tests", "fixtures", "v1")
SLURM = {"SLURM_JOB_ID": "774411", "SLURM_ARRAY_TASK_ID": "3", "SLURM_RESTART_COUNT": "2",
         "SLURM_JOB_PARTITION": "gpu-short", "SLURM_JOB_NODELIST": "node[01-02]"}
UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def text(df_col):
    return [v.decode() if isinstance(v, bytes) else v for v in df_col]


def sweep(d):
    """The fixture's spec (2 variants x activation grid x 2 seeds) with --set, faked SLURM."""
    for f in ("corpus.txt", "spec.yaml"):
        shutil.copy(os.path.join(FIXTURE, f), d)
    with open(os.path.join(d, "spec.yaml")) as f:
        spec = f.read().replace("path: corpus.txt", 'path: "${SCHEMA_DATA}"')
        spec = spec.replace("log_every: 2", "log_every: 1")
    C.write(os.path.join(d, "spec.yaml"), spec)
    env = dict(SLURM, SCHEMA_DATA="corpus.txt")
    C.run(["run", "spec.yaml", "-o", "out.h5", "--set", "train.lr=0.005"], cwd=d, env=env,
          expect_rc=0, tag="sweep")
    return os.path.join(d, "out.h5")


def check_grouped(f):
    runs = f["runs"][:]
    assert list(f["runs"].attrs["axes"].splitlines()) == ["activation"]
    names = text(runs["name"])
    assert text(runs["variant"]) == [n.split("/")[0] for n in names]
    assert text(runs["activation"]) == [n.split("/")[1].split("=")[1] for n in names]
    ov = text(runs["overrides"])
    assert ov[0] == "model.activation=relu", ov[0]
    assert ov[-1] == "model.norm=post model.activation=gelu", ov[-1]
    groups = {}
    for g, n, s in zip(text(runs["group"]), names, runs["seed"]):
        groups.setdefault(g, []).append((n.rsplit("/", 1)[0], int(s)))
    assert len(groups) == 4, groups
    for members in groups.values():
        assert len({m[0] for m in members}) == 1 and sorted(m[1] for m in members) == [1, 2]
    assert (runs["train.lr"] == 0.005).all()
    assert f["runs"].attrs["units.train.lr"] == "1"
    assert f["runs"].attrs["units.model.context"] == "tokens"
    # /evals carries the tokens and time of its step
    steps, evals = f["steps"][:], f["evals"][:]
    by = {(int(r), int(s)): (int(t), float(tm)) for r, s, t, tm in
          zip(steps["run"], steps["step"], steps["tokens"], steps["time"])}
    assert len(evals) == 16
    for r, s, t, tm in zip(evals["run"], evals["step"], evals["tokens"], evals["time"]):
        assert by[(int(r), int(s))] == (int(t), float(tm)), (r, s)


def check_provenance(f, d):
    a = f.attrs
    assert a["ablate_schema_version"] == 2
    assert a["command_line"].endswith("run spec.yaml -o out.h5 --set train.lr=0.005"), a["command_line"]
    assert a["sets"] == "train.lr=0.005\n"
    assert a["id_scheme"] == "2"
    assert "-O" in a["c_flags"] and a["c_flags"].strip(), a["c_flags"]
    assert a["slurm_job_id"] == "774411" and a["slurm_nodelist"] == "node[01-02]"
    assert "${SCHEMA_DATA}" in f["spec"].asstr()[()]
    assert "path: \"corpus.txt\"" in f["spec_expanded"].asstr()[()]
    with open(os.path.join(d, "corpus.txt"), "rb") as c:
        data = c.read()
    df = f["data_files"][:]
    assert len(df) == 1 and df["path"][0].decode() == "corpus.txt"
    assert df["bytes"][0] == len(data) and df["sha256"][0].decode() == hashlib.sha256(data).hexdigest()
    runs = f["runs"][:]
    for col in ("start_utc", "attempt_start_utc", "end_utc"):
        assert all(UTC.match(v) for v in text(runs[col])), (col, runs[col][:2])
    assert (runs["peak_rss"] > 1 << 20).all() and (runs["blas_threads"] >= 1).all()
    assert text(runs["slurm_job_id"]) == ["774411"] * 8
    assert text(runs["slurm_array_task_id"]) == ["3"] * 8
    assert (runs["slurm_restart_count"] == 2).all()
    assert text(runs["slurm_partition"]) == ["gpu-short"] * 8
    assert text(runs["slurm_nodelist"]) == ["node[01-02]"] * 8
    assert all(h for h in text(runs["host"]))


def test_grouped_and_provenance():
    with C.workdir("schema") as d:
        out = sweep(d)
        with h5py.File(out, "r") as f:
            check_grouped(f)
            check_provenance(f, d)


def test_docs_recipes():
    """Every ```python block of docs/hdf5-schema.md runs against a real sweep file."""
    with open(os.path.join(C.SOURCE_DIR, "docs", "hdf5-schema.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 4, len(blocks)
    with C.workdir("schema-docs") as d:
        sweep(d)
        for i, code in enumerate(blocks):
            p = subprocess.run([sys.executable, "-c", code], cwd=d, capture_output=True, text=True)
            assert p.returncode == 0, "recipe %d failed:\n%s\n%s" % (i, code, p.stderr)
            C.log("  recipe %d: %d lines of output" % (i, len(p.stdout.splitlines())))


def utf8_case(d, name, corpus_bytes, tokenizer, prompt):
    corpus = os.path.join(d, name + ".txt")
    with open(corpus, "wb") as f:
        f.write(corpus_bytes)
    spec = C.write(os.path.join(d, name + ".yaml"), C.micro_spec(
        corpus, steps=4, seeds=(1,), eval_every=2, stats_every=2, eval_tokens=64,
        sample_tokens=48, batch_size=2).replace("tokenizer: char", "tokenizer: " + tokenizer)
        .replace('prompt: "ROMEO:"', 'prompt: "%s"' % prompt))
    out = os.path.join(d, name + ".h5")
    C.run(["run", spec, "-o", out], expect_rc=0, tag=name)
    with h5py.File(out, "r") as f:
        texts = [t.decode("utf-8") for t in f["samples"]["text"]]  # strict: valid UTF-8
        assert len(texts) == 2
        for t in texts:
            assert "\x00" not in t
        if tokenizer == "char":
            vocab = bytes(f["vocab"][:])
            assert vocab == bytes(sorted(set(corpus_bytes))), (vocab, sorted(set(corpus_bytes)))
    rc, so, _ = C.run(["train", spec, "--json"], expect_rc=0, tag=name + "-json")
    raw = so.encode("utf-8", "surrogateescape") if isinstance(so, str) else so
    raw.decode("utf-8")  # strict: the JSON is valid UTF-8
    samples = [e for e in map(json.loads, raw.decode().splitlines()) if e["event"] == "sample"]
    for s in samples:
        b = s["text"].encode("utf-8", "surrogateescape")
        if tokenizer in ("char", "byte"):
            assert len(b) == s["n_tokens"], (len(b), s["n_tokens"])
    return samples


def test_utf8():
    base = ("Ça va? Grüße, naïve café — ½ ✓ 日本語.\n" * 200).encode()
    with C.workdir("schema-utf8") as d:
        utf8_case(d, "nonascii", base, "char", "Ça")
        utf8_case(d, "bytes", base, "byte", "Gr")
        nul = (b"ab\x00cd ef\x00\x00gh \xff\xfe bad bytes\n" * 300)
        utf8_case(d, "nul", nul, "char", "ab")


def test_v1_resume_and_inspect():
    with C.workdir("schema-v1") as d:
        for f in ("corpus.txt", "spec.yaml", "v1.h5"):
            shutil.copy(os.path.join(FIXTURE, f), d)
        os.mkdir(os.path.join(d, "v1.h5.d"))
        shutil.copy(os.path.join(FIXTURE, "journal"), os.path.join(d, "v1.h5.d", "journal"))
        rc, so, se = C.run(["inspect", "v1.h5"], cwd=d, expect_rc=0, tag="inspect-v1")
        assert "8 runs: 8 done" in so and "schema version 1" in se, (so, se)
        with h5py.File(os.path.join(d, "v1.h5"), "r") as f:
            old = {r["name"].decode(): r["id"].decode() for r in f["runs"][:]}
        with open(os.path.join(d, "spec.yaml")) as f:
            spec = f.read().replace("seeds: [1, 2]", "seeds: [1, 2, 3]")
        C.write(os.path.join(d, "spec.yaml"), spec)
        rc, so, se = C.run(["run", "spec.yaml", "-o", "v1.h5", "--resume"], cwd=d, expect_rc=0,
                           tag="resume-v1")
        assert "12 runs planned (8 already finished), 4 to run" in se, se
        with h5py.File(os.path.join(d, "v1.h5"), "r") as f:
            assert f.attrs["ablate_schema_version"] == 2
            runs = f["runs"][:]
            now = {r["name"].decode(): r["id"].decode() for r in runs}
            assert all(now[n] == i for n, i in old.items()), "old runs changed ids"
            assert (runs["status"] == b"done").all()
            ev = f["evals"][:]
            old_rows = ev[ev["run"] < 8]
            assert (old_rows["tokens"] == old_rows["step"] * 4 * 16).all()  # from the config
            assert np.isnan(old_rows["time"]).all() and not np.isnan(ev[ev["run"] >= 8]["time"]).any()
        rc, so, se = C.run(["inspect", "v1.h5"], cwd=d, expect_rc=0, tag="inspect-v2")
        assert "12 runs: 12 done" in so and "schema version 1" not in se


if __name__ == "__main__":
    C.main([("grouped_and_provenance", test_grouped_and_provenance),
            ("docs_recipes", test_docs_recipes),
            ("utf8", test_utf8),
            ("v1_resume_and_inspect", test_v1_resume_and_inspect)])
