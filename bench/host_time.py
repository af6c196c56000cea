"""Host time and host reads per iteration, fast path against eager, side by side (issue 22).

Host time of an iteration = its wall time (tree building, target forward, verification,
bookkeeping) minus the time inside model forwards: what a GPU cannot hide, since a forward of
a 1.5B target there takes a few milliseconds. Prompts are interleaved (for each prompt every
method runs once per engine, eager then fast), so load drift hits both alike; the ratio is
eager / fast in this one run. Outputs of both engines are checked to be equal.

Host reads are the places where Python reads a tensor's value (`item`, `tolist`, `int()`,
`bool()`, `float()`, indexing with a tensor, `.cpu()` of a device tensor): on a GPU each is a
synchronisation. They are counted in a separate, untimed pass (one generation per method and
engine) with a TorchFunctionMode, model forwards included.

    python bench/host_time.py                                   # tiny llama pair
    python bench/host_time.py --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \
        --dtype float32 --n-prompts 2 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load_prompts, markdown_table  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402

DEFAULT_METHODS = [
    "linear:k=4",
    "dynatree:N_max=64",
    "dyspec:budget=64",
    "salf:N=64",
    "ddtree:B=64",
]
ENGINES = ("eager", "fast")
READS = {"item", "tolist", "__int__", "__bool__", "__float__", "__index__", "numpy"}


class HostReads(TorchFunctionMode):
    """Counts reads of tensor values by Python (each a host synchronisation on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS or (
            name in ("cpu", "to")
            and args
            and getattr(args[0], "device", None) not in (None, "cpu")
            and args[0].device.type != "cpu"
        ):
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def host_seconds(stats) -> float:
    return sum(
        s.draft_s
        + s.target_s
        + s.verify_s
        + s.bookkeeping_s
        - s.draft_forward_s
        - s.target_forward_s
        for s in stats.iterations
    )


def run(args: argparse.Namespace) -> dict:
    pair = load_pair(args.target, args.draft, device=args.device, dtype=args.dtype)
    ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
    methods = {t: resolve_method(*parse_method(t)) for t in args.methods}
    for engine in ENGINES:  # first-call allocations out of the numbers
        generate(pair, ids[0][:16], methods[args.methods[0]], 4, engine=engine)
    acc = {
        (t, e): {"host_s": 0.0, "iterations": 0, "total_s": 0.0} for t in methods for e in ENGINES
    }
    mismatches = Counter()
    for i, x in enumerate(ids):
        for t, m in methods.items():
            out = {}
            for e in ENGINES:
                g = generate(pair, x, m, args.max_new_tokens, engine=e)
                a = acc[t, e]
                a["host_s"] += host_seconds(g.stats)
                a["iterations"] += len(g.stats.iterations)
                a["total_s"] += g.stats.total_s
                out[e] = g.tokens
            mismatches[t] += int(out["eager"] != out["fast"])
        print(f"prompt {i + 1}/{len(ids)} done", file=sys.stderr)
    reads = {}
    for t, m in methods.items():
        for e in ENGINES:
            counter = HostReads()
            with counter:
                g = generate(pair, ids[0], m, args.max_new_tokens, engine=e)
            reads[t, e] = sum(counter.counts.values()) / len(g.stats.iterations)
    rows = []
    for t in methods:
        ms = {e: 1000 * acc[t, e]["host_s"] / acc[t, e]["iterations"] for e in ENGINES}
        rows.append(
            {
                "method": t,
                "host_ms_eager": ms["eager"],
                "host_ms_fast": ms["fast"],
                "eager_over_fast": ms["eager"] / ms["fast"],
                "host_reads_eager": reads[t, "eager"],
                "host_reads_fast": reads[t, "fast"],
                "iterations": acc[t, "fast"]["iterations"],
                "outputs_differing": mismatches[t],
            }
        )
    return {
        "bench": "host_time",
        "target": args.target,
        "draft": args.draft,
        "dtype": str(pair.target.dtype),
        "device": str(pair.target.device),
        "threads": torch.get_num_threads(),
        "n_prompts": len(ids),
        "max_new_tokens": args.max_new_tokens,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--methods", nargs="*", default=DEFAULT_METHODS)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--out", default="bench/results/host_time.json")
    args = ap.parse_args(argv)
    result = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(
        f"{args.target} / {args.draft} {result['dtype']} on {result['device']}, "
        f"{result['n_prompts']} prompts x {args.max_new_tokens} tokens, greedy"
    )
    cols = ["method", "host_ms_eager", "host_ms_fast", "eager_over_fast"]
    cols += ["host_reads_eager", "host_reads_fast", "outputs_differing"]
    print(markdown_table(result["rows"], cols))


if __name__ == "__main__":
    main()
