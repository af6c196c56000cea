"""NDE (delayed-tree paper, Sec. 6.1) against the best fixed action and against Traversal
verification, on held-out prompts: tokens per iteration and tokens/s of each, same prompts and
seeds. The checkpoint (`orch train nde`) names its best fixed action (state["base_action"]) and
its training prompts (config["prompts"]: dataset, offset, n); the evaluation prompts are the
dataset's --prompts after its first --prompt-offset, which must lie outside the training's.

    python bench/nde_eval.py --checkpoint NAME --prompts 3 --max-new-tokens 32 \
        --temperature 1.0 --engine fast --out bench/records/nde_real_pair.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from engine import checkpoint
from engine.datasets import encode_prompt, load_prompts
from engine.decode import generate
from engine.models import load_pair


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--prompt-offset", type=int, default=0, help="skip the dataset's first N")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--verifier", default="specinfer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="eager", help="engine/config.py ENGINES")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    ckpt, state = checkpoint.load(args.checkpoint, "nde")
    trained_on = ckpt.config.get("prompts") or {}
    start, n = trained_on.get("offset", 0), trained_on.get("n", 0)
    if args.prompt_offset < start + n and start < args.prompt_offset + args.prompts:
        raise SystemExit("error: the evaluation prompts overlap the training prompts")
    K, L1, L2 = state["base_action"]
    fixed = {"K": K, "L1": L1, "L2": L2}
    methods = {
        "nde": ("delayed", {"selector": "nde", "selector_checkpoint": args.checkpoint,
                            "verifier": args.verifier}),
        "best_fixed": ("delayed", {**fixed, "verifier": args.verifier}),
        "traversal": ("delayed", {**fixed, "verifier": "traversal"}),
    }  # fmt: skip
    pair = load_pair(ckpt.config["target"], ckpt.config["draft"])
    dataset = trained_on.get("dataset", "humaneval")
    prompts = load_prompts(dataset, args.prompt_offset + args.prompts)[args.prompt_offset :]
    ids = [encode_prompt(pair.target.tokenizer, p, args.prompt_tokens) for p in prompts]
    rows, per_prompt = [], []
    for label, (method, params) in methods.items():
        tokens = iterations = 0
        seconds = 0.0
        for i, prompt in enumerate(ids):
            g = generate(pair, prompt, method, args.max_new_tokens, args.temperature,
                         seed=args.seed + i, params=params, engine=args.engine)  # fmt: skip
            n, it = g.stats.new_tokens, len(g.stats.iterations)
            tokens, iterations, seconds = tokens + n, iterations + it, seconds + g.stats.total_s
            sizes = [s.tree_size for s in g.stats.iterations]
            per_prompt.append({"method": label, "prompt": i, "tokens": n, "iterations": it,
                               "seconds": g.stats.total_s, "tree_sizes": sizes})  # fmt: skip
        rows.append({"method": label, "params": params, "tokens": tokens,
                     "iterations": iterations, "tokens_per_iteration": tokens / iterations,
                     "tokens_per_s": tokens / seconds})  # fmt: skip
        print(f"{label:10s} {tokens / iterations:6.3f} tok/iter  {tokens / seconds:6.3f} tok/s",
              flush=True)  # fmt: skip
    record = {
        "bench": "nde_eval",
        "checkpoint": checkpoint.describe(args.checkpoint),
        "dataset": dataset,
        "eval_prompts": args.prompts,
        "eval_prompt_offset": args.prompt_offset,
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "engine": args.engine,
        "threads": torch.get_num_threads(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
        "per_prompt": per_prompt,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
