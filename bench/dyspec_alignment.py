"""DySpec's value estimate against a sampling target on a well-aligned pair (issue 17).

DySpec (dyspec.txt, Hypothesis 1, App. D) values a drafted child x of node u at P(u) * q_u(x):
the draft probability stands in for the chance that verification accepts x. That holds for a
greedy target (x is accepted iff it is the target's argmax, which an aligned draft puts about
q_u(x) of its mass on). For a sampling target the chance that a sampled x is accepted is
min(1, p(x) / q(x)), close to 1 whatever q(x) is when p ~ q: on an aligned pair the deep
single paths that SpecInfer and Sequoia draft are then accepted, while DySpec spends its budget
on siblings. This bench measures it side by side: tokens per iteration of DySpec (fixed size,
Algorithm 1), Sequoia and SpecInfer at the same budget, the draft sampling at 0.6 (DySpec Sec.
5.1), for a greedy and for a sampling target; and how close the pair is, the mean total
variation distance between the target's and the draft's next-token distributions at the
sampling temperature over the prompts' positions.

    python -m bench.dyspec_alignment                      # tiny llama pair, a few seconds
    python -m bench.dyspec_alignment --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \
        --prompts 2 --new-tokens 32 --seeds 1 -o bench/records/dyspec_alignment_real.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from bench.common import markdown_table, write_record
from engine.decode import generate
from engine.drafters.sequoia.profile import measure_profile
from engine.models import load_pair
from engine.sampling import Warp, warp

PROMPTS = [
    "def fibonacci(n):",
    "The history of the printing press",
    "import numpy as np\n\n",
    "Once upon a time, in a small village,",
    "SELECT name, age FROM users WHERE",
    "for (int i = 0; i < n; i++) {",
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="tiny-llama")
    ap.add_argument("--draft", default="tiny-llama-draft")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.6, help="the sampling target's")
    ap.add_argument("--draft-temperature", type=float, default=0.6)
    ap.add_argument("-o", "--out", default=None)
    return ap.parse_args(argv)


@torch.inference_mode()
def mean_tv(pair, prompts: list[list[int]], temperature: float) -> float:
    """Mean over the prompts' positions of TV(p, q) = 0.5 * sum |p - q| at `temperature`."""
    w, tvs = Warp(temperature), []
    for ids in prompts:
        x = torch.tensor([ids], device=pair.target.device)
        p = warp(pair.target.model(x).logits[0].float(), w)  # [T, V]
        q = warp(pair.draft.model(x).logits[0].float(), w)  # [T, V]
        n = min(p.shape[-1], q.shape[-1])  # padding rows of the larger vocabulary
        tvs += (0.5 * (p[:, :n] - q[:, :n]).abs().sum(-1)).tolist()
    return statistics.mean(tvs)


def measured(pair, prompts: list[list[int]], args, temperature: float) -> list[float]:
    """Sequoia's acceptance profile of the pair at this sampling, on the bench's prompts."""
    return list(
        measure_profile(
            pair,
            prompts,
            new_tokens=args.new_tokens,
            width=8,
            temperature=temperature,
            samples=8,
            draft_temperature=args.draft_temperature,
        )
    )


def run(args) -> dict:
    pair = load_pair(args.target, args.draft, "cpu", "float32")
    prompts = [pair.target.tokenizer.encode(p) for p in PROMPTS[: args.prompts]]
    k = max(1, args.budget // 8)  # SpecInfer: k chains of 8 (the DySpec sweep's pairing)
    methods = [
        ("dyspec", {"budget": args.budget}),
        ("sequoia", {"budget": args.budget}),
        ("specinfer", {"expansion": [k, 1, 1, 1, 1, 1, 1, 1]}),
    ]
    rows = []
    for target_t in (0.0, args.temperature):
        for name, params in methods:
            if name == "sequoia":  # the pair's own acceptance profile (Sequoia Sec. 3.1)
                params = {**params, "profile": measured(pair, prompts, args, target_t)}
            its = []
            for seed in range(args.seeds):
                for ids in prompts:
                    g = generate(
                        pair, ids, name, args.new_tokens, temperature=target_t, seed=seed,
                        params=params, draft_temperature=args.draft_temperature,
                    )  # fmt: skip
                    its += g.stats.iterations
            rows.append(
                {
                    "target_temperature": target_t,
                    "method": name,
                    "params": json.dumps(params),
                    "tokens_per_iteration": round(sum(i.accepted + 1 for i in its) / len(its), 3),
                    "mean_tree_size": round(statistics.mean(i.tree_size for i in its), 1),
                    "iterations": len(its),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {
        "bench": "dyspec_alignment",
        "args": vars(args),
        "mean_tv_at_temperature": round(mean_tv(pair, prompts, args.temperature), 4),
        "rows": rows,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.out:
        write_record(args.out, report)
    cols = ["target_temperature", "method", "params", "tokens_per_iteration", "mean_tree_size"]
    print(markdown_table([{c: r[c] for c in cols} for r in report["rows"]], cols))
    print(
        f"\nmean TV(target, draft) at T={args.temperature}: {report['mean_tv_at_temperature']}"
        f" (draft at T={args.draft_temperature}, budget {args.budget})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
