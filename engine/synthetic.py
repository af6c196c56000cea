"""Aligned synthetic pairs at real shapes: random-weight models whose greedy next tokens agree
to a chosen degree, built on the worker from a config and a seed alone (no weights to ship).

`synthetic:ARCH[@align=A][,seed=S]` (engine/model_names.py) names one. Every model of one `seed`
shares a reference next-token law, and `align` sets how much of it a model keeps:

1. Reference (seed only, the vocabulary V of the pair): for every token x, K = 4 planted
   successors s_1(x) .. s_K(x), distinct, none of them x, drawn uniformly; head codes
   C'[v] in R^S (S = 256 shared dimensions), i.i.d. Gaussian rows scaled to unit norm.
2. A model's choice (seed and shape): for each x a uniform u_x; the model keeps the reference
   order where u_x <= align, else it moves s_j (j = 2 .. K, chosen with probability
   proportional to 2^-(j-2)) to the front: the token a draft ranks second to fourth, as a
   real draft's misses usually are. Its order o(x) then weights w = (1, 0.9, 0.8, 0.7).
   Thresholds on one u_x per token nest: a token that keeps the order at align a keeps it at
   every larger a, so agreement grows with the knob, token by token.
3. Weights: a semi-orthogonal P (S x hidden, P P^T = I, seeded by seed and shape) carries the
   codes into the model's residual stream: c_x is the least-norm vector of the span of
   C'[o_1(x)] .. C'[o_K(x)] with <C'[o_r(x)], c_x> = w_r exactly (whatever the codes'
   cross-talk), the input embedding E[x] = sqrt(hidden) * c_x P / |c_x| (rms 1), the LM head
   H = kap * C' P (untied: a tied head would make every token its own argmax), final and input
   norms 1. With the residual branches small, the final norm's output is E[x] and the logits
   are kap * sqrt(hidden) <C'[v], c_x> / |c_x|: the planted successors at about SHARP * (1,
   0.9, 0.8, 0.7) nats (SHARP = 20), a non-planted token's at its cross-talk with c_x,
   about 2 nats in magnitude and at most about 8, so the greedy next token is o_1(x).
4. The decoder layers keep their random initialisation with their output projections
   (attention o_proj, MLP down_proj) scaled so that the branches' sum entering the final norm
   is NOISE = 0.1 of the embedding's norm (calibrated on seeded tokens, twice): the layers cost
   what a real model's cost (same shapes, dense weights), and give the logits a small
   dependence on the context (hundredths of a nat) without moving the greedy token.

So with a draft at align 1 (the reference) and a target at align a, the draft's greedy token
is the target's on a fraction a of the vocabulary: per visited token, the chance that a
drafted token is accepted at temperature 0 is about a (docs/gpu.md tabulates the measured
acceptance against the knob). Two models at aligns a, b < 1 of different shapes agree on about
a * b + (1 - a)(1 - b) * 21/49 of the tokens; of one shape, on 1 - |a - b| (nested choices).
Deterministic: one seed and one device type give the same models (the codes, successors and
choices are drawn on the CPU; the layers' initialisation on the model's device).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from engine.model_names import SyntheticName
from engine.shapes import SYNTHETIC_ARCHS, build

SHARED_DIMS = 256  # S: the dimensions of the shared reference codes
PLANTED = 4  # K: planted successors per token
WEIGHTS = (1.0, 0.9, 0.8, 0.7)  # w_r: a model's successors' weights, in its order
SHARP = 20.0  # the first successor's logit, nats
NOISE = 0.1  # |sum of the residual branches| / |E[x]| entering the final norm
DEVIATE = (4.0, 2.0, 1.0)  # relative odds of moving s_2, s_3, s_4 to the front


def _gen(*parts: Any) -> torch.Generator:
    """A CPU generator seeded by `parts` (stable across runs and processes)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def successors(seed: int, vocab: int) -> torch.Tensor:
    """[V, K] the reference's planted successors of every token: distinct per row, none the
    token itself (step 1)."""
    gen = _gen("successors", seed, vocab)
    s = torch.randint(vocab, (vocab, PLANTED), generator=gen)
    x = torch.arange(vocab)
    for _ in range(16):  # redraw collisions (about K^2 / V of the rows)
        bad = s == x[:, None]
        for j in range(1, PLANTED):
            bad[:, j] |= (s[:, j : j + 1] == s[:, :j]).any(-1)
        if not bad.any():
            return s
        s[bad] = torch.randint(vocab, (int(bad.sum()),), generator=gen)
    raise AssertionError("planted successors kept colliding")  # p < 1e-60 for V >= 512


def head_codes(seed: int, vocab: int) -> torch.Tensor:
    """[V, S] the reference's unit-norm head codes C' (step 1)."""
    c = torch.randn(vocab, SHARED_DIMS, generator=_gen("codes", seed, vocab))
    return c / c.norm(dim=-1, keepdim=True)


def order(name: SyntheticName, vocab: int) -> torch.Tensor:
    """[V, K] model `name`'s successors in its order (step 2): the reference's where it keeps
    it, else with one of s_2..s_K moved to the front."""
    s = successors(name.seed, vocab)
    gen = _gen("choice", name.seed, name.arch, vocab)
    u = torch.rand(vocab, generator=gen)
    odds = torch.tensor(DEVIATE)
    pick = 1 + torch.multinomial(odds / odds.sum(), vocab, replacement=True, generator=gen)
    out = s.clone()
    moved = u > name.align
    rows = moved.nonzero().squeeze(-1)
    for j in range(1, PLANTED):  # rows whose s_(j+1) goes first: shift s_1..s_j right by one
        r = rows[pick[rows] == j]
        out[r, 0] = s[r, j]
        out[r, 1 : j + 1] = s[r, :j]
    return out


def planted_codes(codes: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """[V, S] c_x / |c_x| for the c_x in the span of C'[o_1(x)] .. C'[o_K(x)] whose inner
    products with them are exactly w (least norm: c = A^T (A A^T)^-1 w, A [K, S] those codes),
    so that the planted logits keep the order and ratios of w however the codes' cross-talk
    falls (their scale varies with |c_x| by a few percent)."""
    a = codes[o]  # [V, K, S]
    gram = a @ a.transpose(1, 2)  # [V, K, K]
    w = torch.tensor(WEIGHTS).expand(len(o), PLANTED).unsqueeze(-1)  # [V, K, 1]
    c = (a.transpose(1, 2) @ torch.linalg.solve(gram, w)).squeeze(-1)  # [V, S]
    return c / c.norm(dim=-1, keepdim=True)


def _projection(name: SyntheticName, hidden: int) -> torch.Tensor:
    """[S, hidden] a seeded semi-orthogonal P (P P^T = I)."""
    a = torch.randn(hidden, SHARED_DIMS, generator=_gen("projection", name.seed, name.arch))
    q, _ = torch.linalg.qr(a)  # [hidden, S], orthonormal columns
    return q.T.contiguous()


def build_synthetic(
    name: SyntheticName, device: torch.device, dtype: torch.dtype, vocab: int | None = None
) -> Any:
    """Model `name` (module docstring) on `device` in `dtype`, eval mode, no gradients;
    `vocab` (default: its shape's) is the pair's vocabulary: the draft takes its target's."""
    spec = SYNTHETIC_ARCHS[name.arch]
    if spec.hidden < SHARED_DIMS:
        raise ValueError(f"{name}: hidden size {spec.hidden} < {SHARED_DIMS} shared dimensions")
    vocab = vocab or spec.vocab
    layer_seed = int.from_bytes(hashlib.sha256(f"{name.seed}:{name.arch}".encode()).digest()[:4])
    model = build(spec, device, dtype, layer_seed, vocab, tied=False)
    d = spec.hidden
    o = order(name, vocab)  # [V, K]
    codes = head_codes(name.seed, vocab)  # [V, S]
    c = planted_codes(codes, o)  # [V, S], unit rows
    p = _projection(name, d)  # [S, d]
    w_norm = float(torch.tensor(WEIGHTS).norm())  # |c| were the codes orthogonal
    kap = SHARP * w_norm / (WEIGHTS[0] * d**0.5)  # <C'[o_1(x)], c_x / |c_x|> ~ w_1 / |w|
    dev = model.device
    with torch.no_grad():
        p_dev = p.to(dev)
        emb = model.get_input_embeddings().weight
        head = model.get_output_embeddings().weight
        for lo in range(0, vocab, 16384):  # [rows, S] @ [S, d] in chunks: a 7B's table is large
            hi = min(vocab, lo + 16384)
            emb[lo:hi] = (d**0.5 * c[lo:hi].to(dev) @ p_dev).to(emb.dtype)  # rms 1 per coordinate
            head[lo:hi] = (kap * codes[lo:hi].to(dev) @ p_dev).to(head.dtype)
    _calibrate(model, name, vocab)
    return model


def _branches(model) -> list[torch.Tensor]:
    """The weights whose scale sets each decoder layer's contribution to the residual stream."""
    return [
        w
        for layer in model.model.layers
        for w in (layer.self_attn.o_proj.weight, layer.mlp.down_proj.weight)
    ]


def branch_ratio(model, tokens: torch.Tensor) -> float:
    """Mean over `tokens` of |h - E[x]| / |E[x]|, h the residual stream entering the final norm
    (the decoder layers' summed contribution against the embedding's)."""
    seen: list[torch.Tensor] = []
    hook = model.model.norm.register_forward_hook(lambda m, a, out: seen.append(a[0]))
    try:
        with torch.no_grad():
            model(tokens[None].to(model.device), use_cache=False)
    finally:
        hook.remove()
    h = seen[0][0].float()  # [n, d]
    e = model.get_input_embeddings().weight[tokens.to(model.device)].float()
    return float(((h - e).norm(dim=-1) / e.norm(dim=-1)).mean())


def _calibrate(model, name: SyntheticName, vocab: int) -> None:
    """Scale the output projections so that branch_ratio is NOISE (step 4): twice, the
    second pass correcting the first's nonlinearity (the branches see a normed stream)."""
    tokens = torch.randint(vocab, (64,), generator=_gen("calibration", name.seed, name.arch))
    for _ in range(2):
        ratio = branch_ratio(model, tokens)
        with torch.no_grad():
            for w in _branches(model):
                w.mul_(NOISE / ratio)
