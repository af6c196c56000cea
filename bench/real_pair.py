"""Real pair, side by side: our autoregressive decoding, every method, and Hugging Face
plain greedy and assisted generation (`generate(assistant_model=...)`), on the same prompts.

Prompts are interleaved: for each prompt every contender runs once, in a fixed order, so
machine-load drift hits all of them alike. Speedups are ratios of total tokens / total time
measured in this one run. Greedy; every contender's tokens are checked against our
autoregressive output (HF stops at EOS like we do).

    python bench/real_pair.py --n-prompts 5 --max-new-tokens 64
    python bench/real_pair.py --methods linear:k=4 linear:k=4@fast    # NAME[:k=v,...][@ENGINE]
    python bench/real_pair.py --hf --methods autoregressive@fast autoregressive@fast+lean
    python bench/real_pair.py --dataset humaneval --n-prompts 20 --methods \
        --heads eagle:qwen-eagle --head-methods beam:N=16,top_k=4,depth=5 linear:k=4

`--heads` adds EAGLE heads (docs/eagle.md) as drafts beside the pair's: each head x each
`--head-methods` method is one more contender (`eagle:NAME/METHOD`), drafting for the same
loaded target. Per contender the record also splits an iteration's time: the draft's
forwards (for a head: its layer and its LM head), the rest of drafting, the target's forward
and the rest of the iteration (verification, bookkeeping), in ms per iteration.

An engine ENGINE+lean runs the contender on our own forward (engine/runtime/lean.py) of the same
loaded models (its weights are the Hugging Face modules' own), beside those without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, load_prompts, write_record  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from bench.hf_contenders import hf_generate  # noqa: E402
from engine.config import ConfigError  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.fetch import REAL_PAIR  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.models import Pair, check_engine, load_model, load_pair  # noqa: E402

DEFAULT_METHODS = [
    "linear:k=4",
    "fixed_tree:depth=4,branch=2,budget=16",
    "dynatree",
    "salf",
    "ddtree",
]


def vs_hf(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def iteration_split(a: dict) -> dict[str, float] | None:
    """An iteration's time in ms: the draft's forwards, the rest of drafting, the target's
    forward, the rest (verification, bookkeeping, prefill shared out)."""
    n = a["iterations"]
    if not n:
        return None
    rest = a["total_s"] - a["draft_s"] - a["target_forward_s"]
    parts = {
        "draft_forwards": a["draft_forward_s"],
        "draft_other": a["draft_s"] - a["draft_forward_s"],
        "target_forward": a["target_forward_s"],
        "other": rest,
    }
    return {k: 1000 * v / n for k, v in parts.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=REAL_PAIR[0])
    ap.add_argument("--draft", default=REAL_PAIR[1])
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--methods", nargs="*", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument(
        "--hf",
        nargs="*",
        default=["greedy", "assisted"],
        choices=["greedy", "assisted"],
        help="Hugging Face contenders (assisted is the reference of the last column)",
    )
    ap.add_argument("--heads", default="", help="comma-separated eagle:NAME / eagle:PATH")
    ap.add_argument("--head-methods", nargs="*", default=["beam:N=16,top_k=4,depth=5"])
    ap.add_argument("--out", default="bench/results/real_pair.json")
    args = ap.parse_args(argv)
    heads = [h for h in args.heads.split(",") if h]

    wanted = args.methods if args.methods is not None else DEFAULT_METHODS
    engines = {t: t.partition("@")[2] or "eager" for t in wanted}  # engine/config.py ENGINE_SPECS
    methods = {t: resolve_method(*parse_method(t.partition("@")[0])) for t in wanted}
    head_methods = {t: resolve_method(*parse_method(t)) for t in args.head_methods if heads}
    try:
        for e in engines.values():
            check_engine(e, args.target, args.draft)
    except ConfigError as e:
        sys.exit(f"error: {e}")
    pair = load_pair(args.target, args.draft, dtype=args.dtype)
    head_pairs = {h: Pair(pair.target, load_model(h, dtype=args.dtype)) for h in heads}
    contenders = [(t, pair, m, engines[t]) for t, m in methods.items()]
    contenders += [
        (f"{h}/{t}", head_pairs[h], m, "eager") for h in heads for t, m in head_methods.items()
    ]
    ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
    generate(pair, ids[0][:8], "autoregressive", 2)  # warm-up
    hf = [("hf:" + k, k == "assisted") for k in ("greedy", "assisted") if k in args.hf]
    names = ["ours:autoregressive", *(c[0] for c in contenders), *(k for k, _ in hf)]
    split = ("draft_forward_s", "draft_s", "target_forward_s", "total_s")
    tot = {
        k: {
            "tokens": 0,
            "time": 0.0,
            "iterations": 0,
            "accepted": 0,
            "drafted": 0,
            "mismatches": 0,
            **dict.fromkeys(split, 0.0),
        }
        for k in names
    }
    for i, x in enumerate(ids):
        ref = generate(pair, x, "autoregressive", args.max_new_tokens)
        runs = {"ours:autoregressive": (ref.tokens, ref.stats)}
        for t, p, m, e in contenders:
            g = generate(p, x, m, args.max_new_tokens, engine=e)
            runs[t] = (g.tokens, g.stats)
        for k, assisted in hf:
            toks, secs = hf_generate(pair, x, args.max_new_tokens, assisted)
            runs[k] = (toks, secs)
        for k, (toks, st) in runs.items():
            a = tot[k]
            a["tokens"] += len(toks)
            a["mismatches"] += int(toks != ref.tokens)
            if isinstance(st, float):
                a["time"] += st
            else:
                a["time"] += st.total_s
                a["iterations"] += len(st.iterations)
                a["accepted"] += sum(s.accepted for s in st.iterations)
                a["drafted"] += sum(s.tree_size - 1 for s in st.iterations)
                for f in split[:-1]:
                    a[f] += sum(getattr(s, f) for s in st.iterations)
                a["total_s"] += st.total_s
        print(f"prompt {i + 1}/{len(ids)} done", file=sys.stderr)
    base = tot["ours:autoregressive"]["tokens"] / tot["ours:autoregressive"]["time"]
    a = tot.get("hf:assisted")
    hf_assist = a["tokens"] / a["time"] if a else None
    rows = []
    for k, a in tot.items():
        tps = a["tokens"] / a["time"]
        rows.append(
            {
                "contender": k,
                "tokens_per_s": tps,
                "speedup_vs_ours_ar": tps / base,
                "speedup_vs_hf_assisted": tps / hf_assist if hf_assist else None,
                "tokens_per_iteration": a["tokens"] / a["iterations"] if a["iterations"] else None,
                "acceptance": a["accepted"] / a["drafted"] if a["drafted"] else None,
                "outputs_differing_from_ours_ar": a["mismatches"],
                "ms_per_iteration": iteration_split(a),
            }
        )
    result = {
        "bench": "real_pair",
        "command": command_line("bench/real_pair.py", argv),
        "target": args.target,
        "draft": args.draft,
        "heads": {h: p.draft.checkpoint for h, p in head_pairs.items()},
        "dtype": str(pair.target.dtype),
        "threads": torch.get_num_threads(),
        "n_prompts": len(ids),
        "max_new_tokens": args.max_new_tokens,
        "dataset": args.dataset,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
    }
    write_record(args.out, result)
    print(
        f"{args.target} / {args.draft} {result['dtype']}, {len(ids)} {args.dataset} prompts, "
        f"{args.max_new_tokens} new tokens, greedy"
    )
    print(
        "| contender | tok/s | vs our AR | vs HF assisted | tokens/iter | acceptance "
        "| outputs != AR | ms/iter: draft fwd, draft other, target fwd, other |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        tpi = f"{r['tokens_per_iteration']:.2f}" if r["tokens_per_iteration"] else "-"
        acc = f"{r['acceptance']:.3f}" if r["acceptance"] is not None else "-"
        ms = r["ms_per_iteration"]
        ms = ", ".join(f"{v:.0f}" for v in ms.values()) if ms else "-"
        print(
            f"| {r['contender']} | {r['tokens_per_s']:.2f} | {r['speedup_vs_ours_ar']:.2f}x "
            f"| {vs_hf(r['speedup_vs_hf_assisted'])} | {tpi} | {acc} "
            f"| {r['outputs_differing_from_ours_ar']} | {ms} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
