"""The decoding loop: prefill, draft a tree, one target forward over it, verify, commit.

    committed = prompt                       target cache holds committed[:-1]
    loop:
        tree   = build(draft, state, cfg)    node 0 = committed[-1] (the root)
        logits = target(tree)                ancestor-only mask, positions prefix + depth
        accept = verify(tree, warp(logits))  accepted path + correction/bonus token
        committed += path tokens + token     target/draft caches keep the accepted path

Exactly `max_new_tokens` tokens are emitted (the last iteration's output is truncated) unless
EOS comes first; EOS is emitted and ends the generation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any

import torch

from engine.cache import CachedModel, sync
from engine.config import ConfigError, parse_config
from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.metrics import GenerationStats, IterationStats, peak_memory, reset_peak_memory
from engine.models import Pair
from engine.sampling import Warp, warp
from engine.verify import VERIFIERS


@dataclass(frozen=True)
class Method:
    """A resolved method: drafter name, its parsed config, and the verifier to use."""

    name: str
    cfg: Any
    verifier: str


@dataclass(frozen=True)
class Generation:
    tokens: list[int]  # the new tokens only
    stats: GenerationStats


def default_verifier(method: str, temperature: float) -> str:
    if temperature == 0.0:
        return "greedy"
    cls = DRAFTERS[method][0]
    return getattr(cls, "default_verifier", "naive")


def resolve_method(method: str, params: dict[str, Any] | None = None,
                   temperature: float = 0.0) -> Method:
    """Validate a method name and its parameters (strings or typed); ConfigError if bad."""
    if method not in DRAFTERS:
        raise ConfigError(f"unknown method {method!r} (known: {', '.join(DRAFTERS)})")
    params = dict(params or {})
    verifier = params.pop("verifier", None) or default_verifier(method, temperature)
    if verifier not in VERIFIERS:
        raise ConfigError(f"unknown verifier {verifier!r} (known: {', '.join(VERIFIERS)})")
    if verifier == "greedy" and temperature != 0.0:
        raise ConfigError("verifier 'greedy' is only lossless at temperature 0; pick a "
                          f"stochastic verifier ({', '.join(v for v in VERIFIERS if v != 'greedy')})")
    cfg = parse_config(DRAFTERS[method][0], params, where=f"method {method!r}")
    return Method(name=method, cfg=cfg, verifier=verifier)


def method_params(m: Method) -> dict[str, Any]:
    """The fully resolved parameters of a method (defaults filled in), verifier included."""
    out = {f.name: getattr(m.cfg, f.name) for f in fields(m.cfg)}
    out["verifier"] = m.verifier
    return out


def generate(pair: Pair, prompt_ids: list[int], method: str | Method, max_new_tokens: int,
             temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
             params: dict[str, Any] | None = None) -> Generation:
    if isinstance(method, str):
        method = resolve_method(method, params, temperature)
    if not prompt_ids:
        raise ConfigError("the prompt must contain at least one token")
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    w = Warp(temperature, top_p)
    build = DRAFTERS[method.name][1]
    verify = VERIFIERS[method.verifier]
    device = pair.target.device
    gen = torch.Generator(device=device).manual_seed(seed)
    eos = pair.target.tokenizer.eos_token_id
    target = CachedModel(pair.target.model)
    draft = DraftModel(pair.draft.model, w)
    reset_peak_memory(device)

    sync(device)
    start = time.perf_counter()
    committed = list(prompt_ids)
    target.extend(committed[:-1])
    prefill_s = time.perf_counter() - start
    ttft_s = 0.0
    out: list[int] = []
    iterations: list[IterationStats] = []
    history: list[int] = []
    history_depth: list[int] = []
    done = False
    while not done:
        t0 = time.perf_counter()
        draft_fwd0, target_fwd0 = draft.lm.forward_seconds, target.forward_seconds
        state = DecodeState(prefix_len=len(committed) - 1, root_token=committed[-1], warp=w,
                            remaining=max_new_tokens - len(out), history=tuple(history),
                            history_depth=tuple(history_depth))
        tree = build(draft.start(committed), state, method.cfg, gen)
        sync(device)
        t1 = time.perf_counter()
        logits = target.forward(tree.tokens, tree.position_ids(state.prefix_len)[0],
                                tree.visibility(state.prefix_len), tree.parents)  # [N, V]
        t2 = time.perf_counter()
        p = warp(logits, w)  # [N, V]
        accept = verify(tree, p, gen)
        sync(device)
        t3 = time.perf_counter()
        new = tree.tokens[accept.path].tolist() + [accept.token]
        new = new[:max_new_tokens - len(out)]
        if eos is not None and eos in new:
            new = new[:new.index(eos) + 1]
        out += new
        committed += new
        done = len(out) >= max_new_tokens or (eos is not None and out[-1] == eos)
        if not done:  # keep the root and the accepted nodes' cache; the last token is the root
            target.commit([state.prefix_len + i for i in [0] + accept.path])
            draft.commit(accept.path)
        history.append(len(accept.path))
        history_depth.append(int(tree.depth.max()))
        t4 = time.perf_counter()
        if not iterations:
            ttft_s = t3 - start
        iterations.append(IterationStats(
            tree_size=tree.size, accepted=len(accept.path), emitted=len(new),
            draft_s=t1 - t0, target_s=t2 - t1, verify_s=t3 - t2, bookkeeping_s=t4 - t3,
            draft_forward_s=draft.lm.forward_seconds - draft_fwd0,
            target_forward_s=target.forward_seconds - target_fwd0))
    total_s = time.perf_counter() - start
    stats = GenerationStats(method=method.name, new_tokens=len(out), prefill_s=prefill_s,
                            ttft_s=ttft_s, total_s=total_s,
                            peak_memory_bytes=peak_memory(device), iterations=tuple(iterations))
    return Generation(tokens=out, stats=stats)
