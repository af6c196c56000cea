"""Every method at its paper defaults on one model pair, greedy, in one run: tokens per
iteration, acceptance rate, tree size, throughput and speedup versus autoregressive decoding,
and whether each method reproduced the autoregressive tokens exactly.

    python bench/methods.py --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \\
        [--n-prompts 20] [--max-new-tokens 128] [--methods dynatree,salf] [--param m.k=v]
        [--threads 0] [--out methods.json]

Prompts: the first n Spec-Bench prompts (field `prompt`, chat template when the tokenizer has
one). Speedup = (method tokens / method seconds) / (autoregressive tokens / seconds), over all
prompts, generation wall time including prefill. Per method, the first prompt is run once
untimed as warm-up. On this project's 2-core CPU machines a 1.5B fp32 forward costs ~0.3 s per
token, so the real-pair run takes hours; check it first on the tiny pair (the defaults).
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
from engine.config import parse_key_values  # noqa: E402
from engine.decode import generate, method_params, resolve_method  # noqa: E402
from engine.drafters import DRAFTERS  # noqa: E402
from engine.models import load_pair  # noqa: E402


def run_method(pair, prompts, method: str, params: dict, max_new_tokens: int,
               reference: list[list[int]] | None) -> dict:
    m = resolve_method(method, params)
    generate(pair, prompts[0], m, min(16, max_new_tokens))  # warm-up
    tokens = seconds = iterations = drafted = accepted = tree_nodes = 0
    draft_s = target_s = build_s = 0.0
    outputs = []
    for ids in prompts:
        g = generate(pair, ids, m, max_new_tokens)
        outputs.append(g.tokens)
        s = g.stats
        tokens += s.new_tokens
        seconds += s.total_s
        iterations += len(s.iterations)
        drafted += sum(it.tree_size - 1 for it in s.iterations)
        accepted += sum(it.accepted for it in s.iterations)
        tree_nodes += sum(it.tree_size for it in s.iterations)
        draft_s += sum(it.draft_s for it in s.iterations)
        target_s += sum(it.target_s for it in s.iterations)
        build_s += sum(it.draft_s - it.draft_forward_s for it in s.iterations)
    return {
        "method": method, "params": method_params(m), "new_tokens": tokens,
        "seconds": seconds, "throughput": tokens / seconds, "iterations": iterations,
        "tokens_per_iteration": tokens / iterations,
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "mean_accepted_length": accepted / iterations,
        "mean_tree_size": tree_nodes / iterations,
        "draft_share": draft_s / seconds, "target_share": target_s / seconds,
        "build_share": build_s / seconds,
        "matches_ar": None if reference is None else outputs == reference,
        "outputs": outputs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="tiny-llama")
    ap.add_argument("--draft", default="tiny-llama-draft")
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", default="", help="comma-separated (default: every method)")
    ap.add_argument("--param", action="append", default=[], metavar="METHOD.KEY=VALUE",
                    help="override a default, e.g. dynatree.tau=0.01 (repeatable)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides: dict[str, dict[str, str]] = {}
    for key, value in parse_key_values(args.param).items():
        method, _, name = key.partition(".")
        overrides.setdefault(method, {})[name] = value
    methods = [m for m in (args.methods.split(",") if args.methods else DRAFTERS)
               if m != "autoregressive"]
    for m in methods:
        resolve_method(m, overrides.get(m))  # fail on a bad name before loading anything
    pair = load_pair(args.target, args.draft)
    prompts = load_prompts(pair, args.n_prompts)
    rows = []
    start = time.perf_counter()
    for method in ["autoregressive"] + methods:
        reference = rows[0]["outputs"] if rows else None
        row = run_method(pair, prompts, method, overrides.get(method, {}), args.max_new_tokens,
                         reference)
        row["speedup"] = row["throughput"] / rows[0]["throughput"] if rows else 1.0
        rows.append(row)
        print(f"{method:15s} tok/iter {row['tokens_per_iteration']:.2f}  speedup "
              f"{row['speedup']:.2f}  matches_ar {row['matches_ar']}", file=sys.stderr)
    result = {"target": args.target, "draft": args.draft, "n_prompts": len(prompts),
              "max_new_tokens": args.max_new_tokens, "temperature": 0.0,
              "threads": torch.get_num_threads(),
              "seconds": round(time.perf_counter() - start, 1), "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(markdown_table(rows, ["method", "tokens_per_iteration", "acceptance_rate",
                                "mean_tree_size", "throughput", "speedup", "draft_share",
                                "target_share", "build_share", "matches_ar"]))


if __name__ == "__main__":
    main()
