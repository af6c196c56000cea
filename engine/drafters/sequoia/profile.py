"""Sequoia's acceptance profile measured for a model pair (Chen et al. 2024, Sec. 3.1: the tree
is fitted to the pair's measured acceptance vector p_1..p_K, the probability that the k-th
child of an accepted node is the accepted one).

Along the target's own continuations of the prompts (sampled at the target's warp, greedy at
temperature 0), at every position t with target row P_t and draft row Q_t (each warped as its
model samples in a trial, engine/sampling.py draft_warp):

- a greedy draft's children are its top-k tokens x_1..x_K (deterministic): the target's token
  is x_k with probability P_t(x_k), exactly (at target temperature 0 an indicator: the rank of
  the target's argmax);
- a sampling draft's children are draws without replacement from Q_t: `samples` draw sets per
  position (Gumbel-top-k), each verified as the trial verifies it: greedily (the draw equal to
  the target's argmax) at target temperature 0, else SpecInfer-style rejection with the drawn
  tokens removed from the residual (`accepted_rank`).

p_k is the mean over positions. A trial measures it once per pair, dtypes and sampling, on
prompts none of a sweep's first ones (orchestrator/acceptance.py); bench/sequoia_profile.py
prints it for `--param profile=...`.
"""

from __future__ import annotations

import torch

from engine.runtime.eager import CachedModel
from engine.runtime.eagle_head import EagleHead
from engine.runtime.eagle_views import teacher_forced_logits
from engine.sampling import Warp, draft_warp, draws_without_replacement, residual, warp
from engine.transfer import to_device


@torch.inference_mode()
def measure_profile(
    pair,
    prompts: list[list[int]],
    new_tokens: int = 64,
    width: int = 8,
    temperature: float = 0.0,
    samples: int = 32,
    seed: int = 0,
    top_p: float = 1.0,
    draft_temperature: float | None = None,
    draft_top_p: float | None = None,
) -> tuple[float, ...]:
    """p_1..p_width for a model pair (module docstring); rounded to 4 decimals."""
    if width < 1 or new_tokens < 1 or samples < 1 or not prompts:
        raise ValueError("measure_profile needs prompts, width, new_tokens and samples >= 1")
    gen = torch.Generator().manual_seed(seed)
    w = Warp(temperature, top_p)
    wd = draft_warp(w, draft_temperature, draft_top_p)
    counts, positions = torch.zeros(width, dtype=torch.float64), 0
    t_model, d_model = pair.target.model, pair.draft.model
    for ids in prompts:
        seq, cached = list(ids), CachedModel(t_model)
        logits = cached.extend(seq)[-1]
        for _ in range(new_tokens):  # the target's own continuation
            seq.append(
                int(logits.argmax())
                if w.greedy
                else int(torch.multinomial(warp(logits, w).cpu(), 1, generator=gen))
            )
            logits = cached.extend(seq[-1:])[-1]
        x = to_device([seq], t_model.device)
        p = warp(t_model(input_ids=x).logits[0, len(ids) - 1 : -1].float().cpu(), w)  # [T, V]
        if isinstance(d_model, EagleHead):  # an EAGLE head: its rows on the target's features
            qd = teacher_forced_logits(d_model, t_model, x)[0, len(ids) - 1 : -1].cpu()
        else:
            qd = d_model(input_ids=x.to(d_model.device)).logits[0, len(ids) - 1 : -1].float().cpu()
        q = torch.softmax(qd, -1) if wd.greedy else warp(qd, wd)  # [T, V]
        positions += p.shape[0]
        if wd.greedy:  # deterministic children: the draft's top-k, exactly
            top = q.topk(min(width, q.shape[-1]), dim=-1).indices  # [T, K]
            counts[: top.shape[1]] += p.gather(-1, top).double().sum(0)
            continue
        for t in range(p.shape[0]):  # Monte Carlo over `samples` draw sets
            tokens, _ = draws_without_replacement(q[t].expand(samples, -1), width, False, gen)
            for draws in tokens.tolist():  # [K] in draw order
                k = accepted_rank(p[t], q[t], draws, gen, greedy=w.greedy)
                if k is not None:
                    counts[k] += 1.0 / samples
    return tuple(round(float(c) / max(positions, 1), 4) for c in counts)


def accepted_rank(
    p: torch.Tensor, q: torch.Tensor, draws: list[int], gen: torch.Generator, greedy: bool = False
) -> int | None:
    """Which draw (without replacement from q [V], in draw order) the verifier accepts; None if
    every draw is rejected. greedy (p one-hot): the draw equal to the target's argmax.
    Otherwise SpecInfer-style: draw k is accepted with probability min(1, p_k(x_k) / q_k(x_k)),
    then p_{k+1} = norm((p_k - q_k)_+) and q_{k+1} = q_k without x_k, renormalised."""
    draws = [x for x in draws if q[x] > 0]  # draws past the support come last: dropped
    if greedy:
        best = int(p.argmax())
        return draws.index(best) if best in draws else None
    p_res, q_res = p, q.clone()
    for k, x in enumerate(draws):
        if float(torch.rand((), generator=gen)) < min(1.0, float(p_res[x] / q_res[x])):
            return k
        p_res = residual(p_res, q_res)
        q_res[x] = 0.0
        q_res = q_res / q_res.sum().clamp(min=1e-30)
    return None
