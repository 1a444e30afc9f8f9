#!/usr/bin/python3
"""PyTorch reference for bench/engine_vs_torch.sh: the same GPT as ablate's presets, trained
the ordinary way (nn.Module, nn.Linear, masked-softmax attention, AdamW, grad clipping), on
one thread, in float32. Prints one JSON line with the training throughput.

Run it with Debian's interpreter (/usr/bin/python3: torch 1.13 + numpy), with
OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 in the environment. It never sets OPENBLAS_CORETYPE:
OpenBLAS (which torch reaches through libblas.so.3) reads it from the environment.

  /usr/bin/python3 bench/torch_gpt_bench.py --preset micro --data tinyshakespeare.txt \
      --tokenizer char --batch 32 --steps 2000 --warmup 100
  /usr/bin/python3 bench/torch_gpt_bench.py --preset book --data book.bin --tokenizer tokens \
      --batch 8 --steps 30 --warmup 5

Timing: steps [0, warmup) are warm-up; the clock covers steps [warmup, steps), each one a
fresh random batch + forward + loss + backward + clip + AdamW step (training only, no eval).
tokens_per_s = (steps - warmup) * batch * context / seconds.
"""
import argparse
import ctypes
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The two presets of src/model/config.c.
PRESETS = {
    "micro": dict(context=16, d_model=32, n_layer=2, n_head=4, mlp_ratio=4, activation="relu",
                  norm_type="rmsnorm", norm_affine=False, input_norm=True, final_norm=False,
                  qkv_bias=False, out_bias=False, mlp_bias=False, lr=1e-2),
    "book": dict(vocab_size=50257, context=128, d_model=128, n_layer=4, n_head=4, mlp_ratio=4,
                 activation="gelu_tanh", norm_type="layernorm", norm_affine=True,
                 input_norm=False, final_norm=True, qkv_bias=False, out_bias=True, mlp_bias=True,
                 lr=1e-2),
}
EPS = 1e-5


class RMSNorm(nn.Module):
    """RMSNorm; torch 1.13 has none built in. Without a gain when affine is False."""

    def __init__(self, dim, affine):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim)) if affine else None

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
        return x * self.weight if self.weight is not None else x


def make_norm(cfg):
    if cfg["norm_type"] == "layernorm":
        return nn.LayerNorm(cfg["d_model"], eps=EPS, elementwise_affine=cfg["norm_affine"])
    return RMSNorm(cfg["d_model"], cfg["norm_affine"])


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, T = cfg["d_model"], cfg["context"]
        self.n_head = cfg["n_head"]
        self.qkv = nn.Linear(C, 3 * C, bias=cfg["qkv_bias"])
        self.proj = nn.Linear(C, C, bias=cfg["out_bias"])
        # True above the diagonal: the future positions a query may not see
        future = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
        self.register_buffer("future", future.view(1, 1, T, T), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = att.masked_fill(self.future[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, FF = cfg["d_model"], cfg["mlp_ratio"] * cfg["d_model"]
        self.fc = nn.Linear(C, FF, bias=cfg["mlp_bias"])
        self.proj = nn.Linear(FF, C, bias=cfg["mlp_bias"])
        self.act = cfg["activation"]

    def forward(self, x):
        h = self.fc(x)
        h = F.relu(h) if self.act == "relu" else F.gelu(h, approximate="tanh")
        return self.proj(h)


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then + mlp(norm(.))."""

    def __init__(self, cfg):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = make_norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        V, C, T = cfg["vocab_size"], cfg["d_model"], cfg["context"]
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.in_norm = make_norm(cfg) if cfg["input_norm"] else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = make_norm(cfg) if cfg["final_norm"] else None
        self.lm_head = nn.Linear(C, V, bias=False)
        self.register_buffer("pos", torch.arange(T), persistent=False)
        # GPT-2 init, like ablate: N(0, 0.02), residual projections / sqrt(2 n_layer), zero biases
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * cfg["n_layer"]) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(self.pos[:T])
        if self.in_norm is not None:
            x = self.in_norm(x)
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        return self.lm_head(x)


def load_tokens(path, tokenizer):
    """The token stream, as ablate reads it: char (sorted distinct bytes) or llm.c .bin."""
    if tokenizer == "char":
        raw = np.fromfile(path, dtype=np.uint8)
        vocab, ids = np.unique(raw, return_inverse=True)
        return ids.astype(np.int64), len(vocab)
    if tokenizer == "tokens":
        header = np.fromfile(path, dtype=np.int32, count=256)
        if header[0] != 20240520 or header[1] != 1:
            sys.exit(f"{path}: not an llm.c .bin token file (magic {header[0]}, version {header[1]})")
        n = int(header[2])
        toks = np.fromfile(path, dtype=np.uint16, count=n, offset=256 * 4)
        return toks.astype(np.int64), 50257
    sys.exit(f"unknown tokenizer {tokenizer}")


def blas_info():
    """Which BLAS torch has in this process: torch's build flags plus the loaded libraries."""
    info = {}
    cfg = torch.__config__.show()
    for key in ("BLAS_INFO", "LAPACK_INFO"):
        i = cfg.find(key + "=")
        if i >= 0:
            info[key.lower()] = cfg[i + len(key) + 1:].split(",")[0]
    info["mkl"] = torch.backends.mkl.is_available()
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            base = os.path.basename(p)
            if any(s in base for s in ("blas", "lapack", "mkl", "dnnl")):
                libs.add(os.path.realpath(p))
    info["libs"] = sorted(libs)
    for p in info["libs"]:
        if "openblas" in os.path.basename(p):
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                info["openblas_core"] = lib.openblas_get_corename().decode()
                info["openblas_config"] = lib.openblas_get_config().decode().strip()
                info["openblas_threads"] = lib.openblas_get_num_threads()
            except (OSError, AttributeError):
                pass
            break
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", choices=["char", "tokens"], required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--context", type=int, default=0, help="default: the preset's")
    ap.add_argument("--steps", type=int, required=True, help="total steps, warm-up included")
    ap.add_argument("--warmup", type=int, default=5, help="untimed first steps")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not 0 <= args.warmup < args.steps:
        sys.exit("need 0 <= --warmup < --steps")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = dict(PRESETS[args.preset])
    if args.context:
        cfg["context"] = args.context

    tokens, vocab = load_tokens(args.data, args.tokenizer)
    cfg.setdefault("vocab_size", vocab)
    n_train = len(tokens) - int(len(tokens) * args.val_fraction)
    train = torch.from_numpy(tokens[:n_train].copy())
    B, T = args.batch, cfg["context"]
    if n_train < T + 2:
        sys.exit("not enough training tokens")
    offsets = torch.arange(T + 1)

    model = GPT(cfg)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    model.train()

    def step():
        starts = torch.randint(0, n_train - T - 1, (B, 1))
        window = train[starts + offsets]  # (B, T+1)
        x, y = window[:, :-1], window[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    t0 = None
    for i in range(args.steps):
        if i == args.warmup:
            t0 = time.perf_counter()
        loss = step()
    seconds = time.perf_counter() - t0
    final_loss = float(loss)
    timed = args.steps - args.warmup
    out = {
        "preset": args.preset, "params": params, "batch": B, "context": T,
        "steps": args.steps, "warmup": args.warmup, "timed_steps": timed,
        "seconds": seconds, "tokens_per_s": timed * B * T / seconds,
        "final_loss": final_loss, "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "mkl_num_threads": os.environ.get("MKL_NUM_THREADS"),
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "blas": blas_info(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
