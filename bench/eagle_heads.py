"""EAGLE heads under the SALF & TALF paper's tree constructions (its Table 2 layout): for
each head (`eagle:NAME`, e.g. trained with `orch train eagle --loss eagle|hass|talf`) and each
tree construction (EAGLE-2 beam N=60 k=10 depth 7, SpecExec's optimal tree = SALF th=0, SALF
N=60 B=10 th=0.6; Sec. 4, Tables 1-3), greedy, on the same prompts: tokens per iteration (tau)
with a 95% bootstrap interval over prompts, mean accepted length, and whether every output
equals autoregressive decoding. The target is loaded once; each head is a small module.

    python bench/eagle_heads.py --target qwen2.5-coder-1.5b \\
        --heads eagle:qwen-eagle,eagle:qwen-hass,eagle:qwen-talf \\
        --dataset humaneval --n-prompts 10 --max-new-tokens 32 \\
        --out bench/records/eagle_heads_real_pair.json

Writes --out (JSON) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, load_prompts, markdown_table, write_record  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.models import Pair, load_model  # noqa: E402

# the paper's three constructions (Sec. 4: N = 60 nodes; beam top-k 10, depth 7; SALF B = 10)
TREES = {
    "beam": ("beam", {"N": 60, "top_k": 10, "depth": 7}),
    "optimal": ("salf", {"N": 60, "B": 10, "th": 0.0}),
    "salf": ("salf", {"N": 60, "B": 10, "th": 0.6}),
}


def bootstrap(per_prompt: list[tuple[int, int]], b: int = 2000, seed: int = 0) -> tuple:
    """95% percentile interval of pooled tokens / iterations over prompts resampled."""
    rng = random.Random(seed)
    stats = []
    for _ in range(b):
        draw = [rng.choice(per_prompt) for _ in per_prompt]
        stats.append(sum(t for t, _ in draw) / sum(i for _, i in draw))
    stats.sort()
    return stats[int(0.025 * b)], stats[int(0.975 * b) - 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--heads", required=True, help="comma-separated eagle:NAME / eagle:PATH")
    ap.add_argument("--trees", default=",".join(TREES), help=f"of {', '.join(TREES)}")
    ap.add_argument("--dataset", default="humaneval")
    ap.add_argument("--n-prompts", type=int, default=10)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--out", default="bench/results/eagle_heads.json")
    args = ap.parse_args(argv)
    heads = [h for h in args.heads.split(",") if h]
    trees = [t for t in args.trees.split(",") if t]
    bad = [t for t in trees if t not in TREES]
    if bad:
        sys.exit(f"error: unknown tree construction {bad[0]!r} (known: {', '.join(TREES)})")
    target = load_model(args.target)
    drafts = {h: load_model(h) for h in heads}
    ids = load_prompts(Pair(target, None), args.n_prompts, args.prompt_tokens, args.dataset)
    reference = [
        generate(Pair(target, None), x, "autoregressive", args.max_new_tokens) for x in ids
    ]
    rows = []
    for h in heads:
        pair = Pair(target, drafts[h])
        for t in trees:
            method, params = TREES[t]
            per, differ, accepted = [], 0, []
            for x, ref in zip(ids, reference):
                g = generate(pair, x, method, args.max_new_tokens, params=params)
                its = g.stats.iterations
                per.append((g.stats.new_tokens, len(its)))
                accepted += [it.accepted for it in its]
                differ += g.tokens != ref.tokens
            lo, hi = bootstrap(per)
            rows.append(
                {
                    "head": h,
                    "tree": t,
                    "tau": sum(n for n, _ in per) / sum(i for _, i in per),
                    "tau_lo": lo,
                    "tau_hi": hi,
                    "mean_accepted": sum(accepted) / len(accepted),
                    "outputs_differ": differ,
                }
            )
            print(f"{h} {t} done", file=sys.stderr, flush=True)
    record = {
        "bench": "eagle_heads",
        "command": command_line("bench/eagle_heads.py", argv),
        "target": args.target,
        "heads": {h: drafts[h].checkpoint for h in heads},
        "dataset": args.dataset,
        "n_prompts": len(ids),
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "trees": {t: TREES[t] for t in trees},
        "rows": rows,
    }
    write_record(args.out, record)
    print(markdown_table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
