"""Share of wall time spent outside model forwards, per method (goal: <= 10% on the real pair).

For every method the same prompts are decoded greedily; `overhead` is
1 - (time inside draft and target forwards, prefill included) / total wall time, i.e. tree
building, masks, verification, cache compaction and Python bookkeeping. The columns split
that overhead by phase (draft phase minus draft forwards, target phase minus the target
forward, verification, bookkeeping).

    python bench/engine_overhead.py                                 # tiny llama pair
    python bench/engine_overhead.py --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \
        --n-prompts 3 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load_prompts, write_record  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.drafters import DRAFTERS  # noqa: E402
from engine.methods import method_params, resolve_method, standalone  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402


def parse_method(text: str) -> tuple[str, dict[str, str]]:
    """'fixed_tree:depth=4,branch=2' -> ('fixed_tree', {'depth': '4', 'branch': '2'})."""
    name, _, rest = text.partition(":")
    return name, dict(kv.split("=", 1) for kv in rest.split(",") if kv)


def run(args: argparse.Namespace) -> dict:
    pair = load_pair(args.target, args.draft, device=args.device, dtype=args.dtype)
    ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
    methods = args.methods or [m for m in DRAFTERS]
    warm = resolve_method("linear", {"k": 2})
    generate(pair, ids[0][:16], warm, 4)  # first-call allocations out of the numbers
    rows = []
    for text in methods:
        name, params = parse_method(text)
        m = resolve_method(name, standalone(name, params))  # alone: Sequoia's fixed profile
        agg = {
            k: 0.0
            for k in (
                "total_s",
                "forward_s",
                "draft_s",
                "target_s",
                "verify_s",
                "bookkeeping_s",
                "draft_fwd_s",
                "target_fwd_s",
            )
        }
        tokens = iterations = 0
        for prompt_ids in ids:
            g = generate(pair, prompt_ids, m, args.max_new_tokens)
            s = g.stats.summary()
            for k in ("total_s", "forward_s", "draft_s", "target_s", "verify_s", "bookkeeping_s"):
                agg[k] += s[k]
            agg["draft_fwd_s"] += sum(i.draft_forward_s for i in g.stats.iterations)
            agg["target_fwd_s"] += sum(i.target_forward_s for i in g.stats.iterations)
            tokens += s["new_tokens"]
            iterations += s["iterations"]
        total = agg["total_s"]
        rows.append(
            {
                "method": name,
                "params": method_params(m),
                "new_tokens": tokens,
                "tokens_per_iteration": tokens / iterations,
                "throughput": tokens / total,
                "overhead_share": 1 - agg["forward_s"] / total,
                "draft_logic_share": (agg["draft_s"] - agg["draft_fwd_s"]) / total,
                "target_logic_share": (agg["target_s"] - agg["target_fwd_s"]) / total,
                "verify_share": agg["verify_s"] / total,
                "bookkeeping_share": agg["bookkeeping_s"] / total,
                "total_s": total,
            }
        )
        print(f"  {name}: overhead {rows[-1]['overhead_share']:.1%}", file=sys.stderr)
    return {
        "bench": "engine_overhead",
        "target": args.target,
        "draft": args.draft,
        "dataset": args.dataset,
        "n_prompts": len(ids),
        "max_new_tokens": args.max_new_tokens,
        "device": str(pair.target.device),
        "dtype": str(pair.target.dtype),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
    }


def table(result: dict) -> str:
    head = (
        "| method | tokens/iter | tok/s | outside forwards | draft logic | target logic "
        "| verify | bookkeeping |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['tokens_per_iteration']:.2f} | {r['throughput']:.2f} "
            f"| {r['overhead_share']:.1%} | {r['draft_logic_share']:.1%} "
            f"| {r['target_logic_share']:.1%} | {r['verify_share']:.1%} "
            f"| {r['bookkeeping_share']:.1%} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--methods", nargs="*", help="NAME or NAME:key=value,... (default: all)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--out", default="bench/results/engine_overhead.json")
    args = ap.parse_args()
    result = run(args)
    write_record(args.out, result)
    print(
        f"{args.target} / {args.draft}, {result['n_prompts']} {args.dataset} prompts, "
        f"{args.max_new_tokens} new tokens, greedy, {result['device']} {result['dtype']}"
    )
    print(table(result))


if __name__ == "__main__":
    main()
