"""The engine's default attention (tree_kernels/sdpa_gqa.py) against transformers' sdpa, side by side
on one loaded target: forward cost per tree size, then generation, with the attention switched
between runs (`model.set_attn_implementation`), interleaved so load drift hits both alike.

1. Forward cost: the engine's cached forward of N new tokens under a chain mask after
   `--context` cached tokens (as engine/curves.py), per engine path, both attentions
   alternating inside every repeat; median seconds and sdpa / sdpa_gqa.
2. Generation: for each prompt every (method, attention) pair runs once; tokens/s, and whether
   the tokens equal autoregressive decoding under sdpa.

    python bench/sdpa_gqa.py --n-prompts 4 --max-new-tokens 32 --out bench/results/sdpa_gqa.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from bench.common import forward_costs, markdown_table  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from engine.datasets import encode_prompt, load_prompts  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.models import load_pair  # noqa: E402
from tree_kernels.sdpa_gqa import NAME  # noqa: E402

ATTENTIONS = ("sdpa", NAME)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--dataset", default="spec_bench:summarization")
    ap.add_argument("--n-prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--sizes", default="1,2,3,4,8,16,32,64")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--engine", default="fast")
    ap.add_argument("--methods", default="autoregressive,lookup:k=2,lookup_tree:k=4")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    name, _, category = args.dataset.partition(":")
    texts = load_prompts(name, n=args.n_prompts, category=category or None)
    methods = {text: parse_method(text) for text in args.methods.split(",")}
    pair = load_pair(args.target, None)
    model = pair.target.model
    sizes = [int(s) for s in args.sizes.split(",")]
    with torch.inference_mode():
        switch = {a: (lambda a=a: model.set_attn_implementation(a)) for a in ATTENTIONS}
        costs = forward_costs(
            model, sizes, args.prompt_tokens, args.repeats, args.engine, settings=switch
        )
    cost_rows = [
        {
            "n": n,
            "sdpa_ms": costs["sdpa"][n] * 1e3,
            "sdpa_gqa_ms": costs[NAME][n] * 1e3,
            "sdpa_over_sdpa_gqa": costs["sdpa"][n] / costs[NAME][n],
        }
        for n in sizes
    ]
    print(markdown_table(cost_rows, list(cost_rows[0])), flush=True)
    totals: dict[str, dict] = {}
    for i, text in enumerate(texts):
        ids = encode_prompt(pair.target.tokenizer, text, args.prompt_tokens)
        ref = None
        for text_m, (m, params) in methods.items():
            for a in ATTENTIONS if i % 2 else ATTENTIONS[::-1]:
                model.set_attn_implementation(a)
                g = generate(pair, ids, m, args.max_new_tokens, params=params, engine=args.engine)
                if m == "autoregressive" and a == "sdpa":
                    ref = g.tokens
                t = totals.setdefault(f"{text_m} {a}", {"tokens": 0, "s": 0.0, "out": []})
                t["tokens"] += len(g.tokens)
                t["s"] += g.stats.total_s
                t["out"].append(g.tokens)
        for t in totals.values():  # ref of this prompt (AR under sdpa) is known now
            t.setdefault("same", []).append(t["out"][-1] == ref)
        print(f"prompt {i + 1}/{len(texts)}", file=sys.stderr, flush=True)
    model.set_attn_implementation(NAME)
    gen_rows = [
        {
            "run": k,
            "tokens_per_s": t["tokens"] / t["s"],
            "outputs_equal_ar_sdpa": f"{sum(t['same'])}/{len(t['same'])}",
        }
        for k, t in totals.items()
    ]
    print(markdown_table(gen_rows, list(gen_rows[0])))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(
                {
                    "command": "python " + " ".join(sys.argv),
                    "args": vars(args),
                    "threads": torch.get_num_threads(),
                    "forward": cost_rows,
                    "generation": gen_rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
