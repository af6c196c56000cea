"""Tree-construction overhead of every tree builder, as a share of iteration time.

Tree building = the drafter's time minus the time inside draft-model forwards
(IterationStats.draft_s - draft_forward_s): the builders' own logic plus the TreeBuilder
bookkeeping (masks, slot maps, freezing the Tree). Iteration time = draft + target + verify +
bookkeeping. Each method runs at two node budgets (about 64 and 256 nodes) on a few prompts,
greedy; the tiny drafts are nearly uniform, so thresholds are lowered to fill the budgets.

    python bench/tree_build.py [--target tiny-llama --draft tiny-llama-draft]
        [--n-prompts 3] [--max-new-tokens 64] [--methods dynatree,salf] [--sizes 64,256]
        [--threads 1] [--out results.json]

With --target/--draft pointing at the real pair (folders or names), the same table is measured
on it (a few prompts; the 1.5B target forward of a 256-node tree takes seconds on CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from bench.common import load_prompts, markdown_table  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402

LOW = {"tau": 0.0, "rho_stop": 1e-9, "rho_deep": 1e-8}  # DynaTree gates off: fill N_max


def configs(size: int) -> dict[str, dict]:
    """Parameters giving trees of about `size` drafted nodes (64 or 256)."""
    return {
        "fixed_tree": {"depth": 6, "branch": 4, "budget": size},
        "dynatree": {**LOW, "N_max": size, "D0": 6},
        "dyspec": {"budget": size},
        "dyspec_threshold": {"variant": "threshold", "threshold": 1e-9, "budget": size},
        "salf": {"N": size, "B": 10, "th": 0.0},
        "beam": {"N": size, "top_k": 10, "depth": 7},
        "ddtree": {"B": size, "L": 16},
        "specinfer": {"k": 4, "depth": 3} if size <= 64 else {"k": 2, "depth": 7},
        "sequoia": {"budget": size, "profile": "fixed"},  # build time only
    }


def measure(pair, prompts, method: str, params: dict, max_new_tokens: int) -> dict:
    name = "dyspec" if method == "dyspec_threshold" else method
    iters = []
    for ids in prompts:
        g = generate(pair, ids, name, max_new_tokens, params=params)
        iters += list(g.stats.iterations)
    total = sum(s.draft_s + s.target_s + s.verify_s + s.bookkeeping_s for s in iters)
    build = sum(s.draft_s - s.draft_forward_s for s in iters)
    return {
        "method": method,
        "params": params,
        "iterations": len(iters),
        "mean_tree_size": sum(s.tree_size for s in iters) / len(iters),
        "build_ms_per_iter": 1e3 * build / len(iters),
        "iteration_ms": 1e3 * total / len(iters),
        "draft_forward_share": sum(s.draft_forward_s for s in iters) / total,
        "target_share": sum(s.target_s for s in iters) / total,
        "build_share": build / total,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--n-prompts", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--methods", default="", help="comma-separated (default: all)")
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair(args.target, args.draft)
    prompts = load_prompts(pair, args.n_prompts)
    generate(pair, prompts[0], "fixed_tree", 8)  # warm-up
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        table = configs(size)
        methods = args.methods.split(",") if args.methods else list(table)
        for method in methods:
            start = time.perf_counter()
            row = measure(pair, prompts, method, table[method], args.max_new_tokens)
            row.update(size=size, seconds=round(time.perf_counter() - start, 1))
            rows.append(row)
            print(
                f"{method:17s} size {size:4d}: tree {row['mean_tree_size']:6.1f}  build "
                f"{row['build_ms_per_iter']:7.2f} ms/iter  {100 * row['build_share']:5.2f}%",
                file=sys.stderr,
            )
    result = {
        "target": args.target,
        "draft": args.draft,
        "n_prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "threads": torch.get_num_threads(),
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(
        markdown_table(
            rows,
            [
                "method",
                "size",
                "mean_tree_size",
                "iteration_ms",
                "build_ms_per_iter",
                "build_share",
                "draft_forward_share",
                "target_share",
            ],
        )
    )


if __name__ == "__main__":
    main()
