"""Tune prompt lookup for a device, offline: replay lookup configs against greedy outputs.

Greedy speculative decoding emits exactly the target's greedy tokens, so for a model-free
drafter (prompt lookup: its proposal is a function of the committed tokens alone) every
iteration can be replayed without the target: at committed length t the drafter proposes a
chain or trie from context = prompt + out[:t]; the accepted length is the longest proposed
path that agrees with out[t:]; the iteration commits accepted + 1 tokens and verified
1 + (nodes drafted) tokens in one target forward. With the device's forward-cost curve c(N)
(seconds for one forward of N new tokens, measured here, interleaved over N, median of
`--repeats`), a config's predicted speedup on these prompts is

    speedup = sum_t c(1) over the autoregressive steps / sum_i c(N_i) over its iterations

(prefill and host time left out: both are the same for every config). On this project's CPU
c(N) is flat up to N = 3 and doubles at N = 4 (fp32 GEMM kernel switch), so the best k is far
smaller than HF's 10; bench/methods.py then measures the chosen configs end to end.

Tune on prompts the evaluation does not use (`--skip`: the evaluation takes the first n).

    python bench/lookup_tune.py --dataset spec_bench,humaneval --skip 20 --n-prompts 20 \\
        --max-new-tokens 48 --out bench/results/lookup_tune.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from bench.common import forward_costs, markdown_table  # noqa: E402
from engine.datasets import encode_prompt, load_prompts  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.drafters.prompt_lookup import (  # noqa: E402
    LookupConfig,
    candidates,
    linear_proposal,
    trie_paths,
)


def accepted_on_paths(paths: list[tuple[int, ...]], truth: list[int]) -> int:
    """Longest prefix of `truth` that is a prefix of one of the proposed paths."""
    best = 0
    for p in paths:
        n = 0
        while n < len(p) and n < len(truth) and p[n] == truth[n]:
            n += 1
        best = max(best, n)
    return best


def trie_size(paths: list[tuple[int, ...]]) -> int:
    return len({p[:d] for p in paths for d in range(1, len(p) + 1)})


def replay(prompt: list[int], out: list[int], propose) -> list[tuple[int, int]]:
    """(forward size N, tokens committed) per iteration of greedy decoding with `propose`."""
    its, t = [], 0
    while t < len(out):
        paths = propose(prompt + out[:t], len(out) - t)
        acc = accepted_on_paths(paths, out[t:])
        its.append((1 + trie_size(paths), min(acc + 1, len(out) - t)))
        t += acc + 1
    return its


def linear(cfg: LookupConfig):
    def propose(context, remaining):
        chain = linear_proposal(context, cfg, min(cfg.k, remaining))
        return [chain] if chain else []

    return propose


def tree(max_ngram: int, min_ngram: int, k: int, branches: int, budget: int):
    def propose(context, remaining):
        cands = candidates(context, max_ngram, min_ngram, min(k, remaining))
        return trie_paths(cands, branches, budget)

    return propose


CONFIGS = {
    **{
        f"lookup k={k} ngram={lo}..{hi}": linear(LookupConfig(max_ngram=hi, min_ngram=lo, k=k))
        for k, (lo, hi) in itertools.product((1, 2, 3, 4, 6, 10), ((1, 3), (2, 3), (3, 4)))
    },
    **{
        f"lookup_tree k={k} branches={b} budget={n}": tree(3, 1, k, b, n)
        for k, b, n in ((2, 2, 2), (2, 2, 3), (3, 2, 3), (4, 4, 16), (10, 4, 16))
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--dataset", default="spec_bench,humaneval")
    ap.add_argument("--skip", type=int, default=20, help="leave out each dataset's first n")
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--sizes", default="1,2,3,4,5,6,8,11,17")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--engine", default="fast")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    from engine.models import load_pair

    pair = load_pair(args.target, None)
    picked = []
    for item in args.dataset.split(","):
        name, _, category = item.partition(":")
        rows = load_prompts(name, category=category or None)
        picked += rows[args.skip : args.skip + args.n_prompts]
    sizes = [int(s) for s in args.sizes.split(",")]
    with torch.inference_mode():
        costs = forward_costs(
            pair.target.model, sizes, args.prompt_tokens, args.repeats, args.engine
        )[""]
    print(
        "forward cost c(N)/c(1): " + ", ".join(f"{n}: {c / costs[1]:.2f}" for n, c in costs.items())
    )

    def cost(n: int) -> float:  # linear between measured sizes, flat past the last
        if n in costs:
            return costs[n]
        lo = max((s for s in sizes if s < n), default=sizes[0])
        hi = min((s for s in sizes if s > n), default=None)
        if hi is None:
            return costs[lo] * n / lo
        return costs[lo] + (costs[hi] - costs[lo]) * (n - lo) / (hi - lo)

    outputs = []
    for i, p in enumerate(picked):
        ids = encode_prompt(pair.target.tokenizer, p, args.prompt_tokens)
        g = generate(pair, ids, "autoregressive", args.max_new_tokens, engine=args.engine)
        outputs.append((p, ids, list(g.tokens)))
        print(f"prompt {i + 1}/{len(picked)} ({p.dataset}/{p.category})", file=sys.stderr)
    rows = []
    for label, propose in CONFIGS.items():
        groups: dict[str, list] = {}
        for p, ids, out in outputs:
            its = replay(ids, out, propose)
            groups.setdefault("all", []).append((out, its))
            groups.setdefault(f"{p.dataset}/{p.category}", []).append((out, its))
        for group, runs in groups.items():
            tokens = sum(len(o) for o, _ in runs)
            its = [x for _, r in runs for x in r]
            rows.append(
                {
                    "config": label,
                    "group": group,
                    "prompts": len(runs),
                    "tokens_per_iteration": tokens / len(its),
                    "mean_forward_size": sum(n for n, _ in its) / len(its),
                    "predicted_speedup": tokens * cost(1) / sum(cost(n) for n, _ in its),
                }
            )
    rows.sort(key=lambda r: (r["group"] != "all", r["group"], -r["predicted_speedup"]))
    print(markdown_table([r for r in rows if r["group"] == "all"], list(rows[0])))
    best = {}  # the best config of each group
    for r in rows:
        if r["group"] != "all" and r["group"] not in best:
            best[r["group"]] = r
    print(markdown_table(list(best.values()), list(rows[0])))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "costs": costs, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
