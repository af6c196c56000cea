"""The knob of the aligned synthetic pairs (engine/synthetic.py) against the acceptance it gives:
for each `align`, the target `TARGET@align=A` and the draft `DRAFT` decode --n-prompts prompts
and the table reports, per alignment,

- agreement: the share of positions of the target's greedy output where the draft's argmax
  (teacher-forced on the same context) is the target's token;
- agreement on random contexts: the same share over --random-tokens uniformly drawn tokens
  (one forward of each model; no walk, so no token counts twice);
- linear k=4, greedy: tokens per iteration and the share of drafted tokens the verifier
  reached that it accepted;
- linear k=4 at temperature 1 (SpecInfer's verifier on the chain): tokens per iteration.

    python bench/synthetic_alignment.py --aligns 0.5,0.6,0.7,0.75,0.8,0.9,0.95,1 \\
        --out bench/records/synthetic_alignment.json

Writes --out (JSON) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, markdown_table, write_record  # noqa: E402
from bench.cost_model import at_align  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.models import load_pair  # noqa: E402


def agreement(pair, prompt: list[int], tokens: list[int]) -> tuple[int, int]:
    """(positions where the draft's argmax is the target's next token, positions)."""
    x = torch.tensor([prompt + tokens[:-1]], device=pair.draft.device)
    with torch.inference_mode():
        logits = pair.draft.model(x).logits[0, len(prompt) - 1 :]  # [len(tokens), V]
    hits = (logits.argmax(-1).cpu() == torch.tensor(tokens)).sum()
    return int(hits), len(tokens)


def random_agreement(pair, n: int) -> float:
    """Share of n uniform random positions where the draft's argmax is the target's."""
    x = torch.randint(
        pair.target.model.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(1)
    )
    with torch.inference_mode():
        t = pair.target.model(x.to(pair.target.device)).logits[0].argmax(-1).cpu()
        d = pair.draft.model(x.to(pair.draft.device)).logits[0].argmax(-1).cpu()
    return float((t == d).float().mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="synthetic:toy-target")
    ap.add_argument("--draft", default="synthetic:toy-draft")
    ap.add_argument("--aligns", default="0.5,0.6,0.7,0.75,0.8,0.9,0.95,1")
    ap.add_argument("--n-prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--random-tokens", type=int, default=2048)
    ap.add_argument("--out", default="bench/results/synthetic_alignment.json")
    args = ap.parse_args(argv)
    aligns = [float(a) for a in args.aligns.split(",")]
    targets = [at_align(args.target, a) for a in aligns]
    rows = []
    for a, target in zip(aligns, targets):
        pair = load_pair(target, args.draft)
        gen = torch.Generator().manual_seed(0)
        prompts = [
            torch.randint(256, (args.prompt_tokens,), generator=gen).tolist()
            for _ in range(args.n_prompts)
        ]
        hits = n = 0
        greedy, sampled = [], []
        for i, x in enumerate(prompts):
            ar = generate(pair, x, "autoregressive", args.max_new_tokens).tokens
            h, m = agreement(pair, x, ar)
            hits, n = hits + h, n + m
            greedy.append(generate(pair, x, "linear", args.max_new_tokens, params={"k": 4}).stats)
            t1 = generate(
                pair, x, "linear", args.max_new_tokens, temperature=1.0, seed=i, params={"k": 4}
            )
            sampled.append(t1.stats)

        def per_iteration(stats) -> float:
            return sum(g.new_tokens for g in stats) / sum(len(g.iterations) for g in stats)

        its = [it for g in greedy for it in g.iterations]
        rows.append(
            {
                "align": a,
                "agreement": hits / n,
                "agreement_random_contexts": random_agreement(pair, args.random_tokens),
                "linear_k4_tokens_per_iteration": per_iteration(greedy),
                "linear_k4_acceptance": sum(i.accepted for i in its) / sum(i.tried for i in its),
                "linear_k4_T1_tokens_per_iteration": per_iteration(sampled),
            }
        )
        print(f"align {a} done", file=sys.stderr, flush=True)
    record = {
        "bench": "synthetic_alignment",
        "command": command_line("bench/synthetic_alignment.py", argv),
        "target": args.target,
        "draft": args.draft,
        "n_prompts": args.n_prompts,
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "rows": rows,
    }
    write_record(args.out, record)
    print(markdown_table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
