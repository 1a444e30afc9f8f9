"""An independent PyTorch implementation of ablate's GPT, written from the math in
src/model/gpt.h and the knob descriptions in src/model/config.h (not from gpt.c).

Parameters live in a dict keyed by a semantic name ("qkv.w", "attn_norm.w", ...). Per-layer
tensors keep the leading n_layer dimension of the C tensor table so that a C buffer can be
copied in tensor by tensor; layer l uses P[key][l].

Everything is plain torch so it runs in float64 (torch.set_default_dtype(torch.float64)).
"""

import math

import torch
import torch.nn.functional as F

# Tensors are named as in the C tensor table (gpt_tensor_table's names, which refdump's
# manifest carries); the C buffer order and enum values are not mirrored here.
# Tensors without the leading n_layer dimension; every other key is per layer.
GLOBAL_KEYS = {"wte", "wpe", "in_norm.w", "in_norm.b", "final_norm.w", "final_norm.b",
               "lm_head.w"}

# InitKind of gpt.h, by the names refdump writes
INIT_NORMAL, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS = "normal", "residual", "ones", "zeros"

ACTIVATIONS = ["relu", "gelu", "gelu_tanh", "relu2", "tanh", "silu", "swiglu", "geglu", "reglu"]
GLU = {"swiglu", "geglu", "reglu"}
NORMS = ["pre", "post", "peri", "none"]
NORM_TYPES = ["rmsnorm", "layernorm"]
POSITIONS = ["learned", "rope", "none"]
MOE_LAYERS = ["all", "every_other"]
# The MLP tensors stack over a subset of the blocks: the dense MLP's over blocks without
# experts, the MoE MLP's over blocks with them (gpt.h, GPT_MOE_TENSORS).
DENSE_MLP_KEYS = {"fc.w", "fc.b", "fc_proj.w", "fc_proj.b"}
MOE_KEYS = {"router.w", "exp_fc.w", "exp_fc.b", "exp_proj.w", "exp_proj.b"}


def d_ff(cfg):
    # lround: half away from zero (Python's round() is half-to-even, so not used here)
    return int(math.floor(cfg["mlp_ratio"] * cfg["d_model"] + 0.5))


def kv_heads(cfg):
    return cfg["n_kv_head"] if cfg["n_kv_head"] > 0 else cfg["n_head"]


def head_dim(cfg):
    return cfg["d_model"] // cfg["n_head"]


def is_moe_layer(cfg, l):
    return cfg["moe_experts"] > 1 and (cfg["moe_layers"] == "all" or l % 2 == 1)


def expert_ff(cfg):
    r = cfg["moe_ratio"]
    return int(math.floor(r * cfg["d_model"] + 0.5)) if r > 0 else d_ff(cfg)


def torch_fan_in(cfg, key):
    """model.init torch (docs/spec.md, "Initialization"): the input width of the nn.Linear a
    tensor is the weight or bias of, written from the model's layers (its bound is
    1/sqrt(fan_in)); None for the embeddings (N(0, 1)) and the norms (gain 1, shift 0)."""
    C = cfg["d_model"]
    return {"qkv": C, "attn_proj": C, "fc": C, "fc_proj": d_ff(cfg), "lm_head": C,
            "router": C, "exp_fc": C, "exp_proj": expert_ff(cfg), "moh": C}.get(key.split(".")[0])


def stack_index(cfg, key, l):
    """Index of block l in the stack of tensor key, or None if the block has no slice."""
    if key in DENSE_MLP_KEYS or key in MOE_KEYS:
        moe = is_moe_layer(cfg, l)
        if moe != (key in MOE_KEYS):
            return None
        return sum(1 for i in range(l) if is_moe_layer(cfg, i) == moe)
    return l


def expected_tensors(cfg):
    """[(key, shape, decay, init)] of the tensors present under cfg."""
    V, C, L = cfg["vocab_size"], cfg["d_model"], cfg["n_layer"]
    H, KV, hd, ff = cfg["n_head"], kv_heads(cfg), head_dim(cfg), d_ff(cfg)
    up = 2 * ff if cfg["activation"] in GLU else ff
    aff = bool(cfg["norm_affine"])
    ln = cfg["norm_type"] == "layernorm"
    has_block_norm = cfg["norm"] != "none"
    peri = cfg["norm"] == "peri"
    qkv_rows = (H + 2 * KV) * hd
    Lm = sum(1 for l in range(L) if is_moe_layer(cfg, l))
    Ld, E, ffe = L - Lm, cfg["moe_experts"], expert_ff(cfg)
    upe = 2 * ffe if cfg["activation"] in GLU else ffe

    spec = {
        # key: (present, shape, decay, init)
        "wte": (True, (V, C), 1, INIT_NORMAL),
        "wpe": (cfg["position"] == "learned", (cfg["context"], C), 1, INIT_NORMAL),
        "in_norm.w": (cfg["input_norm"] and aff, (C,), 0, INIT_ONES),
        "in_norm.b": (cfg["input_norm"] and aff and ln, (C,), 0, INIT_ZEROS),
        "attn_norm.w": (has_block_norm and aff, (L, C), 0, INIT_ONES),
        "attn_norm.b": (has_block_norm and aff and ln, (L, C), 0, INIT_ZEROS),
        "qkv.w": (True, (L, qkv_rows, C), 1, INIT_NORMAL),
        "qkv.b": (bool(cfg["qkv_bias"]), (L, qkv_rows), 0, INIT_ZEROS),
        "q_norm.w": (cfg["qk_norm"] and aff, (L, hd), 0, INIT_ONES),
        "q_norm.b": (cfg["qk_norm"] and aff and ln, (L, hd), 0, INIT_ZEROS),
        "k_norm.w": (cfg["qk_norm"] and aff, (L, hd), 0, INIT_ONES),
        "k_norm.b": (cfg["qk_norm"] and aff and ln, (L, hd), 0, INIT_ZEROS),
        "attn_proj.w": (True, (L, C, H * hd), 1, INIT_RESIDUAL),
        "attn_proj.b": (bool(cfg["out_bias"]), (L, C), 0, INIT_ZEROS),
        "attn_onorm.w": (peri and aff, (L, C), 0, INIT_ONES),
        "attn_onorm.b": (peri and aff and ln, (L, C), 0, INIT_ZEROS),
        "mlp_norm.w": (has_block_norm and aff, (L, C), 0, INIT_ONES),
        "mlp_norm.b": (has_block_norm and aff and ln, (L, C), 0, INIT_ZEROS),
        "fc.w": (Ld > 0, (Ld, up, C), 1, INIT_NORMAL),
        "fc.b": (Ld > 0 and bool(cfg["mlp_bias"]), (Ld, up), 0, INIT_ZEROS),
        "fc_proj.w": (Ld > 0, (Ld, C, ff), 1, INIT_RESIDUAL),
        "fc_proj.b": (Ld > 0 and bool(cfg["mlp_bias"]), (Ld, C), 0, INIT_ZEROS),
        "mlp_onorm.w": (peri and aff, (L, C), 0, INIT_ONES),
        "mlp_onorm.b": (peri and aff and ln, (L, C), 0, INIT_ZEROS),
        "final_norm.w": (cfg["final_norm"] and aff, (C,), 0, INIT_ONES),
        "final_norm.b": (cfg["final_norm"] and aff and ln, (C,), 0, INIT_ZEROS),
        "lm_head.w": (not cfg["tie_embeddings"], (V, C), 1, INIT_NORMAL),
        "router.w": (Lm > 0, (Lm, E, C), 1, INIT_NORMAL),
        "exp_fc.w": (Lm > 0, (Lm, E * upe, C), 1, INIT_NORMAL),
        "exp_fc.b": (Lm > 0 and bool(cfg["mlp_bias"]), (Lm, E * upe), 0, INIT_ZEROS),
        "exp_proj.w": (Lm > 0, (Lm, E * C, ffe), 1, INIT_RESIDUAL),
        "exp_proj.b": (Lm > 0 and bool(cfg["mlp_bias"]), (Lm, E * C), 0, INIT_ZEROS),
        "moh.w": (cfg["moh_top_k"] > 0, (L, H + 2, C), 1, INIT_NORMAL),
    }
    return [(key, shape, decay, init) for key, (present, shape, decay, init) in spec.items()
            if present]


def active_params(cfg):
    """Parameters one token uses: all but, per MoE block, the E - k experts it is not routed
    to, and, with a mixture of heads, the q rows (and q bias) and output-projection columns of
    the heads it is not routed to."""
    total = sum(math.prod(shape) for _, shape, _, _ in expected_tensors(cfg))
    C, L, H, hd = cfg["d_model"], cfg["n_layer"], cfg["n_head"], head_dim(cfg)
    ffe = expert_ff(cfg)
    upe = 2 * ffe if cfg["activation"] in GLU else ffe
    expert = upe * C + C * ffe + (upe + C if cfg["mlp_bias"] else 0)
    Lm = sum(1 for l in range(L) if is_moe_layer(cfg, l))
    total -= Lm * (cfg["moe_experts"] - cfg["moe_top_k"]) * expert
    if cfg["moh_top_k"] > 0:
        idle = (H - cfg["moh_shared"] - cfg["moh_top_k"]) * hd
        total -= L * idle * (2 * C + (1 if cfg["qkv_bias"] else 0))
    return total


def normalize(x, w, b, cfg):
    """Normalizes over the last dimension with the configured norm type; w/b may be None."""
    eps = cfg["norm_eps"]
    if cfg["norm_type"] == "rmsnorm":
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y * w if w is not None else y
    # layernorm: biased variance, as torch's layer_norm
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rope(x, base):
    """x: (B, T, nh, hd); half-split pairs (i, i + hd/2), position t = 0..T-1."""
    T, hd = x.shape[1], x.shape[-1]
    half = hd // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, half)
    cos = ang.cos().to(x.dtype)[None, :, None, :]
    sin = ang.sin().to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def activation(h, cfg):
    act = cfg["activation"]
    if act in GLU:
        ff = h.shape[-1] // 2
        a, b = h[..., :ff], h[..., ff:]
        g = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}[act]
        return g(a) * b
    if act == "relu":
        return F.relu(h)
    if act == "gelu":
        return F.gelu(h)
    if act == "gelu_tanh":
        return F.gelu(h, approximate="tanh")
    if act == "relu2":
        return F.relu(h) ** 2
    if act == "tanh":
        return torch.tanh(h)
    if act == "silu":
        return F.silu(h)
    raise ValueError(act)


def gate(pre, cfg):
    """The nonlinearity's input within an MLP pre-activation: all of it, or a GLU's gate
    half (the first; activation() multiplies act(gate) by the second)."""
    return pre[..., : pre.shape[-1] // 2] if cfg["activation"] in GLU else pre


class RefGPT:
    def __init__(self, cfg):
        self.cfg = cfg
        self.tensors = expected_tensors(cfg)
        self.P = {key: torch.zeros(shape, requires_grad=True) for key, shape, _, _ in self.tensors}
        # set to a dict to record, per layer, the attention probabilities ("att", (B,H,T,T)),
        # the MLP hidden after the nonlinearity ("h") and its input ("pre"; GLU: the gate's)
        # and the block output ("resid"); MoE blocks: "h" and "pre" hold the rows the
        # experts ran on, and "moe" a dict of router statistics
        self.trace = None
        self.aux = torch.zeros(())  # the last forward's MoE auxiliary losses

    def _record(self, what, value):
        if self.trace is not None:
            self.trace.setdefault(what, []).append(value.detach())

    def load(self, flat_by_key):
        """flat_by_key: key -> tensor already shaped like the parameter."""
        with torch.no_grad():
            for key, p in self.P.items():
                p.copy_(flat_by_key[key])

    def parameters(self, decay=None):
        return [self.P[key] for key, _, d, _ in self.tensors if decay is None or d == decay]

    def _layer(self, key, l):
        p = self.P.get(key)
        i = stack_index(self.cfg, key, l)
        return None if p is None or i is None else p[i]

    def layer_grad(self, key, l):
        """Block l's slice of a per-layer tensor's gradient, or None."""
        i = stack_index(self.cfg, key, l)
        return None if i is None else self.P[key].grad[i]

    def attention(self, x, l):
        cfg = self.cfg
        B, T, C = x.shape
        H, KV, hd = cfg["n_head"], kv_heads(cfg), head_dim(cfg)
        qkv = F.linear(x, self.P["qkv.w"][l], self._layer("qkv.b", l))
        q = qkv[..., : H * hd].reshape(B, T, H, hd)
        k = qkv[..., H * hd : (H + KV) * hd].reshape(B, T, KV, hd)
        v = qkv[..., (H + KV) * hd :].reshape(B, T, KV, hd)
        if cfg["qk_norm"]:
            q = normalize(q, self._layer("q_norm.w", l), self._layer("q_norm.b", l), cfg)
            k = normalize(k, self._layer("k_norm.w", l), self._layer("k_norm.b", l), cfg)
        if cfg["position"] == "rope":
            q = rope(q, cfg["rope_base"])
            k = rope(k, cfg["rope_base"])
        rep = H // KV
        q = q.transpose(1, 2)                                   # (B, H, T, hd)
        k = k.transpose(1, 2).repeat_interleave(rep, dim=1)     # head h reads kv head h // rep
        v = v.transpose(1, 2).repeat_interleave(rep, dim=1)
        att = q @ k.transpose(-1, -2) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        self._record("att", att)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        if cfg["moh_top_k"] > 0:
            y = self.mixture_of_heads(x, y, l)
        return F.linear(y, self.P["attn_proj.w"][l], self._layer("attn_proj.b", l))

    def mixture_of_heads(self, x, y, l):
        """MoH (Jin et al. 2024) as gpt.h states it: every head computed, then weighted."""
        cfg = self.cfg
        B, T, C = x.shape
        H, hs, K = cfg["n_head"], cfg["moh_shared"], cfg["moh_top_k"]
        R, hd, N = H - hs, C // H, B * T
        xf = x.reshape(N, C)
        # one reduction per (token, row): equal router rows give equal logits (see moe)
        z = (xf[:, None, :] * self.P["moh.w"][l][None, :, :]).sum(-1)   # (N, H + 2)
        ps, pr, a = z[:, :hs].softmax(-1), z[:, hs:H].softmax(-1), z[:, H:].softmax(-1)
        sel = torch.sort(-z[:, hs:H].detach(), dim=-1, stable=True).indices[:, :K]
        mask = torch.zeros(N, R).scatter(1, sel, 1.0)
        g = torch.cat([a[:, :1] * ps, a[:, 1:] * pr * mask], dim=1)      # (N, H)
        f, P = mask.mean(0), pr.mean(0)
        self.aux = self.aux + cfg["moh_balance"] * (f * P).sum()
        if self.trace is not None:
            ent = -(pr * pr.clamp_min(1e-300).log()).sum(-1).mean()
            self.trace.setdefault("moh", []).append(dict(
                l=l, head_frac=torch.cat([torch.ones(hs), f]).detach(),
                moh_entropy=ent.detach(), moh_balance=(cfg["moh_balance"] * (f * P).sum()).detach()))
        return (y.reshape(N, H, hd) * g[:, :, None]).reshape(B, T, C)

    def mlp(self, x, l):
        if is_moe_layer(self.cfg, l):
            return self.moe(x, l)
        pre = F.linear(x, self._layer("fc.w", l), self._layer("fc.b", l))
        h = activation(pre, self.cfg)
        self._record("pre", gate(pre, self.cfg))
        self._record("h", h)
        return F.linear(h, self._layer("fc_proj.w", l), self._layer("fc_proj.b", l))

    def moe(self, x, l):
        """The mixture-of-experts MLP as gpt.h states it, written densely: every expert runs on
        every token and the routing picks; the C runs each expert on its own tokens only."""
        cfg = self.cfg
        B, T, C = x.shape
        N, E, K = B * T, cfg["moe_experts"], cfg["moe_top_k"]
        ffe = expert_ff(cfg)
        upe = 2 * ffe if cfg["activation"] in GLU else ffe
        xf = x.reshape(N, C)
        # one reduction per (token, expert), so equal router rows give equal logits (a matmul
        # kernel may round columns differently and break a tie the model resolves by index)
        z = (xf[:, None, :] * self._layer("router.w", l)[None, :, :]).sum(-1)   # (N, E)
        p = z.softmax(-1)
        # top k by decreasing p, ties to the lower index: a stable sort of -p
        # (by the logits: torch's softmax may round equal logits to unequal probabilities)
        sel = torch.sort(-z.detach(), dim=-1, stable=True).indices[:, :K]   # (N, K)
        ps = p.gather(1, sel)
        g = ps if K == 1 else ps / ps.sum(-1, keepdim=True)
        # capacity: each expert keeps its first cap assignments in the order (choice j, token)
        cap = K * N if cfg["moe_capacity"] <= 0 else min(K * N, math.ceil(cfg["moe_capacity"] * K * N / E))
        kept = torch.zeros(N, K, dtype=torch.bool)
        rows = [[] for _ in range(E)]
        for j in range(K):
            for t in range(N):
                e = int(sel[t, j])
                if len(rows[e]) < cap:
                    rows[e].append(t)
                    kept[t, j] = True
        fc_w, proj_w = self._layer("exp_fc.w", l), self._layer("exp_proj.w", l)
        fc_b, proj_b = self._layer("exp_fc.b", l), self._layer("exp_proj.b", l)
        outs, hs, pres = [], [], []
        for e in range(E):
            w1 = fc_w[e * upe:(e + 1) * upe]
            b1 = None if fc_b is None else fc_b[e * upe:(e + 1) * upe]
            w2 = proj_w[e * C:(e + 1) * C]
            b2 = None if proj_b is None else proj_b[e * C:(e + 1) * C]
            pre = F.linear(xf, w1, b1)
            h = activation(pre, cfg)                                       # (N, ffe)
            hs.append(h[rows[e]])
            pres.append(gate(pre, cfg)[rows[e]])
            outs.append(F.linear(h, w2, b2))                               # (N, C)
        eo = torch.stack(outs, 1)                                          # (N, E, C)
        chosen = eo.gather(1, sel[:, :, None].expand(N, K, C))             # (N, K, C)
        y = (chosen * (g * kept)[:, :, None]).sum(1)
        self._record("h", torch.cat(hs, 0))
        self._record("pre", torch.cat(pres, 0))
        # auxiliary losses: f_i the share of the N K assignments (before dropping), P_i mean p
        f = torch.bincount(sel.reshape(-1), minlength=E).to(p.dtype) / (N * K)
        P = p.mean(0)
        bal = cfg["moe_balance"] * E * (f * P).sum()
        zl = cfg["moe_zloss"] * torch.logsumexp(z, -1).pow(2).mean()
        self.aux = self.aux + bal + zl
        ent = -(p * p.clamp_min(1e-300).log()).sum(-1).mean()
        if self.trace is not None:
            self.trace.setdefault("moe", []).append(dict(l=l, expert_frac=f.detach(), router_entropy=ent.detach(),
                                 moe_balance=bal.detach(), moe_zloss=zl.detach(),
                                 moe_dropped=1.0 - kept.sum().item() / (N * K)))
        return y.reshape(B, T, C)

    def norm(self, x, name, l=None):
        w, b = self.P.get(name + ".w"), self.P.get(name + ".b")
        if l is not None:
            w = None if w is None else w[l]
            b = None if b is None else b[l]
        return normalize(x, w, b, self.cfg)

    def forward(self, idx, targets=None):
        cfg = self.cfg
        B, T = idx.shape
        self.aux = torch.zeros(())
        x = self.P["wte"][idx]
        if cfg["position"] == "learned":
            x = x + self.P["wpe"][:T]
        if cfg["input_norm"]:
            x = self.norm(x, "in_norm")
        for l in range(cfg["n_layer"]):
            placement = cfg["norm"]
            if placement == "pre":
                x = x + self.attention(self.norm(x, "attn_norm", l), l)
                x = x + self.mlp(self.norm(x, "mlp_norm", l), l)
            elif placement == "post":
                x = self.norm(x + self.attention(x, l), "attn_norm", l)
                x = self.norm(x + self.mlp(x, l), "mlp_norm", l)
            elif placement == "peri":
                x = x + self.norm(self.attention(self.norm(x, "attn_norm", l), l), "attn_onorm", l)
                x = x + self.norm(self.mlp(self.norm(x, "mlp_norm", l), l), "mlp_onorm", l)
            elif placement == "none":
                x = x + self.attention(x, l)
                x = x + self.mlp(x, l)
            else:
                raise ValueError(placement)
            self._record("resid", x)
        if cfg["final_norm"]:
            x = self.norm(x, "final_norm")
        head = self.P["wte"] if cfg["tie_embeddings"] else self.P["lm_head.w"]
        logits = x @ head.T
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss
