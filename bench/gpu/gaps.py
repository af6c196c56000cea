"""Where the GPU waits for the host in a method's iterations (issue 22): the idle gaps of the
device timeline, each charged to the engine code that launched the kernels on either side.

bench.gpu measures each method's host time per iteration (docs/gpu.md: DySpec and SALF at
10-14% against the 10% goal) but not where it goes. This runs one profiled generation per
method on a random-weight pair (after a warm-up generation: captures, allocations), exports
the profiler's trace (torch.profiler with Python stacks) and, from it:

- the device's busy intervals (kernels, copies, memsets) merged, and the gaps between them of
  at least --min-gap-us: the time the GPU had nothing queued;
- for every kernel, the engine frames (engine/..., outermost first) that were on the host's
  Python stack when its launch was made (runtime event and kernel share a correlation id; a
  CUDA graph's kernels share their replay's), so a gap is charged to the pair "launched
  after / launched before": what the GPU finished last, and what the host launched next;
- per method: iterations, device busy and idle time per iteration, and the top pairs by idle
  time per iteration.

On a GPU box (random weights, bench/gpu/models.py; needs torch and transformers):

    device run: python3 -m bench.gpu.gaps --pair qwen2.5-1.5b/qwen2.5-0.5b \
        --methods linear:k=4,dyspec,salf --out $OUT/gaps.json

Here, at toy sizes (a CPU trace has no device events: checks that it runs and parses):

    python -m bench.gpu.gaps --tiny --methods dyspec --engine fast
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from bench.common import write_record
from bench.engine_overhead import parse_method
from bench.gpu.device import cuda_name
from bench.gpu.models import PAIRS, Models, loaded, random_prompt
from bench.gpu.profiling import add_trace_options, profile_generation
from bench.gpu.sections import warm_up
from bench.host_time import iteration_seconds
from engine.config import ENGINES
from engine.devices import pick_device, pick_dtype
from engine.methods import resolve_method
from engine.models import Pair

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu.gaps", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--pair", default="qwen2.5-1.5b/qwen2.5-0.5b", choices=list(PAIRS))
    ap.add_argument("--methods", default="linear:k=4,dyspec,salf")
    ap.add_argument("--engine", default="graphs")
    ap.add_argument("--min-gap-us", type=float, default=5.0)
    add_trace_options(ap, tokens=32)
    args = ap.parse_args(argv)
    if args.engine not in ENGINES:
        ap.error(f"unknown engine {args.engine!r} (known: {', '.join(ENGINES)})")
    if args.tokens < 2:
        ap.error("--tokens must be >= 2")
    return args


def engine_frame(name: str) -> str | None:
    """'engine/drafters/dyspec.py(94): grow_greedy' -> 'dyspec.grow_greedy'; None for frames
    outside the engine (torch, transformers, the benchmark)."""
    path, _, func = name.partition(": ")
    path = path.rsplit("(", 1)[0]
    if "engine/" not in path or not func:
        return None
    return f"{Path(path).stem}.{func}"


def launch_stacks(events: list[dict]) -> dict[int, str]:
    """Correlation id -> the engine frames on the launching thread's Python stack at the launch,
    outermost first, joined by ' > ' ('' when no engine frame was on it). Python frames are
    complete ('X') events that nest, so one sweep in time order with a stack finds each
    launch's enclosing frames (one stack: the engine decodes on one host thread)."""
    marks = []  # (ts, order, kind, event): frames open before a launch at the same instant
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "python_function":
            marks.append((e["ts"], 0, -e.get("dur", 0), e))
        elif e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {}):
            marks.append((e["ts"], 1, 0, e))
    marks.sort(key=lambda m: m[:3])
    stack: list = []  # open frames [(end, engine frame or None)]
    out = {}
    for ts, kind, _, e in marks:
        while stack and stack[-1][0] <= ts:
            stack.pop()
        if kind == 0:
            stack.append((ts + e.get("dur", 0), engine_frame(e["name"])))
        else:
            out[e["args"]["correlation"]] = " > ".join(f for _, f in stack if f)
    return out


def device_gaps(events: list[dict], min_gap_us: float) -> tuple[float, list[dict]]:
    """The device's busy time (merged intervals, microseconds) and its gaps of at least
    min_gap_us between the first and last device event: [{us, after, before}], `after` and
    `before` the launch stacks (launch_stacks) of the work that ended and began the gap."""
    stacks = launch_stacks(events)
    work = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0), e.get("args", {}).get("correlation"))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES
    )
    busy, gaps = 0.0, []
    if not work:
        return busy, gaps
    start, end, last = work[0][0], work[0][1], work[0][2]
    for s, e, corr in work[1:]:
        if s > end:
            busy += end - start
            if s - end >= min_gap_us:
                gaps.append(
                    {"us": s - end, "after": stacks.get(last, "?"), "before": stacks.get(corr, "?")}
                )
            start = s
        if e >= end:
            end, last = e, corr
    busy += end - start
    return busy, gaps


def summarise(busy_us: float, gaps: list[dict], iterations: int, top: int) -> dict:
    """Per iteration: device busy and idle milliseconds, and the top (after, before) pairs."""
    per = defaultdict(lambda: [0, 0.0])
    for g in gaps:
        per[(g["after"], g["before"])][0] += 1
        per[(g["after"], g["before"])][1] += g["us"]
    idle = sum(g["us"] for g in gaps)
    ranked = sorted(per.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "iterations": iterations,
        "busy_ms_per_iteration": busy_us / 1e3 / iterations,
        "idle_ms_per_iteration": idle / 1e3 / iterations,
        "gaps_per_iteration": len(gaps) / iterations,
        "top": [
            {
                "after": a,
                "before": b,
                "gaps_per_iteration": n / iterations,
                "idle_ms_per_iteration": us / 1e3 / iterations,
            }
            for (a, b), (n, us) in ranked
        ],
    }


def profiled(pair: Pair, prompt: list[int], method, args, stack: bool) -> dict:
    """One profiled generation: its gaps (summarise) and its iteration time as the engine
    timed it. Recording Python frames slows the host, so its gaps are longer than unprofiled."""
    prof, got = profile_generation(pair, prompt, method, args.tokens, args.engine, with_stack=stack)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    busy, gaps = device_gaps(events, args.min_gap_us)
    its = got.stats.iterations
    out = summarise(busy, gaps, len(its), args.top)
    out["event_categories"] = dict(Counter(e.get("cat") for e in events))  # format check
    out["iteration_ms"] = 1e3 * iteration_seconds(got.stats) / len(its)
    return out


def trace(pair: Pair, prompt: list[int], method, args) -> dict:
    """After a warm-up generation (captures, allocations): one generation profiled with Python
    frames (the charges) and one without (idle time closer to an unprofiled run's)."""
    warm_up(pair, prompt, method, args.tokens, args.engine)
    out = profiled(pair, prompt, method, args, stack=True)
    plain = profiled(pair, prompt, method, args, stack=False)
    out["without_stacks"] = {k: v for k, v in plain.items() if k != "top"}
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    models = Models(args, device, dtype)
    tname, dname = PAIRS[args.pair]
    target = models.get(tname)
    draft = models.get(dname, target.config.vocab_size)
    pair = Pair(loaded(tname, target), loaded(dname, draft))
    prompt = random_prompt(target, 16 if args.tiny else args.prompt_tokens, args.seed + 1)
    report = {"bench": "gpu_gaps", "pair": args.pair, "engine": args.engine, "tiny": args.tiny}
    report |= {"device": str(device), "dtype": str(dtype).removeprefix("torch.")}
    report |= cuda_name(device)
    report["methods"] = {}
    for text in args.methods.split(","):
        r = report["methods"][text] = trace(pair, prompt, resolve_method(*parse_method(text)), args)
        plain = r["without_stacks"]
        print(
            f"{args.pair} {text} on {args.engine}: iteration {r['iteration_ms']:.3f} ms, device "
            f"busy {r['busy_ms_per_iteration']:.3f} ms, idle {r['idle_ms_per_iteration']:.3f} ms "
            f"in {r['gaps_per_iteration']:.1f} gaps per iteration (without Python stacks: "
            f"iteration {plain['iteration_ms']:.3f} ms, idle {plain['idle_ms_per_iteration']:.3f})"
        )
        for g in r["top"]:
            print(
                f"    {g['idle_ms_per_iteration']:.3f} ms in {g['gaps_per_iteration']:.1f}: "
                f"after [{g['after']}] before [{g['before']}]"
            )
        if args.out:  # after every row: what finished survives a timeout
            write_record(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
