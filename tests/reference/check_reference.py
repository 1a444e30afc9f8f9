#!/usr/bin/env python3
"""Compares the C GPT (through tests/refdump) with the independent PyTorch reference
(gpt_ref.py) on a list of small configurations that together cover every value of every
model knob of the C knob table (read through `refdump --knobs`). See README.md in this directory for what is compared and why the tolerances are
what they are.

usage: check_reference.py PATH/TO/refdump [-k SUBSTRING] [-v] [--keep DIR]
Exit status 0 when every configuration passes, 1 otherwise (the failures are listed).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

# ---------------------------------------------------------------------------------------------
# Tolerances (README.md explains each one). All errors are measured against the float64
# reference and normalized by a scale of the compared quantity, so they are float32 round-off
# ratios independent of the model size.
TOL_LOGITS = 1e-5    # max|logits_c - logits_ref| / max|logits_ref|
TOL_LOSS = 1e-6      # |loss_c - loss_ref| / loss_ref
TOL_GRAD = 1e-4      # per tensor: max|g_c - g_ref| / max|g_ref| (and the same for the L2 norms)
GRAD_FLOOR = 1e-3    # ... relative to the largest gradient of the model, for tensors whose
                     # reference gradient is (mathematically) ~0, e.g. a k bias without RoPE
TOL_ADAM = 1e-4      # per step: max|p_c - p_ref| / lr, torch AdamW fed the C's gradients
TOL_INIT_STD = 0.25  # relative error of the sample std of N(0, s) tensors with >= 256 entries
TOL_STATS = 1e-5     # activation statistics: |c - ref| / scale (max|h|, rms, 1 nat)
TOL_GRAD_NORM = 1e-4  # per-layer gradient norm, relative (the gradients' own tolerance)

LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 1e-8, 0.1

# Base model for the list below; each config overrides some keys.
BASE = dict(vocab_size=37, d_model=16, n_head=2, n_layer=2, mlp_ratio=2, init_std=0.1)


def cfgs():
    """(name, B, T, {knob: value}) covering every value of every model knob."""
    out = []
    # The 16 placement x norm_type x affine combinations, each with a different mix of the
    # other knobs so that the combinations below also cover every activation and position.
    acts = gpt_ref.ACTIVATIONS
    i = 0
    for norm in gpt_ref.NORMS:
        for ntype in gpt_ref.NORM_TYPES:
            for affine in (1, 0):
                k = dict(BASE)
                k.update(norm=norm, norm_type=ntype, norm_affine=affine,
                         activation=acts[i % len(acts)],
                         position=gpt_ref.POSITIONS[i % 3],
                         input_norm=(i // 2) % 2, final_norm=(i + 1) % 2,
                         qkv_bias=i % 2, out_bias=(i // 2) % 2, mlp_bias=(i // 4) % 2,
                         tie_embeddings=(i // 3) % 2)
                out.append((f"{norm}-{ntype}-{'aff' if affine else 'noaff'}-{k['activation']}",
                            2, 8, k))
                i += 1
    # Remaining activations in a second placement, and targeted features.
    extra = [
        ("gelu_tanh-book", 2, 8, dict(activation="gelu_tanh", norm="pre", norm_type="layernorm",
                                      norm_affine=1, input_norm=0, final_norm=1, out_bias=1,
                                      mlp_bias=1)),
        ("silu-post-rope", 2, 8, dict(activation="silu", norm="post", position="rope")),
        ("relu2-peri", 3, 8, dict(activation="relu2", norm="peri", norm_affine=1)),
        ("geglu-gqa2-rope", 2, 8, dict(activation="geglu", n_head=4, n_kv_head=2, position="rope",
                                       norm_affine=1, qkv_bias=1)),
        ("swiglu-mqa-qknorm-rope", 2, 8, dict(activation="swiglu", n_head=4, n_kv_head=1,
                                              position="rope", qk_norm=1, norm_affine=1,
                                              mlp_ratio=2.5)),
        ("qknorm-learned-ln", 2, 8, dict(qk_norm=1, position="learned", norm_type="layernorm",
                                         norm_affine=1, qkv_bias=1, activation="gelu")),
        ("qknorm-rope-noaff", 2, 8, dict(qk_norm=1, position="rope", norm_affine=0,
                                         activation="tanh")),
        ("qknorm-none-gqa-ln", 2, 8, dict(qk_norm=1, position="none", norm_type="layernorm",
                                          norm_affine=1, n_head=4, n_kv_head=2)),
        ("rope-base500-mqa", 2, 8, dict(position="rope", rope_base=500, n_kv_head=1,
                                        activation="reglu", qkv_bias=1)),
        ("mlp2.5-all-bias-tied", 3, 8, dict(mlp_ratio=2.5, qkv_bias=1, out_bias=1, mlp_bias=1,
                                            tie_embeddings=1, norm_affine=1, final_norm=1,
                                            activation="silu")),
        ("1layer-eps1e-3", 2, 8, dict(n_layer=1, norm_eps=1e-3, norm_type="rmsnorm",
                                      norm_affine=1, init_std=0.02, activation="gelu")),
        ("ln-eps1e-2-qknorm", 2, 8, dict(norm_type="layernorm", norm_eps=1e-2, norm_affine=1,
                                         qk_norm=1, final_norm=1, norm="post")),
        ("3layer-context12", 2, 8, dict(n_layer=3, context=12, d_model=24, n_head=3,
                                        activation="swiglu", norm="peri", norm_affine=1)),
        ("hd8-rope-gqa-post-ln", 2, 8, dict(d_model=32, n_head=4, n_kv_head=2, position="rope",
                                            norm="post", norm_type="layernorm", norm_affine=1,
                                            qk_norm=1, activation="gelu_tanh")),
    ]
    for name, B, T, k in extra:
        kk = dict(BASE)
        kk.update(k)
        out.append((name, B, T, kk))
    # model.init torch (PyTorch's module defaults): every linear weight and bias uniform,
    # embeddings N(0, 1); the book's layout (biases, layernorm, untied lm_head), and experts
    out.append(("torch-init-book", 2, 8, dict(BASE, init="torch", qkv_bias=1, out_bias=1,
                                              mlp_bias=1, norm_type="layernorm", norm_affine=1,
                                              final_norm=1, activation="gelu_tanh")))
    out.append(("torch-init-moe-swiglu", 2, 8, dict(BASE, init="torch", moe_experts=3,
                                                    moe_top_k=2, mlp_bias=1,
                                                    activation="swiglu")))
    # The micro defaults as they are (vocab set; everything else the default).
    out.append(("micro-defaults-T16", 2, 16, dict(vocab_size=37)))
    # rows longer than the 16-lane loops of the C softmax, plus a remainder
    out.append(("T20-context24-rope-gqa", 2, 20, dict(BASE, context=24, n_head=4, n_kv_head=2,
                                                     position="rope", activation="gelu",
                                                     norm_affine=1, norm_type="layernorm")))
    # attention runs 16 (batch, head) pairs per group (src/model/attention.h): 20 pairs make
    # two groups, the second one padded; 16 pairs exactly one, unpadded
    out.append(("lanes-2groups-gqa-qknorm-rope", 5, 8, dict(BASE, n_head=4, n_kv_head=2,
                                                            qk_norm=1, position="rope")))
    out.append(("lanes-16pairs-hd5", 8, 6, dict(BASE, d_model=10, n_head=2, context=6)))
    # too few pairs for the pair lanes: 16 positions of a pair side by side (position lanes),
    # three blocks of them, the last partial (most configs above take them too, in one block)
    out.append(("positions-1head-3blocks", 2, 40, dict(BASE, n_head=1, context=40)))
    # Products run in row (or reduction) pieces for OpenBLAS's small-matrix kernels and the
    # forward multiplies by transposed weight copies (src/model/gemm.h). The studies' sizes do
    # that on AVX-512 cores only and these configs are far smaller, so a lower limit forces
    # it: 16-row pieces, an uneven last piece (36 rows), tied and untied lm_head, a GLU.
    out.append(("gemm-pieces-tied-swiglu", 3, 12, dict(BASE, tie_embeddings=1,
                                                       activation="swiglu", qkv_bias=1,
                                                       mlp_bias=1, **{GEMM_LIMIT: 12288})))
    out.append(("gemm-pieces-gqa-rope", 4, 16, dict(BASE, n_head=4, n_kv_head=2,
                                                    position="rope", out_bias=1,
                                                    **{GEMM_LIMIT: 12288})))
    # Mixture of experts (gpt.h, "moe"): top-1 (Switch gate) and top-2..3 (renormalized
    # gates), every expert width, GLU experts with biases, both layer choices, the capacity
    # (assignments dropped), both auxiliary losses, router ties and experts without tokens
    # (a zeroed router: every probability 1/E, so the lowest indices take every token).
    moe = dict(BASE, moe_experts=4)
    out.append(("moe-e4k1-relu", 2, 8, dict(moe, activation="relu")))
    out.append(("moe-e4k2-swiglu-bias-zloss", 2, 8, dict(moe, moe_top_k=2, activation="swiglu",
                                                          moe_ratio=1.5, mlp_bias=1,
                                                          norm_type="layernorm", norm_affine=1,
                                                          moe_balance=0.1, moe_zloss=0.01)))
    out.append(("moe-e8k1-every_other-cap-post", 2, 8, dict(moe, moe_experts=8, n_layer=3,
                                                             moe_layers="every_other",
                                                             moe_capacity=1.0, norm="post",
                                                             activation="gelu")))
    out.append(("moe-e4k2-cap0.5-peri", 3, 8, dict(moe, moe_top_k=2, moe_capacity=0.5,
                                                    norm="peri", activation="gelu_tanh",
                                                    moe_zloss=0.1)))
    out.append(("moe-e3k3-rope-tied", 2, 8, dict(moe, moe_experts=3, moe_top_k=3,
                                                  position="rope", tie_embeddings=1,
                                                  activation="silu")))
    out.append(("moe-ties-e3k1-zero-router", 2, 8, dict(moe, moe_experts=3, **{ZERO: "router.w"})))
    out.append(("moe-ties-e5k2-zero-router", 2, 8, dict(moe, moe_experts=5, moe_top_k=2,
                                                         activation="reglu",
                                                         **{ZERO: "router.w"})))
    out.append(("moe-every_other-gemm-pieces", 3, 12, dict(moe, moe_layers="every_other",
                                                           mlp_bias=1, **{GEMM_LIMIT: 12288})))
    # Mixture of heads (gpt.h, "moh"): shared + routed top-k heads, two-stage gates, the
    # balance loss; with GQA and RoPE; and a zeroed router (ties: the first routed heads).
    moh = dict(BASE, n_head=4, moh_shared=1, moh_top_k=2)
    # model.init_seed: the C weights are loaded into the reference, so any seed is compared
    out.append(("moh-s1k2", 2, 8, dict(moh, moh_balance=0.1, init_seed=7)))
    out.append(("moh-s2k1-gqa-rope-ln", 2, 8, dict(moh, moh_shared=2, moh_top_k=1, n_kv_head=2,
                                                    position="rope", norm_type="layernorm",
                                                    norm_affine=1, qkv_bias=1, out_bias=1)))
    out.append(("moh-s1k3-all-routed-post", 2, 8, dict(moh, moh_top_k=3, norm="post")))
    out.append(("moh-ties-zero-router-moe", 2, 8, dict(moh, d_model=24, moh_top_k=1, moe_experts=3,
                                                        moe_top_k=2, **{ZERO: "moh.w"})))
    return out


# Not a model knob: refdump's --zero=NAME (zeroes a tensor after the initialization).
ZERO = "_zero"
NOT_KNOBS = {"_gemm_small_limit", ZERO}


# Not a model knob: refdump's --gemm-small-limit (src/model/gemm.h).
GEMM_LIMIT = "_gemm_small_limit"


def gemm_pieces(limit, M, N, K):
    """Row pieces src/model/gemm.c cuts an NN product into (1: not split)."""
    if limit <= 0 or M * N * K <= limit or limit // (N * K) < 16:
        return 1
    piece = limit // (N * K) // 16 * 16
    return -(-M // piece)


def model_knobs(refdump):
    """The model knobs of the C knob table (src/worker/knobs.c), from `refdump --knobs`:
    [{name, type, default, choices (enums)}]."""
    p = subprocess.run([refdump, "--knobs"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"refdump --knobs failed ({p.returncode}): {p.stderr}")
    return json.loads(p.stdout)


def coverage_problems(configs, knobs):
    """Every value of every enum and bool model knob of the knob table, and a value other than
    the default of every numeric one, appears in some config (refdump's defaults filled in),
    so a knob or value added to the table fails here until a config covers it. Then the
    combinations the table cannot state: placement x norm type x affine, GQA and MQA, qk_norm
    with two positions, a RoPE base other than the default, a non-integer mlp_ratio."""
    defaults = {k["name"]: k["default"] for k in knobs}
    seen = {}
    combos = set()
    for _, _, T, k in configs:
        full = dict(defaults, context=T)  # refdump's context is T unless given
        full.update({key: v for key, v in k.items() if key not in NOT_KNOBS})
        for key, val in full.items():
            seen.setdefault(key, []).append(int(val) if isinstance(val, bool) else val)
        combos.add((full["norm"], full["norm_type"], int(full["norm_affine"])))
        if full["qk_norm"]:
            seen.setdefault("qk_norm+position", []).append(full["position"])
        if full["position"] == "rope" and not same_value(full["rope_base"], defaults["rope_base"]):
            seen.setdefault("rope_base!=default with rope", []).append(1)
        if float(full["mlp_ratio"]) != int(float(full["mlp_ratio"])):
            seen.setdefault("mlp_ratio non-integer", []).append(1)
        if full["moh_top_k"] > 0 and ZERO in k and k[ZERO] == "moh.w":
            seen.setdefault("moh router ties", []).append(1)
        if full["moe_experts"] > 1:
            seen.setdefault("moe top_k", []).append(min(int(full["moe_top_k"]), 3))
            if ZERO in k and k[ZERO] == "router.w":
                seen.setdefault("moe router ties", []).append(int(full["moe_top_k"]))
            if float(full["moe_capacity"]) > 0:
                seen.setdefault("moe capacity with top_k", []).append(int(full["moe_top_k"]))
    problems = []
    for kn in knobs:
        name, got = kn["name"], seen.get(kn["name"], [])
        if kn["type"] in ("enum", "bool"):
            need = kn["choices"] if kn["type"] == "enum" else [0, 1]
            missing = [v for v in need if v not in got]
            if missing:
                problems.append(f"model.{name}: {missing} not covered")
        elif all(same_value(v, kn["default"]) for v in got):
            problems.append(f"model.{name}: no config sets a value other than the default "
                            f"{kn['default']}")
    need = {"n_kv_head": [0, 1, 2], "qk_norm+position": ["rope", "learned"],
            "rope_base!=default with rope": [1], "mlp_ratio non-integer": [1],
            "moe top_k": [1, 2, 3], "moe router ties": [1, 2], "moe capacity with top_k": [1, 2],
            "moh router ties": [1]}
    for key, values in need.items():
        missing = [v for v in values if v not in seen.get(key, [])]
        if missing:
            problems.append(f"{key}: {missing} not covered")
    for kn in knobs:
        if kn["name"] == "norm":
            placements = kn["choices"]
        if kn["name"] == "norm_type":
            types = kn["choices"]
    for n in placements:
        for t in types:
            for a in (0, 1):
                if (n, t, a) not in combos:
                    problems.append(f"norm={n} norm_type={t} norm_affine={a} not covered")
    return problems


def fmt_val(v):
    return str(v)


def run_refdump(refdump, outdir, B, T, seed, knobs):
    args = [refdump, outdir, str(B), str(T), str(seed)]
    args += [f"--gemm-small-limit={knobs[GEMM_LIMIT]}"] if GEMM_LIMIT in knobs else []
    args += [f"--zero={knobs[ZERO]}"] if ZERO in knobs else []
    args += [f"model.{k}={fmt_val(v)}" for k, v in knobs.items() if k not in NOT_KNOBS]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"refdump failed ({p.returncode}): {' '.join(args)}\n{p.stderr}")


def same_value(requested, got):
    if isinstance(got, str):
        return str(requested) == got
    return math.isclose(float(requested), float(got), rel_tol=1e-12)


def compare_grads(ref, loss_r, grads_c, slice_of, fails, what):
    """Backward of the reference loss, per-tensor comparison with the C gradients.
    Returns (worst error, its tensor)."""
    loss_r.backward()
    gmax_all = max(p.grad.abs().max().item() for p in ref.P.values())
    worst, worst_key = 0.0, ""
    for key, p in ref.P.items():
        gr = p.grad.numpy()
        gc = slice_of(grads_c, key)
        d = np.abs(gc - gr)
        scale_max = max(np.abs(gr).max(), GRAD_FLOOR * gmax_all)
        scale_norm = max(np.linalg.norm(gr), GRAD_FLOOR * gmax_all)
        e = max(d.max() / scale_max, np.linalg.norm(gc - gr) / scale_norm)
        if e > worst:
            worst, worst_key = e, key
        if not e <= TOL_GRAD:
            idx = np.unravel_index(d.argmax(), d.shape)
            fails.append(f"{what}grad {key}: rel "
                         f"error {e:.3g} (max|d| {d.max():.3g}, max|g_ref| {np.abs(gr).max():.3g}, "
                         f"|g_c|/|g_ref| {np.linalg.norm(gc) / max(np.linalg.norm(gr), 1e-300):.4g}; "
                         f"worst at {tuple(int(i) for i in idx)}: C {gc[idx]:.6g} ref {gr[idx]:.6g})")
    return worst, worst_key


def compare_stats(cfg, trace, ref, stats_c, fails):
    """The C's per-layer statistics (stats.json) against the same quantities computed from the
    reference forward (trace) and backward (ref.P[..].grad). Returns the worst error."""
    worst = 0.0

    def check(what, l, c, r, scale, tol=TOL_STATS):
        nonlocal worst
        e = abs(c - r) / scale
        worst = max(worst, e)
        if not e <= tol:
            fails.append(f"stats layer {l} {what}: C {c:.8g} ref {r:.8g} (error {e:.3g} of "
                         f"scale {scale:.3g})")

    moe = {m["l"]: m for m in trace.get("moe", [])}
    moh = {m["l"]: m for m in trace.get("moh", [])}
    for l, sc in enumerate(stats_c):
        if l in moe:  # the router's statistics (gpt.h, LayerStats)
            m = moe[l]
            E = cfg["moe_experts"]
            for e in range(E):
                check(f"expert_frac[{e}]", l, sc["expert_frac"][e], m["expert_frac"][e].item(), 1.0)
            check("router_entropy", l, sc["router_entropy"], m["router_entropy"].item(), 1.0)
            for key in ("moe_balance", "moe_zloss"):
                r = m[key].item()
                check(key, l, sc[key], r, max(abs(r), 1e-30))
            check("moe_dropped", l, sc["moe_dropped"], m["moe_dropped"], 1.0)
        if l in moh:
            m = moh[l]
            for hh in range(cfg["n_head"]):
                check(f"head_frac[{hh}]", l, sc["head_frac"][hh], m["head_frac"][hh].item(), 1.0)
            check("moh_entropy", l, sc["moh_entropy"], m["moh_entropy"].item(), 1.0)
            r = m["moh_balance"].item()
            check("moh_balance", l, sc["moh_balance"], r, max(abs(r), 1e-30))
        if l not in moe and any(v != 0 for v in sc.get("expert_frac", [])):
            fails.append(f"stats layer {l}: a dense block reports expert fractions")
        h = trace["h"][l]
        n = h.numel()
        zeros = (h == 0).sum().item()
        # an element whose pre-activation is within round-off of 0 may be 0 on one side only
        if abs(sc["zero_frac"] * n - zeros) > 2:
            fails.append(f"stats layer {l} zero_frac: C {sc['zero_frac']:.6g} ref {zeros / n:.6g}")
        hmax = max(h.abs().max().item(), 1e-30)
        rms = h.pow(2).mean().sqrt().item()
        # near_zero_frac: |h| <= 0.1 rms (GPT_NEAR_ZERO), recomputed in float64 from the
        # reference's h; an element within round-off of the threshold may fall either side
        ha, tau = h.double().abs(), 0.1 * h.double().pow(2).mean().sqrt().item()
        lo = (ha <= tau * (1 - 1e-5)).sum().item()
        hi = (ha <= tau * (1 + 1e-5)).sum().item()
        if not lo - 2 <= sc["near_zero_frac"] * n <= hi + 2:
            fails.append(f"stats layer {l} near_zero_frac: C {sc['near_zero_frac']:.6g} ref "
                         f"{lo / n:.6g}..{hi / n:.6g}")
        check("max", l, sc["max"], h.max().item(), hmax)
        pre = trace["pre"][l]  # the nonlinearity's input (GLU: the gate's)
        pmax = max(pre.abs().max().item(), 1e-30)
        check("pre_max", l, sc["pre_max"], pre.max().item(), pmax)
        check("pre_min", l, sc["pre_min"], pre.min().item(), pmax)
        check("min", l, sc["min"], h.min().item(), hmax)
        check("mean", l, sc["mean"], h.mean().item(), hmax)
        check("rms", l, sc["rms"], rms, max(rms, 1e-30))
        x = trace["resid"][l]
        xr = x.pow(2).mean().sqrt().item()
        check("resid_rms", l, sc["resid_rms"], xr, xr)
        att = trace["att"][l]  # (B, H, T, T), zeros above the diagonal
        plogp = torch.where(att > 0, att * att.clamp_min(1e-300).log(), torch.zeros_like(att))
        ent = (-plogp.sum(-1)).mean(dim=(0, 2))  # per head, mean over (b, t)
        for hh in range(cfg["n_head"]):
            check(f"attn_entropy[{hh}]", l, sc["attn_entropy"][hh], ent[hh].item(), 1.0)
        gn = math.sqrt(sum(g.pow(2).sum().item() for g in
                           (ref.layer_grad(key, l) for key in ref.P if key not in gpt_ref.GLOBAL_KEYS)
                           if g is not None))
        check("grad_norm", l, sc["grad_norm"], gn, max(gn, 1e-30), TOL_GRAD_NORM)
    return worst


def check_one(refdump, name, B, T, knobs, seed, workdir, verbose):
    """Returns (row dict, [failure messages])."""
    fails = []
    row = dict(name=name)
    outdir = os.path.join(workdir, name)
    run_refdump(refdump, outdir, B, T, seed, knobs)
    with open(os.path.join(outdir, "manifest.json")) as f:
        man = json.load(f)
    cfg = man["model"]

    # 1. the knobs arrived where they should
    for k, v in knobs.items():
        if k in cfg and not same_value(v, cfg[k]):
            fails.append(f"knob model.{k}={v} read back as {cfg[k]}")
    if cfg["head_dim"] != gpt_ref.head_dim(cfg) or cfg["kv_heads"] != gpt_ref.kv_heads(cfg) \
            or cfg["d_ff"] != gpt_ref.d_ff(cfg):
        fails.append(f"derived sizes (head_dim, kv_heads, d_ff) = "
                     f"({cfg['head_dim']}, {cfg['kv_heads']}, {cfg['d_ff']}), expected "
                     f"({gpt_ref.head_dim(cfg)}, {gpt_ref.kv_heads(cfg)}, {gpt_ref.d_ff(cfg)})")

    if GEMM_LIMIT in knobs:  # the limit arrived, and the products really run in pieces
        qkv = (cfg["n_head"] + 2 * cfg["kv_heads"]) * cfg["head_dim"]
        pieces = gemm_pieces(man["gemm_small_limit"], B * T, qkv, cfg["d_model"])
        if man["gemm_small_limit"] != knobs[GEMM_LIMIT] or pieces < 2:
            fails.append(f"gemm small limit {man['gemm_small_limit']} (asked "
                         f"{knobs[GEMM_LIMIT]}): the qkv product runs in {pieces} piece(s)")

    # 2. the tensor table
    expected = gpt_ref.expected_tensors(cfg)
    got = {t["name"]: t for t in man["tensors"]}
    exp_keys = [e[0] for e in expected]
    if sorted(got) != sorted(exp_keys):
        missing = [key for key in exp_keys if key not in got]
        extra = [key for key in got if key not in exp_keys]
        fails.append(f"tensor table: missing {missing}, unexpected {extra}")
    n_exp = sum(int(np.prod(e[1])) for e in expected)
    if man["n_params"] != n_exp or man["model_param_count"] != n_exp:
        fails.append(f"n_params {man['n_params']} / model_param_count {man['model_param_count']}"
                     f" != reference count {n_exp}")
    if man["active_param_count"] != gpt_ref.active_params(cfg):
        fails.append(f"active parameters {man['active_param_count']} != reference count "
                     f"{gpt_ref.active_params(cfg)}")
    spans = []
    for key, shape, decay, init in expected:
        t = got.get(key)
        if t is None:
            continue
        if tuple(t["shape"]) != tuple(shape) or t["size"] != int(np.prod(shape)):
            fails.append(f"{key}: shape {t['shape']} size {t['size']}, "
                         f"expected {list(shape)}")
        if t["decay"] != decay:
            fails.append(f"{key}: decay {t['decay']}, expected {decay}")
        if t["init"] != init:
            fails.append(f"{key}: init kind {t['init']}, expected {init}")
        spans.append((t["offset"], t["offset"] + t["size"], key))
    spans.sort()
    for (a0, a1, ka), (b0, b1, kb) in zip(spans, spans[1:]):
        if b0 < a1:
            fails.append(f"tensors {ka} and {kb} overlap in the buffer")
    if spans and spans[-1][1] > man["n_params"]:
        fails.append(f"tensor {spans[-1][2]} runs past n_params")
    if fails:
        return row, fails  # the rest would only repeat the table mismatch

    def load(fname, dtype=np.float32):
        return np.fromfile(os.path.join(outdir, fname), dtype=dtype)

    p0 = load("params0.bin")
    grads_c = load("grads.bin")
    x = torch.from_numpy(load("x.bin", np.int32).astype(np.int64)).reshape(B, T)
    y = torch.from_numpy(load("y.bin", np.int32).astype(np.int64)).reshape(B, T)
    V = cfg["vocab_size"]
    logits_c = load("logits.bin").astype(np.float64).reshape(B, T, V)
    with open(os.path.join(outdir, "loss.txt")) as f:
        loss_c = float(f.read())

    def slice_of(buf, key):
        t = got[key]
        return buf[t["offset"]: t["offset"] + t["size"]].astype(np.float64).reshape(t["shape"])

    # 3. initialization
    L = cfg["n_layer"]
    for key, shape, decay, init in expected:
        if key == knobs.get(ZERO):  # zeroed on purpose after the initialization
            continue
        v = slice_of(p0, key)
        fan = gpt_ref.torch_fan_in(cfg, key) if cfg.get("init") == "torch" else None
        if cfg.get("init") == "torch" and fan is None and init not in (gpt_ref.INIT_ONES,
                                                                        gpt_ref.INIT_ZEROS):
            fan = 0  # an embedding: N(0, 1)
        if fan:  # nn.Linear: weight and bias U(-b, b), b = 1/sqrt(fan_in), std b/sqrt(3)
            b = 1 / math.sqrt(fan)
            if np.abs(v).max() > b * (1 + 1e-6):
                fails.append(f"init: {key} max |w| {np.abs(v).max():.6g} above 1/sqrt({fan})")
            want = b / math.sqrt(3)
            if v.size >= 256 and (abs(v.std() / want - 1) > TOL_INIT_STD or
                                  abs(v.mean()) > 4 * want / math.sqrt(v.size)):
                fails.append(f"init: {key} mean {v.mean():.3g} std {v.std():.4g}, expected "
                             f"U(-{b:.4g}, {b:.4g})")
        elif fan == 0:  # nn.Embedding
            if v.size >= 256 and (abs(v.std() - 1) > TOL_INIT_STD or
                                  abs(v.mean()) > 4 / math.sqrt(v.size)):
                fails.append(f"init: {key} mean {v.mean():.3g} std {v.std():.4g}, expected N(0, 1)")
        elif init == gpt_ref.INIT_ONES and not np.all(v == 1):
            fails.append(f"init: {key} not all ones")
        elif init == gpt_ref.INIT_ZEROS and not np.all(v == 0):
            fails.append(f"init: {key} not all zeros")
        elif init in (gpt_ref.INIT_NORMAL, gpt_ref.INIT_RESIDUAL) and v.size >= 256:
            want = cfg["init_std"] / (math.sqrt(2 * L) if init == gpt_ref.INIT_RESIDUAL else 1)
            if abs(v.std() / want - 1) > TOL_INIT_STD or abs(v.mean()) > 4 * want / math.sqrt(v.size):
                fails.append(f"init: {key} mean {v.mean():.3g} std {v.std():.4g}, expected N(0, {want:.4g})")

    # 4. forward and backward
    ref = gpt_ref.RefGPT(cfg)
    p0_by_key = {key: torch.from_numpy(slice_of(p0, key)) for key in ref.P}
    ref.load(p0_by_key)
    with torch.no_grad():
        logits_r, _ = ref.forward(x)
    logits_r = logits_r.numpy()
    row["logits"] = np.abs(logits_c - logits_r).max() / np.abs(logits_r).max()
    if not row["logits"] <= TOL_LOGITS:
        bad = np.unravel_index(np.abs(logits_c - logits_r).argmax(), logits_r.shape)
        fails.append(f"logits: max rel error {row['logits']:.3g} > {TOL_LOGITS} "
                     f"(worst at b,t,v={tuple(int(i) for i in bad)}: C {logits_c[bad]:.6g} "
                     f"ref {logits_r[bad]:.6g})")

    ref.trace = {}
    _, loss_r = ref.forward(x, y)
    trace, ref.trace = ref.trace, None
    row["loss"] = abs(loss_c - loss_r.item()) / abs(loss_r.item())
    if not row["loss"] <= TOL_LOSS:
        fails.append(f"loss: C {loss_c:.8g} ref {loss_r.item():.8g} rel error {row['loss']:.3g}")
    # the C's auxiliary loss (MoE: balance + z), and the gradients of LM loss + auxiliary
    with open(os.path.join(outdir, "aux.txt")) as f:
        aux_c = float(f.read())
    aux_r = float(ref.aux)
    if not abs(aux_c - aux_r) <= TOL_LOSS * max(abs(aux_r), 1e-3):
        fails.append(f"auxiliary loss: C {aux_c:.8g} ref {aux_r:.8g}")
    row["grad"], row["grad_key"] = compare_grads(ref, loss_r + ref.aux, grads_c, slice_of, fails, "")
    with open(os.path.join(outdir, "stats.json")) as f:
        row["stats"] = compare_stats(cfg, trace, ref, json.load(f), fails)

    # 5. three AdamW steps, checked step by step: (a) the gradients the C computed at its own
    # parameters before step S against the reference's at those same parameters (so a
    # wrong gradient at moved parameters is caught, without comparing two trajectories that
    # diverge wherever Adam normalizes float32 noise), and (b) torch.optim.AdamW fed the C's
    # gradients against the C's parameters after each step.
    with open(os.path.join(outdir, "losses.txt")) as f:
        losses_c = [float(v) for v in f.read().split()]
    ref_opt = gpt_ref.RefGPT(cfg)
    ref_opt.load(p0_by_key)
    opt = torch.optim.AdamW([
        {"params": ref_opt.parameters(decay=1), "weight_decay": WD},
        {"params": ref_opt.parameters(decay=0), "weight_decay": 0.0},
    ], lr=LR, betas=BETAS, eps=EPS)
    prev = p0
    row["adam"], row["adam_key"] = 0.0, ""
    for step in (1, 2, 3):
        g_step = load(f"grads{step}.bin")
        if step > 1:
            ref = gpt_ref.RefGPT(cfg)
            ref.load({key: torch.from_numpy(slice_of(prev, key)) for key in ref.P})
            _, loss_r = ref.forward(x, y)
            e = abs(losses_c[step - 1] - loss_r.item()) / abs(loss_r.item())
            if not e <= TOL_LOSS:
                fails.append(f"step {step} loss: C {losses_c[step - 1]:.8g} ref {loss_r.item():.8g}")
            row["loss"] = max(row["loss"], e)
            e, k = compare_grads(ref, loss_r + ref.aux, g_step, slice_of, fails, f"step {step} ")
            if e > row["grad"]:
                row["grad"], row["grad_key"] = e, k
        for key, p in ref_opt.P.items():
            p.grad = torch.from_numpy(slice_of(g_step, key))
        opt.step()
        p_c = load(f"params{step}.bin")
        for key, p in ref_opt.P.items():
            d = np.abs(slice_of(p_c, key) - p.detach().numpy()) / LR
            if d.max() > row["adam"]:
                row["adam"], row["adam_key"] = d.max(), key
            if not d.max() <= TOL_ADAM:
                i = np.unravel_index(d.argmax(), d.shape)
                fails.append(f"adamw step {step} {key}: |p_c - p_ref| / lr = {d[i]:.3g} at "
                             f"{tuple(int(j) for j in i)} (C {slice_of(p_c, key)[i]:.8g}, ref "
                             f"{p.detach().numpy()[i]:.8g})")
        prev = p_c
    if verbose:
        print(f"  {name}: {' '.join(f'model.{k}={v}' for k, v in knobs.items())}")
    return row, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("refdump")
    ap.add_argument("-k", default="", help="only configs whose name contains this")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--keep", help="write the dumps here and keep them")
    a = ap.parse_args()

    configs = cfgs()
    problems = coverage_problems(configs, model_knobs(a.refdump))
    if problems:
        print("configuration list does not cover every knob value:\n  " + "\n  ".join(problems))
        return 1
    # the seed belongs to the config (its index in the full list), not to the filtered position
    configs = [(n, c) for n, c in enumerate(configs) if a.k in c[0]]

    workdir = a.keep or tempfile.mkdtemp(prefix="ablate-ref-")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    failures = []
    print(f"{'config':34s} {'logits':>9s} {'loss':>9s} {'grad':>9s} {'(worst tensor)':16s}"
          f" {'adamw':>9s} {'(worst tensor)':16s} {'stats':>9s} status")
    for n, (name, B, T, knobs) in configs:
        try:
            row, fails = check_one(a.refdump, name, B, T, knobs, 1000 + n, workdir, a.v)
        except Exception as e:  # a crash in one config must not hide the others
            row, fails = dict(name=name), [f"{type(e).__name__}: {e}"]
        def f(key):
            return f"{row[key]:9.2e}" if key in row else f"{'-':>9s}"
        print(f"{name:34s} {f('logits')} {f('loss')} {f('grad')} {row.get('grad_key', ''):16s}"
              f" {f('adam')} {row.get('adam_key', ''):16s} {f('stats')} {'ok' if not fails else 'FAIL'}",
              flush=True)
        failures += [(name, msg) for msg in fails]
    if not a.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{len(configs)} configs in {time.time() - t0:.1f} s; tolerances: logits {TOL_LOGITS}, "
          f"loss {TOL_LOSS}, grad {TOL_GRAD}, adamw {TOL_ADAM}, stats {TOL_STATS} "
          f"(layer grad norm {TOL_GRAD_NORM})")
    if failures:
        print(f"\n{len(failures)} FAILURE(S):")
        for name, msg in failures:
            print(f"  [{name}] {msg}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
