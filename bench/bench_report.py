#!/usr/bin/python3
"""Summary of one bench/engine_vs_torch.sh run: reads the run directory the script filled and
prints the table, the targets (PASS/FAIL) and, with --json FILE, writes the figures.

Files in the run directory:
  {micro,book}.ablate.N.jsonl   ablate train --json output of repetition N
  {micro,book}.torch.N.json     bench/torch_gpt_bench.py output of repetition N
  {micro,book}.torchtuned.N.json  the same with glibc malloc told to keep freed memory (optional)
  book.ablate.N.rss             peak RSS of repetition N in KiB (/usr/bin/time -f %M or VmHWM)
  sgemm.*.json                  bench/sgemm_peak output (best GFLOP/s over the file is used)
  micro_gemm.json               sgemm_peak --shapes of the micro step's GEMM calls (diagnostic)
  meta.json                     warm-up steps, targets, environment facts
Exits 0 even when targets fail; 1 only when the inputs are unusable.
  bench_report.py --shapes ABLATE.jsonl   prints the GEMM calls of one step for sgemm_peak.
"""
import glob
import json
import os
import statistics
import sys


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def ablate_run(path, warmup):
    """tokens/s over steps (warmup, N]: (tokens_N - tokens_k) / (time_N - time_k)."""
    events = load_jsonl(path)
    start = next(e for e in events if e["event"] == "start")
    end = next(e for e in events if e["event"] == "end")
    steps = {e["step"]: e for e in events if e["event"] == "step"}
    if end.get("status") != "done":
        raise ValueError(f"{path}: run ended with status {end.get('status')}")
    n = max(steps)
    k = warmup if warmup in steps else 0
    t_k = steps[k]["time"] if k else 0.0
    tok_k = steps[k]["tokens"] if k else 0
    tps = (steps[n]["tokens"] - tok_k) / (steps[n]["time"] - t_k)
    return {"tokens_per_s": tps, "start": start, "end": end, "steps": n, "warmup": k,
            "seconds": steps[n]["time"] - t_k}


def theoretical_memory(start):
    """Bytes a lean pre-norm GPT trainer needs: weights + grads + Adam m and v (4 x params x 4 B)
    plus activations, counted per token (B*T of them), llm.c style:
      top:       C (embedding sum) [+ C+2 input norm] [+ C+2 final norm] + V (logits; their
                 softmax and gradient are made tile by tile, src/model/xent.h)
      per layer: norm1 C+2, qkv QKV, attention probabilities H*T, heads C, attn out C,
                 residual C, norm2 C+2, MLP pre-activation UP, activation FF, MLP out C,
                 residual C   (= 18C + 4 + H*T for a 4x non-gated MLP)
      backward:  one layer's scratch, reused: d_resid C, d_tmp C, d_hidden UP, d_qkv QKV."""
    c = start["config"]
    V, C, L, T = c["model.vocab_size"], c["model.d_model"], c["model.n_layer"], c["model.context"]
    H = c["model.n_head"]
    KV = c["model.n_kv_head"] or H
    hd = C // H
    QKV = (H + 2 * KV) * hd
    FF = round(c["model.mlp_ratio"] * C)
    UP = 2 * FF if c["model.activation"] in ("swiglu", "geglu", "reglu") else FF
    BT = c["train.batch_size"] * T
    top = C + (C + 2 if c["model.input_norm"] else 0) + (C + 2 if c["model.final_norm"] else 0) + V
    layer = (C + 2) + QKV + H * T + C + C + C + (C + 2) + UP + FF + C + C
    bwd = C + C + UP + QKV
    floats = BT * (top + L * layer + bwd)
    state = 4 * start["params"] * 4
    note = (f"B*T={BT} x ({top:,} top incl. V={V} logits + {L} layers x {layer:,} + {bwd:,} "
            f"backward scratch) per token")
    return {"params": start["params"], "state_bytes": state, "activation_floats": floats,
            "activation_bytes": 4 * floats, "theoretical_bytes": state + 4 * floats,
            "activation_note": note}


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_spread(xs):
    return f"[{min(xs):,.0f} .. {max(xs):,.0f}]" if xs else ""


def gemm_shapes(start):
    """The matrix products of one ablate training step (src/model/layers.c), as lines
    "transA transB M N K count" for bench/sgemm_peak --shapes, which runs them the way
    src/model/gemm.c does. Attention's score and value products are loops in ablate, not
    GEMM calls, so they are not listed."""
    c = start["config"]
    V, C, L, T = c["model.vocab_size"], c["model.d_model"], c["model.n_layer"], c["model.context"]
    H = c["model.n_head"]
    KV = c["model.n_kv_head"] or H
    QKV = (H + 2 * KV) * (C // H)
    FF = round(c["model.mlp_ratio"] * C)
    UP = 2 * FF if c["model.activation"] in ("swiglu", "geglu", "reglu") else FF
    N = c["train.batch_size"] * T
    mats = [(QKV, C, L), (C, C, L), (UP, C, L), (C, FF, L), (V, C, 1)]  # (OC, C_in, count)
    lines = []
    for oc, ci, n in mats:
        lines.append(f"N T {N} {oc} {ci} {n}")  # forward: out = inp W^T
        lines.append(f"N N {N} {ci} {oc} {n}")  # backward: dinp = dout W
        lines.append(f"T N {oc} {ci} {N} {n}")  # backward: dW += dout^T inp
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--shapes":
        start = next(e for e in load_jsonl(sys.argv[2]) if e["event"] == "start")
        sys.stdout.write(gemm_shapes(start))
        return 0
    if len(sys.argv) < 2:
        sys.exit("usage: bench_report.py RUN_DIR [--json OUT]")
    d = sys.argv[1]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    meta = json.load(open(os.path.join(d, "meta.json")))
    tg = meta["targets"]
    result = {"meta": meta, "configs": {}}
    verdicts = []

    def verdict(name, value, target, higher_is_better=True, unit="x"):
        ok = value >= target if higher_is_better else value <= target
        sign = ">=" if higher_is_better else "<="
        verdicts.append((name, ok))
        return f"{'PASS' if ok else 'FAIL'}  {name}: {value:.2f}{unit} (target {sign} {target}{unit})"

    sgemm = []
    for p in sorted(glob.glob(os.path.join(d, "sgemm.*.json"))):
        sgemm += load_jsonl(p)
    gflops = max((s["gflops"] for s in sgemm), default=float("nan"))
    shapes = [s for s in sgemm if "shapes_seconds" in s]

    print()
    print("=" * 78)
    print(f"engine_vs_torch  {meta['date']}  host: {meta['cpu']}  ({meta['nproc']} cores)")
    print(f"{meta['ablate_version']}   torch {meta.get('torch_version', '?')}   "
          f"load average before/after: {meta.get('load_before', '?')} / {meta.get('load_after', '?')}")
    print(f"OPENBLAS_CORETYPE: {meta['coretype_env']}")
    loads = [float(meta.get(k, 0) or 0) for k in ("load_before", "load_after")]
    lp = os.path.join(d, "load.txt")
    if os.path.exists(lp):
        loads += [float(x) for x in open(lp).read().split()]
    result["load_max"] = max(loads)
    if max(loads) > 1.5:
        print(f"WARNING: the machine was busy (load average up to {max(loads):.1f}; the benchmark "
              f"itself adds 1): figures are noisy, rerun on a quiet machine")
    lines = []
    for cfg in ("micro", "book"):
        files = sorted(glob.glob(os.path.join(d, f"{cfg}.ablate.*.jsonl")))
        if not files:
            continue
        warm = meta[cfg]["ablate_warmup"]
        a_runs = [ablate_run(p, warm) for p in files]
        t_runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, f"{cfg}.torch.*.json")))]
        tt_runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, f"{cfg}.torchtuned.*.json")))]
        a_tps = [r["tokens_per_s"] for r in a_runs]
        t_tps = [r["tokens_per_s"] for r in t_runs]
        tt_tps = [r["tokens_per_s"] for r in tt_runs]
        start = a_runs[0]["start"]
        fpt = start["flops_per_token"]
        a_core = sorted({r["start"].get("blas_core", "?") for r in a_runs})
        t_core = sorted({r["blas"].get("openblas_core", "?") for r in t_runs})
        sg_cores = sorted({s["core"] for s in sgemm})
        if len(set(a_core) | set(t_core) | (set(sg_cores) if cfg == "book" else set())) > 1:
            print(f"WARNING: {cfg}: the sides used different OpenBLAS cores: ablate {a_core}, "
                  f"torch {t_core}, sgemm_peak {sg_cores}")
        c = start["config"]
        r = {"params": start["params"], "flops_per_token": fpt,
             "batch": c["train.batch_size"], "context": c["model.context"],
             "ablate_tokens_per_s": a_tps, "torch_tokens_per_s": t_tps,
             "ablate_median": median(a_tps), "torch_median": median(t_tps),
             "ablate_blas_core": a_core, "torch_blas_core": t_core,
             "ablate_steps": a_runs[0]["steps"], "ablate_warmup": a_runs[0]["warmup"],
             "torch_steps": t_runs[0]["steps"] if t_runs else None,
             "torch_warmup": t_runs[0]["warmup"] if t_runs else None}
        r["ratio"] = r["ablate_median"] / r["torch_median"] if t_tps else float("nan")
        print()
        print(f"--- {cfg}: {start['params']:,} params, batch {r['batch']} x context {r['context']}, "
              f"{fpt / 1e6:.3f} MFLOP/token (ablate's count)")
        print(f"  BLAS core: ablate {','.join(a_core)}   torch {','.join(t_core)}"
              f" ({t_runs[0]['blas'].get('blas_info', '?')} BLAS -> "
              f"{os.path.basename(t_runs[0]['blas'].get('libs', ['?'])[-1]) if t_runs else '?'}, "
              f"{t_runs[0]['blas'].get('openblas_threads', '?') if t_runs else '?'} thread)")
        print(f"  ablate  {r['ablate_median']:>12,.0f} tokens/s  median of {len(a_tps)} {fmt_spread(a_tps)}"
              f"  (steps {r['ablate_warmup']}..{r['ablate_steps']})")
        if t_tps:
            print(f"  torch   {r['torch_median']:>12,.0f} tokens/s  median of {len(t_tps)} {fmt_spread(t_tps)}"
                  f"  (steps {r['torch_warmup']}..{r['torch_steps']})")
        if tt_tps:
            r["torch_tuned_tokens_per_s"] = tt_tps
            r["torch_tuned_median"] = median(tt_tps)
            r["ratio_tuned"] = r["ablate_median"] / r["torch_tuned_median"]
            print(f"  torch*  {r['torch_tuned_median']:>12,.0f} tokens/s  median of {len(tt_tps)} "
                  f"{fmt_spread(tt_tps)}  (* glibc malloc keeps freed memory: {meta.get('tuned_env', '')})")
        if t_tps:
            print(f"  ratio ablate/torch: {r['ratio']:.2f}x"
                  + (f"   (vs torch*: {r['ratio_tuned']:.2f}x)" if tt_tps else ""))
            lines.append(verdict(f"{cfg} ablate/torch", r["ratio"], tg[f"{cfg}_ratio"]))
        micro_gemm = os.path.join(d, "micro_gemm.json")
        if cfg == "micro" and os.path.exists(micro_gemm) and t_tps:
            g = load_jsonl(micro_gemm)[0]
            step = r["batch"] * r["context"] / r["ablate_median"]
            budget = r["batch"] * r["context"] / (tg["micro_ratio"] * r["torch_median"])
            r["gemm_only_step_seconds"] = g["shapes_seconds"]
            r["step_seconds"] = step
            r["target_step_seconds"] = budget
            print(f"  (diagnostic) ablate's GEMM calls of one step, timed alone in OpenBLAS: "
                  f"{1e3 * g['shapes_seconds']:.3f} ms at {g['shapes_gflops']:.1f} GFLOP/s; ablate's step "
                  f"takes {1e3 * step:.3f} ms ({100 * g['shapes_seconds'] / step:.0f}% of it; ablate runs "
                  f"products this small in its own kernel, bench/engine_limit.sh times those); "
                  f"{tg['micro_ratio']}x torch needs a step of at most {1e3 * budget:.3f} ms")
        if cfg == "book":
            limit = gflops * 1e9 / fpt
            r["sgemm_gflops"] = gflops
            r["sgemm_limit_tokens_per_s"] = limit
            r["sgemm_fraction"] = r["ablate_median"] / limit
            cores = sorted({s["core"] for s in sgemm})
            print(f"  sgemm-bound limit: {gflops:.1f} GFLOP/s (square, 1 thread, core {','.join(cores)})"
                  f" / {fpt / 1e6:.2f} MFLOP/token = {limit:,.0f} tokens/s;"
                  f" ablate reaches {100 * r['sgemm_fraction']:.1f}%")
            lines.append(verdict("book fraction of the sgemm limit", 100 * r["sgemm_fraction"],
                                 tg["book_sgemm_pct"], unit="%"))
            if shapes:
                best = min(s["shapes_seconds"] for s in shapes)
                sg = max(s["shapes_gflops"] for s in shapes)
                tokens_step = r["batch"] * r["context"]
                r["gemm_only_step_seconds"] = best
                r["gemm_only_tokens_per_s"] = tokens_step / best
                print(f"  (diagnostic) ablate's own GEMM calls of one step, timed alone: {best:.3f} s"
                      f" at {sg:.1f} GFLOP/s -> {tokens_step / best:,.0f} tokens/s; ablate's step takes"
                      f" {tokens_step / r['ablate_median']:.3f} s, so {100 * best / (tokens_step / r['ablate_median']):.0f}%"
                      f" of it is GEMM")
            # memory
            rss = []
            for p in sorted(glob.glob(os.path.join(d, "book.ablate.*.rss"))):
                txt = open(p).read().split()
                if txt and txt[-1].isdigit():
                    rss.append(int(txt[-1]))
            mem = theoretical_memory(start)
            r["memory"] = mem
            theo = mem["theoretical_bytes"]
            if rss:
                peak = max(rss) * 1024
                r["peak_rss_bytes"] = peak
                r["theoretical_bytes"] = theo
                r["rss_ratio"] = peak / theo
                print(f"  memory: peak RSS {peak / 2**20:,.1f} MiB (max of {len(rss)} runs, "
                      f"{meta['rss_method']}) vs theoretical {theo / 2**20:,.1f} MiB = "
                      f"{mem['state_bytes'] / 2**20:,.1f} MiB weights+grads+Adam m,v (16 B x "
                      f"{mem['params']:,} params) + {mem['activation_bytes'] / 2**20:,.1f} MiB activations "
                      f"({mem['activation_floats']:,} floats: {mem['activation_note']}); "
                      f"ratio {r['rss_ratio']:.2f}")
                if t_runs:
                    tr = max(x["peak_rss_kib"] for x in t_runs) * 1024
                    r["torch_peak_rss_bytes"] = tr
                    print(f"  (for comparison) torch peak RSS {tr / 2**20:,.1f} MiB = {tr / theo:.2f}x the theoretical")
                lines.append(verdict("book peak RSS / theoretical", r["rss_ratio"], tg["rss_ratio"],
                                     higher_is_better=False))
        result["configs"][cfg] = r
    print()
    print("Targets:")
    for ln in lines:
        print("  " + ln)
    result["verdicts"] = {name: ok for name, ok in verdicts}
    print("=" * 78)
    if out_json:
        with open(out_json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
