"""Where a decoding step's GPU time goes (issue 22): one model's autoregressive steps on each
engine path under torch.profiler, summarised as device kernels per token, device time per
token and the kernels that take it. The question it answers (docs/gpu.md, 2026-11-27): our
`graphs` step of the 7B model is 1.86x the bandwidth floor, and its graph replayed alone
takes 94% of the step, so the gap is in the recorded kernels - how many, and which.

On a GPU box (needs only torch and transformers; random weights, bench/gpu/models.py):

    device run: python3 -m bench.gpu.trace --model qwen2.5-0.5b --engines graphs,compiled \
        --out $OUT/trace.json

Here, at toy sizes (the profiler's CPU ops stand in for kernels; a check that it runs):

    python -m bench.gpu.trace --tiny --engines fast,graphs,graphs+lean

An engine ENGINE+lean runs on our own forward of the model (engine/runtime/lean.py).

Method: one warm-up generation of --tokens tokens (captures and compilations), then one
profiled generation of the same prompt; per engine the profiled kernels (CUDA activities on a
GPU, CPU ops elsewhere), their count and summed self time divided by the tokens generated, and
the --top kernels by time with their counts per token.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from bench.common import write_record
from bench.gpu.device import cuda_name
from bench.gpu.models import ARCHS, Models, ar_pair, random_prompt
from bench.gpu.profiling import add_trace_options, profile_generation
from engine.config import ENGINE_SPECS
from engine.decode import generate
from engine.devices import pick_device, pick_dtype
from engine.models import Pair


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu.trace", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--model", default="qwen2.5-0.5b", choices=list(ARCHS))
    ap.add_argument("--engines", default="graphs,compiled")
    add_trace_options(ap, tokens=16)
    args = ap.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    if bad := [e for e in args.engines if e not in ENGINE_SPECS]:
        ap.error(f"unknown engine {bad[0]!r} (known: {', '.join(ENGINE_SPECS)})")
    if args.tokens < 2:
        ap.error("--tokens must be >= 2")
    return args


def summarise(events, cuda: bool, tokens: int, top: int) -> dict:
    """Kernels (self device time) or, without CUDA, CPU ops (self CPU time) per token."""
    per = defaultdict(lambda: [0, 0.0])  # name -> [count, microseconds]
    for e in events:
        if cuda and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = e.self_device_time_total if cuda else e.self_cpu_time_total
        per[e.name][0] += 1
        per[e.name][1] += us
    count = sum(c for c, _ in per.values())
    total_us = sum(t for _, t in per.values())
    ranked = sorted(per.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "unit": "cuda kernels" if cuda else "cpu ops",
        "per_token": count / tokens,
        "ms_per_token": total_us / 1e3 / tokens,
        "top": [
            {"name": n[:120], "per_token": c / tokens, "ms_per_token": t / 1e3 / tokens}
            for n, (c, t) in ranked
        ],
    }


def trace(pair: Pair, prompt: list[int], engine: str, tokens: int, top: int) -> dict:
    generate(pair, prompt, "autoregressive", tokens, engine=engine)  # captures, compilation
    prof, got = profile_generation(pair, prompt, "autoregressive", tokens, engine)
    n = len(got.tokens)
    out = summarise(prof.events(), pair.target.device.type == "cuda", n, top)
    out["wall_ms_per_token"] = 1e3 * got.stats.summary()["tpot_s"]
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    model = Models(args, device, dtype).get(args.model)
    pair = ar_pair(args.model, model, args.seed)
    prompt = random_prompt(model, 16 if args.tiny else args.prompt_tokens, args.seed)
    report = {"bench": "gpu_trace", "model": args.model, "tiny": args.tiny, "device": str(device)}
    report["dtype"] = str(dtype).removeprefix("torch.")
    report |= cuda_name(device)
    report["engines"] = {}
    for engine in args.engines:
        r = report["engines"][engine] = trace(pair, prompt, engine, args.tokens, args.top)
        print(
            f"{args.model} {engine}: {r['per_token']:.0f} {r['unit']} per token, "
            f"{r['ms_per_token']:.3f} ms of their time per token, "
            f"wall {r['wall_ms_per_token']:.3f} ms per token"
        )
        for k in r["top"]:
            print(f"    {k['per_token']:6.1f} x {k['ms_per_token']:.4f} ms  {k['name']}")
        if args.out:  # after every row: what finished survives a timeout
            write_record(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
