"""TALF vs standard distillation on the real pair, in one process: train the draft's top layers
with each loss (engine/train/talf_train.py, the code behind `orch train talf`; same data,
roots, steps, schedule), then decode held-out prompts with SALF trees using the untrained
draft, the distilled one and the TALF one, and report tokens per iteration
("salf_talf.txt" Table 2, SALF rows: tau of EAGLE-2 / HASS / TALF drafts).

Each model is loaded once (a 2-core, 23 GB box shared with other jobs): the draft's trained
tensors are swapped in place between runs. The checkpoints are ordinary `talf` checkpoints
(`PREFIX-talf`, `PREFIX-distill`), usable afterwards as `ckpt:NAME`; finished ones are reused,
unfinished ones resumed.

    python bench/talf_real.py --steps 20 --roots 8 --prompts 10 --eval-prompts 4 \
        --max-new-tokens 32 -o bench/records/talf_real_pair.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import checkpoint  # noqa: E402
from engine.checkpoint import apply_weights  # noqa: E402
from engine.datasets import encode_prompt, load_prompts  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.metrics import pooled_metrics  # noqa: E402
from engine.models import Pair, load_model  # noqa: E402
from engine.train.talf_train import KIND, TrainConfig, train, trainable  # noqa: E402

SHOWN = ("tokens_per_iteration", "mean_accepted_length", "mean_tree_size", "throughput")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b")
    ap.add_argument("--target-dtype", default="auto", help="bf16: half the target's memory")
    ap.add_argument("--prefix", default="real", help="checkpoint names PREFIX-talf/-distill")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--roots", type=int, default=8)
    ap.add_argument("--train-layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dataset", default="humaneval")
    ap.add_argument("--prompts", type=int, default=10, help="training prompts (from 0)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--response-tokens", type=int, default=32)
    ap.add_argument("--eval-offset", type=int, default=150, help="first held-out prompt")
    ap.add_argument("--eval-prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--method", default="salf")
    ap.add_argument("--param", action="append", default=[], help="method key=value")
    ap.add_argument("-o", "--out", default=None)
    args = ap.parse_args()
    params = dict(p.split("=", 1) for p in args.param)
    assert args.prompts <= args.eval_offset, "training prompts overlap the held-out ones"
    t0 = time.perf_counter()
    target, draft = load_model(args.target, dtype=args.target_dtype), load_model(args.draft)
    print(f"loaded the pair in {time.perf_counter() - t0:.0f} s", flush=True)
    untrained = {
        k: p.detach().clone() for k, p in trainable(draft.model, args.train_layers).items()
    }
    weights = {"untrained": untrained}
    configs, train_s = {}, {}
    for loss in ("talf", "distill"):
        cfg = TrainConfig(
            target=args.target,
            draft=args.draft,
            target_dtype=args.target_dtype,
            loss=loss,
            train_layers=args.train_layers,
            steps=args.steps,
            roots=args.roots,
            lr=args.lr,
            warmup=args.warmup,
            dataset=args.dataset,
            prompts=args.prompts,
            prompt_tokens=args.prompt_tokens,
            response_tokens=args.response_tokens,
            save_every=5,
        )
        name = f"{args.prefix}-{loss}"
        configs[loss] = asdict(cfg)
        try:
            ckpt, state = checkpoint.load(name, KIND)
            print(f"{name}: finished checkpoint reused", flush=True)
        except Exception:  # noqa: BLE001 - missing or unfinished: train (or resume) it
            start = time.perf_counter()
            resume = checkpoint.resumable(name, KIND) is not None

            def log(step: int, value: float, loss=loss, start=start) -> None:
                took = time.perf_counter() - start
                print(f"{loss} step {step + 1}/{args.steps} loss {value:.4f} ({took:.0f} s)")
                sys.stdout.flush()

            train(cfg, name, resume=resume, on_step=log, models=(target, draft))
            train_s[loss] = time.perf_counter() - start
            ckpt, state = checkpoint.load(name, KIND)
        weights[loss] = state["weights"]
        configs[loss]["sha256"] = ckpt.sha256
        apply_weights(draft.model, untrained)
    prompts = load_prompts(args.dataset, args.eval_offset + args.eval_prompts)[args.eval_offset :]
    pair = Pair(target=target, draft=draft)
    stats = {k: [] for k in weights}
    lengths, differ = [], []
    for i, p in enumerate(prompts):
        ids = encode_prompt(target.tokenizer, p, 256)
        lengths.append(len(ids))
        ref = None
        for k, w in weights.items():
            apply_weights(draft.model, w)
            start = time.perf_counter()
            g = generate(pair, ids, args.method, args.max_new_tokens, params=params)
            ref = g.tokens if ref is None else ref
            if g.tokens != ref:  # bf16 targets can flip near-ties between tree shapes
                print(f"warning: {k} decoded other tokens than the first draft on {p.id}")
                differ.append((p.id, k))
            stats[k].append(g.stats)
            tau = g.stats.new_tokens / len(g.stats.iterations)
            took = time.perf_counter() - start
            print(f"[{i + 1}/{len(prompts)}] {p.id} {k}: tau {tau:.2f} ({took:.0f} s)", flush=True)
    rows = [{"draft": k, **{m: pooled_metrics(stats[k], lengths)[m] for m in SHOWN}} for k in stats]
    print(
        f"\n{args.method} {params or '(paper defaults)'} on {args.dataset}[{args.eval_offset}:"
        f"{args.eval_offset + args.eval_prompts}], {args.max_new_tokens} new tokens, greedy"
    )
    print("| draft | tokens/iteration | accepted/iteration | tree size | tokens/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['draft']} | {r['tokens_per_iteration']:.3f} | "
            f"{r['mean_accepted_length']:.3f} | {r['mean_tree_size']:.1f} | "
            f"{r['throughput']:.2f} |"
        )
    if args.out:
        record = {
            "command": "python " + " ".join(sys.argv),
            "method": args.method,
            "params": params,
            "eval_prompts": [p.id for p in prompts],
            "max_new_tokens": args.max_new_tokens,
            "train_configs": configs,
            "train_seconds": train_s,
            "rows": rows,
            "outputs_differ": differ,
        }
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
