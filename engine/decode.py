"""The decoding loop: prefill, draft a tree, one target forward over it, verify, commit.

    committed = prompt                       target cache holds committed[:-1]
    loop:                                    generate(): timing, truncation, EOS, stats
        tree   = build(draft, state, cfg)    iterate(): node 0 = committed[-1] (the root)
        logits = target(tree)                  ancestor-only mask, positions prefix + depth
        accept = verify(tree, warp(logits))    accepted path + correction/bonus token
        committed += path tokens + token     target/draft caches keep the accepted path

One iteration is engine/iteration's `iterate` (the first path that applies: the seam a faster
path replaces, as gpt-fast's `speculative_decode` beside its `generate`); `generate` owns
everything across iterations, and opens a method's learned part (its record's `attach`,
engine/drafters/record.py) for the generation.
Exactly `max_new_tokens` tokens are emitted (the last iteration's output is truncated) unless
EOS comes first; EOS is emitted and ends the generation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from engine.clock import Clock
from engine.config import ConfigError, split_engine
from engine.draft import DecodeState, DraftModel, NoDraft
from engine.draft.eagle import EagleDraft
from engine.drafters import DRAFTERS
from engine.iteration import iterate
from engine.iteration.step import read_counts
from engine.methods import Method, check_without_draft, resolve_method
from engine.metrics import GenerationStats, IterationStats, peak_memory, reset_peak_memory
from engine.models import Pair
from engine.runtime import MIN_CAPACITY, cached_model
from engine.runtime.eagle_head import EagleHead
from engine.sampling import Warp, draft_warp


@dataclass(frozen=True)
class Generation:
    tokens: list[int]  # the new tokens only
    stats: GenerationStats


def stage_times(timed: tuple, at: list[float], spans) -> dict[str, float]:
    """An iteration's IterationStats times from `timed` (its Step's stamps, draft and target
    forward spans, and the stamps after the step and after its bookkeeping), the generation's
    resolved stamps `at` (Clock.seconds) and Clock.spans."""
    stamps, draft_spans, target_spans, t3, t4 = timed
    s0, s1, s2, s3 = (at[i] for i in stamps)
    return {
        "draft_s": s1 - s0,
        "target_s": s2 - s1,
        "verify_s": s3 - s2,
        "bookkeeping_s": at[t4] - at[t3],
        "draft_forward_s": spans(draft_spans),
        "target_forward_s": spans(target_spans),
    }


def generate(
    pair: Pair,
    prompt_ids: list[int],
    method: str | Method,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    params: dict | None = None,
    engine: str = "eager",
    draft_temperature: float | None = None,
    draft_top_p: float | None = None,
) -> Generation:
    """Decode until `max_new_tokens` or EOS; timing, truncation, caches and stats live here,
    one iteration is engine/iteration's `iterate`. engine: how the models run
    (engine/config.py ENGINE_SPECS: an engine path, or ENGINE+lean on our own forward of the
    models, engine/runtime/lean.py).
    temperature / top_p: the target's sampling, the law of the output; draft_temperature /
    draft_top_p: how the draft draws its trees (None: as the target; DySpec Sec. 5.1 drafts at
    0.6 for targets at 0 and 0.6). A method given resolved must have been resolved with the
    same draft temperature (its verifier's pairing with the trees depends on it)."""
    if isinstance(method, str):
        method = resolve_method(method, params, temperature, draft_temperature)
    if not prompt_ids:
        raise ConfigError("the prompt must contain at least one token")
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    try:
        w = Warp(temperature, top_p)
        dw = draft_warp(w, draft_temperature, draft_top_p)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    device = pair.target.device
    gen = torch.Generator(device=device).manual_seed(seed)
    eos = pair.target.tokenizer.eos_token_id
    path, _ = split_engine(engine)
    capacity = len(prompt_ids) + max_new_tokens + MIN_CAPACITY
    target = cached_model(pair.target.model, engine, capacity)
    target.hidden_layers, target.hidden = (), None  # no features unless the draft or method asks
    if pair.draft is None:  # a model-free method (prompt lookup): engine/draft/none.py
        check_without_draft(method.name)
        draft = NoDraft(device)
    elif isinstance(pair.draft.model, EagleHead):  # an EAGLE head: engine/draft/eagle.py
        draft = EagleDraft(pair.draft.model, target, dw)
    else:
        draft = DraftModel(pair.draft.model, dw, cached_model(pair.draft.model, engine, capacity))
    attach = DRAFTERS[method.name].attach
    attached = None if attach is None else attach(method.cfg, pair, target, draft, path)
    if attached is not None and isinstance(draft, EagleDraft):
        attached.close()
        raise ConfigError(
            f"method {method.name!r}: its learned part needs a draft LM or the target's "
            f"features of its own; an EAGLE head cannot be its draft"
        )
    try:
        with torch.inference_mode():  # once per generation, not per forward (engine/runtime)
            return _generate(
                target, draft, method, prompt_ids, max_new_tokens, w, dw, gen, eos, attached
            )
    finally:
        if attached is not None:
            attached.close()


def _generate(target, draft, method, prompt_ids, max_new_tokens, w, dw, gen, eos, attached):
    """generate()'s loop over its loaded caches; attached: the method's learned part opened for
    this generation (engine/drafters/record.py Attached), None when it has none."""
    device = target.device
    reset_peak_memory(device)
    clock = Clock(device)  # both models' forwards and every stage, resolved at the end
    target.use_clock(clock)
    draft.lm.use_clock(clock)
    start = clock.stamp()
    committed = list(prompt_ids)
    target.extend(committed[:-1])
    if isinstance(draft, EagleDraft):  # the prompt's target features (the root's excepted)
        draft.prefill(target)
    if attached is not None and len(committed) > 1:
        attached.prefill(target)  # the target's prefill over the prompt, the root excepted
    prefilled = clock.stamp()
    out: list[int] = []
    iterations: list[IterationStats] = []  # their times and acceptance counts after the loop
    counts: list[torch.Tensor | tuple[int, int]] = []  # per iteration, Step.counts
    timed: list[tuple] = []  # per iteration: its stamps and forward spans (stage_times)
    history: list[int] = []
    history_depth: list[int] = []
    history_size: list[int] = []
    done = False
    while not done:
        state = DecodeState(
            prefix_len=len(committed) - 1,
            root_token=committed[-1],
            warp=w,
            draft_warp=dw,
            remaining=max_new_tokens - len(out),
            history=tuple(history),
            history_depth=tuple(history_depth),
            history_size=tuple(history_size),
            context=committed,  # by reference: read-only for the drafter (engine/draft/state.py)
            attached=attached,
        )
        step = iterate(target, draft, method, committed, state, gen)
        t3 = clock.stamp()
        new = step.new[: max_new_tokens - len(out)]
        if eos is not None and eos in new:
            new = new[: new.index(eos) + 1]
        out += new
        committed += new
        done = len(out) >= max_new_tokens or (eos is not None and out[-1] == eos)
        path = step.accept.path
        if not done:  # keep the root and the accepted nodes' cache; the last token is the root
            target.commit([state.prefix_len + i for i in [0] + path])
            draft.commit(path)
            if attached is not None:  # the root and the accepted nodes are committed now
                attached.commit(target, path)
        history.append(len(path))
        history_depth.append(step.tree.max_depth())
        history_size.append(step.tree.size - 1)
        counts.append(step.counts)
        timed.append((step.stamps, step.draft_spans, step.target_spans, t3, clock.stamp()))
        iterations.append(
            IterationStats(
                tree_size=step.tree.size,
                accepted=len(path),
                emitted=len(new),
                draft_s=0.0,  # the times once the clock is read, after the loop
                target_s=0.0,
                verify_s=0.0,
                bookkeeping_s=0.0,
                draft_forward_s=0.0,
                target_forward_s=0.0,
                draft_forwards=step.draft_forwards,
                draft_tokens=step.draft_tokens,
            )
        )
    at = clock.seconds()  # the one wait for the timings (engine/clock.py)
    target.use_clock(Clock(device))  # the generation's clock and its first event let go now,
    draft.lm.use_clock(Clock(device))  # not by a garbage collection during a graph capture
    iterations = [
        replace(it, **stage_times(t, at, clock.spans), top_match=top, tried=it.accepted + below)
        for it, t, (top, below) in zip(iterations, timed, read_counts(counts))
    ]
    stats = GenerationStats(
        method=method.name,
        new_tokens=len(out),
        prefill_s=at[prefilled] - at[start],
        ttft_s=at[timed[0][3]] - at[start],
        total_s=at[-1] - at[start],
        peak_memory_bytes=peak_memory(device),
        iterations=tuple(iterations),
    )
    return Generation(tokens=out, stats=stats)
