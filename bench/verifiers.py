"""Block efficiency of every stochastic verifier on the same i.i.d. draft trees.

The delayed-tree paper's Sec. 4 comparison (Tables 2, 9-13) under matched drafting: at each root
we draw one set of K_max i.i.d. draft rollouts of L_max tokens, run the target once over the
merged tree, and for every (K, L) <= (K_max, L_max) take the tree of the first K rollouts cut at
depth L (so all verifiers and all sizes see the same draws). For each verifier we record the
exact conditional block efficiency E[tau + 1 | T] (engine/verify/formulas.py: Eq. 2-3 with the
branching probabilities of Alg. 11-15 for the OT-based methods, exact recursions for naive, tv,
bv and traversal), which removes verification noise as in the paper's offline estimator (Eq. 1).
Roots follow a trajectory sampled from the target at the same temperature, starting from each
prompt. Reported per temperature: the best (K, L) per verifier (as the paper's tables) and the
paired difference between Traversal and the best other verifier on the same trees.

    python -m bench.verifiers --target tiny-llama --draft tiny-llama-draft --prompts 4 --roots 8
    python -m bench.verifiers --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b ...

Writes JSON (--out) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from engine.draft import DraftModel
from engine.drafters.iid import grow_rollouts
from engine.model_names import DEFAULT_PAIR
from engine.models import load_pair
from engine.runtime.eager import CachedModel
from engine.sampling import Warp, sample, warp
from engine.tree import Tree
from engine.verify import VERIFIERS, formulas

BUILTIN_PROMPTS = [
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "The history of the printing press begins",
    "import numpy as np\n\ndef normalize(x):\n",
    "Question: A train travels 60 miles in 1.5 hours. What is its average speed?\nAnswer:",
]


def load_prompts(path: str | None, n: int) -> list[str]:
    """First n prompts of a JSONL file with a "prompt" key (the shared data format), or the
    built-in ones when no file is given or found."""
    if path is None:
        from engine.datasets import data_dir

        data = data_dir()
        path = next(
            (str(data / f) for f in ("humaneval.jsonl", "c4_val.jsonl") if (data / f).is_file()),
            None,
        )
    if path is None or not Path(path).is_file():
        return (BUILTIN_PROMPTS * n)[:n]
    with open(path) as f:
        return [json.loads(line)["prompt"] for line, _ in zip(f, range(n))]


def restrict(
    full: Tree, p: torch.Tensor, paths: list[list[int]], K: int, L: int
) -> tuple[Tree, torch.Tensor]:
    """The tree of the first K rollouts cut at depth L, with recounted multiplicities."""
    count: dict[int, int] = {0: 1}
    for path in paths[:K]:
        for node in path[:L]:
            count[node] = count.get(node, 0) + 1
    nodes = sorted(count)  # original (topological) order
    new = {old: i for i, old in enumerate(nodes)}
    full_parents = full.parents.tolist()
    parents = [-1] + [new[full_parents[n]] for n in nodes[1:]]
    idx = torch.tensor(nodes, device=full.tokens.device)
    q = full.q[idx].clone()
    q[full.depth[idx] >= L] = 0.0  # leaves of the cut tree
    tree = Tree(
        tokens=full.tokens[idx],
        parents=torch.tensor(parents, device=idx.device),
        depth=full.depth[idx],
        q=q,
        sampling="iid",
        multiplicity=torch.tensor([count[n] for n in nodes], device=idx.device),
    )
    return tree, p[idx]


def _se(x: torch.Tensor) -> float:
    return float(x.std() / math.sqrt(x.numel())) if x.numel() > 1 else float("nan")


@torch.inference_mode()
def run(args) -> dict:
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair(args.target, args.draft, device=args.device)
    tok = pair.target.tokenizer
    names = [v for v in VERIFIERS if v != "greedy"]
    prompts = load_prompts(args.prompts_file, args.prompts)
    results: dict = {}
    start = time.perf_counter()
    for temperature in args.temperatures:
        w = Warp(temperature, args.top_p)
        gen = torch.Generator(device=pair.target.device).manual_seed(args.seed)
        sums = torch.zeros(len(names), args.K, args.L, dtype=torch.float64)
        per_root = []  # [roots][verifier][K][L]
        for text in prompts:
            ids = tok.encode(text)[-args.prompt_tokens :]
            target, draft = CachedModel(pair.target.model), DraftModel(pair.draft.model, w)
            committed = list(ids)
            target.extend(committed[:-1])
            for _ in range(args.roots):
                builder = draft.start(committed)
                prefix = len(committed) - 1
                mult = [1]
                paths = grow_rollouts(builder, 0, args.K, args.L, False, gen, mult)
                full = builder.tree("iid", multiplicity=mult)
                logits = target.forward(
                    full.tokens, full.position_ids(prefix)[0], full.visibility(prefix)
                )  # [N, V]
                p = warp(logits, w)
                root = torch.zeros(len(names), args.K, args.L, dtype=torch.float64)
                for K in range(1, args.K + 1):
                    for L in range(1, args.L + 1):
                        tree, pt = restrict(full, p, paths, K, L)
                        for v, name in enumerate(names):
                            root[v, K - 1, L - 1] = formulas.block_efficiency(tree, pt, name)
                per_root.append(root)
                sums += root
                # advance the trajectory by one target sample; keep only the root's cache
                committed.append(int(sample(p[0], gen)))
                target.commit([prefix])
                draft.commit([])
        stack = torch.stack(per_root)  # [R, verifiers, K, L]
        mean = stack.mean(0)
        best = {}
        for v, name in enumerate(names):
            k, l = divmod(int(mean[v].argmax()), args.L)
            best[name] = {
                "K": k + 1,
                "L": l + 1,
                "block_efficiency": float(mean[v, k, l]),
                "se": _se(stack[:, v, k, l]),
            }
        trav = names.index("traversal")
        others = [v for v in range(len(names)) if v != trav]
        rival = max(others, key=lambda v: float(mean[v].max()))
        tk, tl = best["traversal"]["K"] - 1, best["traversal"]["L"] - 1
        rk, rl = best[names[rival]]["K"] - 1, best[names[rival]]["L"] - 1
        diff = stack[:, trav, tk, tl] - stack[:, rival, rk, rl]
        results[str(temperature)] = {
            "best": best,
            "grid": {name: mean[v].tolist() for v, name in enumerate(names)},
            "traversal_minus_best_other": {
                "other": names[rival],
                "mean": float(diff.mean()),
                "se": _se(diff),
            },
            "roots": stack.shape[0],
        }
    return {
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "verifiers": names,
        "results": results,
        "seconds": time.perf_counter() - start,
    }


def table(report: dict) -> str:
    temps = list(report["results"])
    lines = [
        "| verifier | " + " | ".join(f"T={t}: best E[tau+1] (K, L)" for t in temps) + " |",
        "|---|" + "---|" * len(temps),
    ]
    for name in report["verifiers"]:
        cells = []
        for t in temps:
            b = report["results"][t]["best"][name]
            cells.append(f"{b['block_efficiency']:.3f} ± {b['se']:.3f} ({b['K']}, {b['L']})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for t in temps:
        d = report["results"][t]["traversal_minus_best_other"]
        lines.append(
            f"\nT={t}: traversal - {d['other']} (paired, best configs) = "
            f"{d['mean']:+.3f} ± {d['se']:.3f} over {report['results'][t]['roots']} roots"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--device", default=None)
    ap.add_argument("--prompts-file", default=None, help="JSONL with a 'prompt' key")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=64, help="keep the last N tokens")
    ap.add_argument("--roots", type=int, default=8, help="consecutive roots per prompt")
    ap.add_argument("--K", type=int, default=4, help="rollouts: K = 1..this")
    ap.add_argument("--L", type=int, default=8, help="rollout length: L = 1..this")
    ap.add_argument(
        "--temperatures", type=lambda s: [float(x) for x in s.split(",")], default=[0.2, 0.6, 1.0]
    )
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: leave)")
    ap.add_argument("--out", default="bench/results/verifiers.json")
    args = ap.parse_args(argv)
    report = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(table(report))
    print(f"\n{report['seconds']:.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
