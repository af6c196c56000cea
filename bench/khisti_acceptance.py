"""Root acceptance rate alpha (delayed-tree paper Def. 5.1) of Khisti's two selection steps
against SpecInfer and SpecTr on random (p, q, k): the paper's truncated LP (`khisti`) and our
tournament (`khisti_tournament`), each as Algorithm 10's lower bound sum min(p, r) and as the
exact alpha estimated over `--draws` sampled draw tuples (E over X_1..X_k ~ q of
P(output in {X_i}), from the exact selection law given the draws); SpecInfer and SpecTr exact
(Algorithms 9 and 8).

Cases: V in {6, 50, 1000} x k in {2, 3, 4, 6} x 2 seeds (24). p is a softmax of Gaussian
logits at temperature 1/sharp; q = norm(mix p + (1 - mix) noise) with its own logits, as the
verifier tests build worlds (tests/engine/verify/verifier_mc.py).

    python -m bench.khisti_acceptance [--draws 400] [--out khisti_acceptance.json]
"""

from __future__ import annotations

import argparse
import json

import torch

from engine.verify import formulas, khisti, khisti_tournament
from engine.verify.common import positive_part

SELECTIONS = {"khisti": khisti, "khisti_tournament": khisti_tournament}


def make_case(V: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sharp = 1.0 + 2.0 * float(torch.rand((), generator=g))
    mix = 0.3 + 0.6 * float(torch.rand((), generator=g))
    p = torch.softmax(sharp * torch.randn(V, generator=g, dtype=torch.float64), -1)
    noise = torch.softmax(sharp * torch.randn(V, generator=g, dtype=torch.float64), -1)
    q = mix * p + (1 - mix) * noise
    return p, q / q.sum()


def exact_alpha(module, p, q, k: int, draws: int, gen: torch.Generator) -> float:
    """Mean over sampled draw tuples of P(the solver outputs one of the draws | the draws)."""
    sel = module.importance_sample(p, q, k)
    accept = (p / sel.r).clamp(max=1.0).nan_to_num(1.0)  # [V] min(1, p/r)
    res = positive_part(p - sel.r)
    res = res / res.sum() if float(res.sum()) > 0 else res
    total = 0.0
    tuples = torch.multinomial(q, draws * k, replacement=True, generator=gen).view(draws, k)
    for row in tuples.tolist():
        counts: dict[int, int] = {}
        for t in row:
            counts[t] = counts.get(t, 0) + 1
        on_draws = float(res[list(counts)].sum())
        for x, pi in module.selection_probs(sel, counts).items():
            a = float(accept[x])
            total += pi * (a + (1 - a) * on_draws)
    return total / draws


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=400, help="draw tuples per exact-alpha estimate")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for V in (6, 50, 1000):
        for k in (2, 3, 4, 6):
            for seed in (0, 1):
                p, q = make_case(V, 1000 * V + 10 * k + seed)
                row = {"V": V, "k": k, "seed": seed}
                for name, module in SELECTIONS.items():
                    row[f"{name}_alg10"] = formulas.acceptance(name, p, q, k)
                    row[f"{name}_exact"] = exact_alpha(module, p, q, k, args.draws, gen)
                row["specinfer"] = formulas.acceptance("specinfer", p, q, k)
                row["spectr"] = formulas.acceptance("spectr", p, q, k)
                rows.append(row)
    cols = [c for c in rows[0] if c not in ("V", "k", "seed")]
    print("| V | k | seed | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    for r in rows:
        vals = " | ".join(f"{r[c]:.4f}" for c in cols)
        print(f"| {r['V']} | {r['k']} | {r['seed']} | {vals} |")
    n = len(rows)
    wins = {
        "khisti_alg10 < khisti_tournament_alg10": sum(
            r["khisti_alg10"] < r["khisti_tournament_alg10"] - 1e-12 for r in rows
        ),
        "khisti_exact < specinfer": sum(r["khisti_exact"] < r["specinfer"] for r in rows),
        "khisti_exact < spectr": sum(r["khisti_exact"] < r["spectr"] for r in rows),
        "khisti_tournament_exact > max(specinfer, spectr)": sum(
            r["khisti_tournament_exact"] > max(r["specinfer"], r["spectr"]) for r in rows
        ),
    }
    means = {c: sum(r[c] for r in rows) / n for c in cols}
    print("\nmeans: " + ", ".join(f"{c} {v:.4f}" for c, v in means.items()))
    print("counts over %d cases: " % n + ", ".join(f"{k}: {v}" for k, v in wins.items()))
    report = {"draws": args.draws, "rows": rows, "means": means, "counts": wins}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
