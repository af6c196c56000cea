"""The measurements of bench.gpu, one function per section (__main__.py's docstring says what
each measures and in which order main() runs them): copy bandwidth, our decoding per engine
path and HF greedy against the floor, forward-cost curves, the pairs' host time per iteration
and HF assisted generation, the Triton kernel against SDPA."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict

import torch

from bench import tree_attention
from bench.gpu.device import sync
from bench.gpu.models import PAIRS, ar_pair, loaded, random_prompt
from bench.gpu.predict import linear_tau, method_texts
from bench.gpu.report import ms_cell
from bench.host_time import host_seconds
from bench.tree_attention import time_ms
from engine.clock import synchronised
from engine.config import PADDED, ConfigError, split_engine
from engine.curves import measure_curve
from engine.decode import generate
from engine.methods import resolve_method
from engine.models import Pair
from engine.runtime import cached_model


def copy_bandwidth(device: torch.device, mib: int, repeats: int) -> dict:
    """Bytes read + written per second of a `mib` MiB device-to-device copy, median of
    `repeats` (CUDA events on a GPU, perf_counter on a CPU; bench/tree_attention.time_ms)."""
    n = mib << 20
    src = torch.empty(n, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup=2, reps=repeats, cuda=device.type == "cuda")
    return {"bytes": n, "repeats": repeats, "median_ms": ms, "bytes_per_s": 2 * n / (ms / 1e3)}


def warm_up(pair: Pair, prompt: list[int], method, new_tokens: int, engine: str) -> None:
    """One generation before the timed ones: allocations, and on a padded engine the graphs of
    the prefill and of every size the iterations use (there the warm-up is the whole
    generation, which greedy decoding repeats shape for shape, so no capture or compilation
    lands in a timed run; elsewhere at most 8 tokens)."""
    padded = split_engine(engine)[0] in PADDED
    generate(pair, prompt, method, new_tokens if padded else min(new_tokens, 8), engine=engine)


def ours(pair: Pair, prompt: list[int], method, new_tokens: int, engine: str, repeats: int):
    """Our engine's generations after a warm-up (warm_up): the GenerationStats of each of
    `repeats` runs."""
    warm_up(pair, prompt, method, new_tokens, engine)
    return [one(pair, prompt, method, new_tokens, engine) for _ in range(repeats)]


def one(pair: Pair, prompt: list[int], method, new_tokens: int, engine: str):
    """One generation's GenerationStats."""
    return generate(pair, prompt, method, new_tokens, engine=engine).stats


def iteration_split(stats) -> dict:
    """Host time per iteration (IterationStats: the iteration's wall time minus the time inside
    model forwards, bench/host_time.py) and its share of the iteration, pooled over runs."""
    its = [it for s in stats for it in s.iterations]
    wall = sum(it.draft_s + it.target_s + it.verify_s + it.bookkeeping_s for it in its)
    host = sum(host_seconds(s) for s in stats)
    n = len(its)
    return {
        "iterations": n,
        "iteration_ms": 1e3 * wall / n,
        "host_ms_per_iteration": 1e3 * host / n,
        "host_share": host / wall,
        "mean_tree_size": sum(it.tree_size for it in its) / n,
        "draft_forwards_per_iteration": sum(it.draft_forwards for it in its) / n,
        "tokens_per_iteration": sum(it.emitted for it in its) / n,
        "split_ms_per_iteration": {
            k: 1e3 * sum(getattr(it, k) for it in its) / n
            for k in asdict(its[0])
            if k.endswith("_s")
        },
    }


class ForwardCounter:
    """Counts top-level forward calls of a module (a target forward per HF assisted iteration)."""

    def __init__(self, model) -> None:
        self.calls = 0
        self.handle = model.register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        self.calls += 1


def hf_call(model, prompt: torch.Tensor, new_tokens: int, **kw) -> tuple[float, int, int]:
    """Wall seconds of one HF `generate` call, the target forwards and the assistant's (draft)
    forwards it ran."""
    counter = ForwardCounter(model)
    assistant = kw.get("assistant_model")
    drafts = ForwardCounter(assistant) if assistant is not None else None
    try:
        sync(model.device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                prompt,
                max_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
                **kw,
            )
        sync(model.device)
        seconds = time.perf_counter() - t0
    finally:
        counter.handle.remove()
        if drafts:
            drafts.handle.remove()
    assert out.shape[1] == prompt.shape[1] + new_tokens, "HF stopped early"
    return seconds, counter.calls, drafts.calls if drafts else 0


def hf_differential(model, prompt, m1: int, m2: int, repeats: int, **kw) -> dict:
    """HF decoding cost with the prefill cancelled: `repeats` calls each at m1 and m2 new
    tokens, interleaved; dt = the fastest m2 call - the fastest m1 call (load only adds
    time); per token = dt / (m2 - m1), per iteration = dt / (forwards(m2) - forwards(m1)).
    A dt <= 0 (noise larger than the difference) is reported as None with a note."""
    hf_call(model, prompt, m2, **kw)  # warm-up
    calls = [
        (hf_call(model, prompt, m1, **kw), hf_call(model, prompt, m2, **kw)) for _ in range(repeats)
    ]
    dt = min(b[0] for _, b in calls) - min(a[0] for a, _ in calls)
    forwards = [statistics.median(c[i][1] for c in calls) for i in (0, 1)]
    drafts = [statistics.median(c[i][2] for c in calls) for i in (0, 1)]
    its = forwards[1] - forwards[0]
    out = {"new_tokens": [m1, m2], "target_forwards": forwards, "ms_per_token": None}
    if "assistant_model" in kw and its > 0:
        out["draft_forwards_per_iteration"] = (drafts[1] - drafts[0]) / its
    if dt <= 0:
        out["note"] = f"t({m2}) - t({m1}) = {dt * 1e3:.3f} ms: noise exceeds the difference"
        return out
    out["ms_per_token"] = 1e3 * dt / (m2 - m1)
    if its > 0:
        out["ms_per_iteration"] = 1e3 * dt / its
        out["tokens_per_iteration"] = (m2 - m1) / its
    return out


def ar_section(name, model, args, engines: list[str], hf: bool, floor_ms: float, budget, log):
    """Our autoregressive decoding per engine path (and HF greedy): ms per token, x floor. An
    engine ENGINE+lean runs on our own forward of the same model (engine/runtime/lean.py)."""
    prompt = random_prompt(model, args.prompt_tokens, args.seed)
    pair = ar_pair(name, model, args.seed)
    out = {}

    def ours_ar(engine):
        stats = ours(pair, prompt, "autoregressive", args.new_tokens, engine, args.repeats)
        split = iteration_split(stats)
        out = {
            "ms_per_token": 1e3 * statistics.median(s.summary()["tpot_s"] for s in stats),
            "host_ms_per_iteration": split["host_ms_per_iteration"],
            "host_share": split["host_share"],
        }
        with synchronised():  # the same runs timed as before session 8 (engine/clock.py)
            synced = [
                one(pair, prompt, "autoregressive", args.new_tokens, engine)
                for _ in range(args.repeats)
            ]
        out["ms_per_token_synchronised"] = 1e3 * statistics.median(
            s.summary()["tpot_s"] for s in synced
        )
        if engine.startswith("graphs") and model.device.type == "cuda":
            out["replay_ms"] = replay_ms(cached_model(model, engine), args.repeats)
        return out

    for engine in engines:
        r = budget.run(f"{name} autoregressive {engine}", lambda e=engine: ours_ar(e))
        if r:
            out[f"ours_{engine}"] = r = {**r, "over_floor": r["ms_per_token"] / floor_ms}
            replay = f", graph replay alone {r['replay_ms']:.3f} ms" if r.get("replay_ms") else ""
            log(f"  {name}: ours {engine} {ms_cell(r)} ms/token{replay}")
    x = torch.tensor([prompt], device=model.device)
    r = (
        budget.run(
            f"{name} HF greedy", lambda: hf_differential(model, x, 1, args.new_tokens, args.repeats)
        )
        if hf
        else None
    )
    if r:
        ms = r["ms_per_token"]
        out["hf_greedy"] = r = {**r, "over_floor": ms / floor_ms if ms else None}
        log(f"  {name}: HF greedy {ms_cell(r)} ms/token")
    return out


def replay_ms(lm, repeats: int) -> float | None:
    """The GPU time of a one-token forward's CUDA graph replayed alone (CUDA events, median of
    10 x `repeats`): what an autoregressive step costs with no host work around it."""
    one = [g for k, (g, _, _) in lm._graph_call.graphs.items() if k[0][1] == (1, 1)]
    return time_ms(one[0].replay, warmup=3, reps=10 * repeats, cuda=True) if one else None


def curve(model, name: str, args, engine: str, log):
    """The forward-cost curve (engine/curves.py): fast at --sizes x --contexts, compiled at
    --compiled-sizes x the prompt's context (each size bucket is one compiled graph)."""
    compiled = engine == "compiled"  # graphs: every size and context (a capture is cheap)
    c = measure_curve(
        model,
        name,
        sizes=args.compiled_sizes if compiled else args.sizes,
        contexts=[args.prompt_tokens] if compiled else args.contexts,
        engine=engine,
        repeats=args.repeats,
        warmup=1,
        seed=args.seed,
    )
    log(f"  {name}: {engine} forward-cost curve ({len(c.points)} points)")
    return c.to_dict()


def verification_table(curve: dict, context: int) -> list[dict]:
    """Verification cost per tree size: the measured forward over n new tokens at the
    curve's context nearest to `context`, and its ratio to a single-token forward there."""
    contexts = sorted({c for c, _, _ in curve["points"]})
    at = min(contexts, key=lambda c: abs(c - context))
    pts = sorted((n, s) for c, n, s in curve["points"] if c == at)
    one = dict(pts).get(1)
    return [
        {"context": at, "n": n, "ms": 1e3 * s, "over_one": s / one if one else None} for n, s in pts
    ]


def record_methods(record: dict, wanted: str | None) -> dict:
    """Method text -> resolved Method: the record's methods with its parameters (or the
    --methods subset), autoregressive left out (the baseline)."""
    texts = method_texts(record)
    keep = wanted.split(",") if wanted else list(texts)
    if unknown := [t for t in keep if t not in texts]:
        raise ConfigError(f"method {unknown[0]!r} is not in the record ({', '.join(texts)})")
    return {
        t: resolve_method(*texts[t]) for t in keep if t in texts and texts[t][0] != "autoregressive"
    }


def pair_section(name, target, draft, args, record, budget, log) -> dict:
    """Host overhead of every record method on the random pair (--pair-engine), and HF
    assisted generation as shipped and at the record's constant linear k."""
    pair = Pair(loaded(PAIRS[name][0], target), loaded(PAIRS[name][1], draft))
    prompt = random_prompt(target, args.prompt_tokens, args.seed + 1)
    out = {"methods": {}, "hf_assisted": {}}
    for text, method in record_methods(record, args.methods).items():

        def host(method=method):
            # after a warm-up (ours), `repeats` runs, each beside the same generation timed as
            # before session 8 (engine/clock.py synchronised): the baseline
            ours(pair, prompt, method, args.method_tokens, args.pair_engine, 0)
            stats, synced = [], []
            for _ in range(args.repeats):
                stats.append(one(pair, prompt, method, args.method_tokens, args.pair_engine))
                with synchronised():
                    synced.append(one(pair, prompt, method, args.method_tokens, args.pair_engine))
            split = iteration_split(stats)
            return {"engine": args.pair_engine, **split, "synchronised": iteration_split(synced)}

        row = budget.run(f"{name} {text} host overhead", host)
        if row:
            out["methods"][text] = row
            ms, share = row["host_ms_per_iteration"], row["host_share"]
            before = row["synchronised"]["iteration_ms"]
            log(
                f"  {name}: {text} host {ms:.3f} ms/iteration ({share:.1%}); iteration "
                f"{row['iteration_ms']:.3f} ms, synchronised timing {before:.3f} ms"
            )
    if args.no_hf:
        return out
    x = torch.tensor([prompt], device=target.device)
    m1, m2 = max(2, args.new_tokens // 4), args.new_tokens
    hf = budget.run(
        f"{name} HF assisted (as shipped)",
        lambda: hf_differential(target, x, m1, m2, args.repeats, assistant_model=draft),
    )
    if hf:
        out["hf_assisted"]["as_shipped"] = hf
        log(f"  {name}: HF assisted as shipped {ms_cell(hf)} ms/token")
    lin = linear_tau(record)
    k = lin[1] if lin else 4

    def constant_k():
        cfg = draft.generation_config
        keys = ("num_assistant_tokens", "num_assistant_tokens_schedule")
        keys += ("assistant_confidence_threshold",)
        saved = {key: getattr(cfg, key) for key in keys}
        # k draft tokens every iteration: constant schedule, no confidence stop
        cfg.update(**dict(zip(keys, (k, "constant", 0.0))))
        try:
            return hf_differential(target, x, m1, m2, args.repeats, assistant_model=draft)
        finally:
            cfg.update(**saved)

    hf = budget.run(f"{name} HF assisted (constant k={k})", constant_k)
    if hf:
        out["hf_assisted"]["constant_k"] = {"k": k, **hf}
        log(f"  {name}: HF assisted k={k} {ms_cell(hf, 'ms_per_iteration')} ms/iteration")
    return out


def kernel_section(target, args, cuda: bool) -> dict:
    """bench/tree_attention.py's Triton kernel against SDPA with a dense mask, at the target's
    head shape, prefix = each --contexts, 64 to 256 nodes (tiny shapes when not on CUDA)."""
    cfg = target.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    argv = ["--heads", str(cfg.num_attention_heads), "--kv-heads", str(cfg.num_key_value_heads)]
    argv += ["--head-dim", str(head_dim), "--seed", str(args.seed)]
    if cuda:
        argv += ["--prefix", *map(str, args.contexts), "--nodes", "64", "128", "256"]
    else:  # interpreter mode, the kernel's smallest head dim: a check that it runs
        argv += ["--prefix", "16", "--nodes", "20", "--warmup", "0", "--reps", "1"]
        argv += ["--head-dim", "64"]
    return tree_attention.run(tree_attention.parse_args(argv), cuda)
