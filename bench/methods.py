"""Every method at its paper defaults on one model pair, greedy, in one run: tokens per
iteration, acceptance rate, tree size, throughput and speedup versus autoregressive decoding,
and whether each method reproduced the autoregressive tokens exactly.

    python bench/methods.py --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \\
        [--n-prompts 20] [--max-new-tokens 128] [--methods dynatree,salf] [--param m.k=v]
        [--dataset spec_bench] [--prompt-tokens 512] [--threads 0] [--out methods.json]
        [--resume] [--stop-after-s 3600] [--hf-lookup 2,10] [--engine fast]
        [--dataset spec_bench,humaneval,spec_bench:summarization]
        [--methods lookup,lookup_k2=lookup --param lookup_k2.k=2]   # LABEL=METHOD

Prompts: the first n prompts of the dataset (Spec-Bench: round-robin over its 13 categories;
chat template when the tokenizer has one), each truncated to its last prompt-tokens tokens.
Each method first runs once untimed (8 tokens after the first prompt's last 64) as warm-up.
Then the methods are interleaved: for each prompt every method (autoregressive included) runs
once, in an order shuffled per prompt (seeded), so load drift and order effects on a shared
machine hit all of them alike. Each prompt's runs are kept in the JSON (--out), which is
rewritten after every prompt.

--dataset takes a comma-separated list, each a dataset or dataset:category: n prompts of
each, run in one interleaved loop, with a second table per category (Spec-Bench's 13,
HumanEval's python): speedup, tokens per iteration and acceptance per method.
--methods entries LABEL=METHOD run one method under several settings in the same run (the
label takes the --param overrides). --engine picks our decoding path (engine/config.py
ENGINES) for every method, autoregressive included. --hf-lookup K[,K...] adds contenders run
through Hugging Face's own `generate` on the same target (bench/hf_contenders.py):
`hf_greedy` and `hf_prompt_lookup_kK` (prompt_lookup_num_tokens=K, no assistant model).

Speedup = (method tokens / method seconds) / (autoregressive tokens / seconds) over all
prompts, generation wall time including prefill; `speedup_gmean` is the geometric mean of the
per-prompt ratios, each measured side by side within one prompt.

On this project's 2-core CPU a 1.5B fp32 forward costs ~0.3-0.55 s per token and a paper-size
tree several times that, so the full real-pair run takes many hours. `--stop-after-s` ends the
run after the prompt that crosses the limit; `--resume` continues the --out file of an earlier
run with the same settings from its next prompt. Check it first on the tiny pair (defaults).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from bench.common import markdown_table  # noqa: E402
from bench.hf_contenders import hf_run  # noqa: E402
from engine.config import ENGINES, ConfigError, parse_key_values  # noqa: E402
from engine.datasets import DatasetError, encode_prompt, load_prompts  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.drafters import DRAFTERS, MODEL_FREE  # noqa: E402
from engine.methods import method_params, resolve_method, standalone  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402

COLUMNS = [
    "method",
    "tokens_per_iteration",
    "acceptance_rate",
    "mean_tree_size",
    "throughput",
    "speedup",
    "speedup_gmean",
    "draft_share",
    "target_share",
    "build_share",
    "matches_ar",
]
CATEGORY_COLUMNS = ["category", "prompts", "method", "speedup", "tokens_per_iteration"]
CATEGORY_COLUMNS += ["acceptance_rate", "mean_tree_size"]


def run_sums(g) -> dict:
    """One generation's numbers that add up over prompts, and its tokens."""
    its = g.stats.iterations
    return {
        "new_tokens": g.stats.new_tokens,
        "seconds": g.stats.total_s,
        "iterations": len(its),
        "drafted": sum(it.tree_size - 1 for it in its),
        "accepted": sum(it.accepted for it in its),
        "tree_nodes": sum(it.tree_size for it in its),
        "draft_s": sum(it.draft_s for it in its),
        "target_s": sum(it.target_s for it in its),
        "build_s": sum(it.draft_s - it.draft_forward_s for it in its),
        "tokens": list(g.tokens),
    }


def summary(method: str, params: dict, prompts: list[dict]) -> dict:
    """The row of `method` over the per-prompt records (each {"runs": {method: run_sums}})."""
    runs = [p["runs"][method] for p in prompts]
    ar = [p["runs"]["autoregressive"] for p in prompts]
    acc = {k: sum(r[k] for r in runs) for k in runs[0] if k != "tokens"}
    s = acc["seconds"]
    ar_throughput = sum(r["new_tokens"] for r in ar) / sum(r["seconds"] for r in ar)
    ratios = [
        (r["new_tokens"] / r["seconds"]) / (a["new_tokens"] / a["seconds"])
        for r, a in zip(runs, ar)
    ]
    return {
        "method": method,
        "params": params,
        "prompts": len(runs),
        "new_tokens": acc["new_tokens"],
        "seconds": s,
        "throughput": acc["new_tokens"] / s,
        "speedup": acc["new_tokens"] / s / ar_throughput,
        "speedup_gmean": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
        "iterations": acc["iterations"],
        "tokens_per_iteration": acc["new_tokens"] / acc["iterations"],
        "acceptance_rate": acc["accepted"] / acc["drafted"] if acc["drafted"] else 0.0,
        "mean_accepted_length": acc["accepted"] / acc["iterations"],
        "mean_tree_size": acc["tree_nodes"] / acc["iterations"],
        "draft_share": acc["draft_s"] / s,
        "target_share": acc["target_s"] / s,
        "build_share": acc["build_s"] / s,
        "matches_ar": all(r["tokens"] == a["tokens"] for r, a in zip(runs, ar)),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument(
        "--draft", default=DEFAULT_PAIR[1], help="'none': no draft model (model-free methods)"
    )
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument(
        "--methods",
        default="",
        help="comma-separated METHOD or LABEL=METHOD (default: every method)",
    )
    ap.add_argument(
        "--engine", default="eager", help="our decoding path: eager, fast, compiled, graphs"
    )
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="METHOD.KEY=VALUE",
        help="override a default, e.g. dynatree.tau=0.01 (repeatable)",
    )
    ap.add_argument(
        "--hf-lookup",
        default="",
        metavar="K[,K...]",
        help="add hf_greedy and hf_prompt_lookup_kK (prompt_lookup_num_tokens=K) contenders",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the per-prompt method order")
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--resume", action="store_true", help="continue --out (same settings) from its next prompt"
    )
    ap.add_argument(
        "--stop-after-s",
        type=float,
        default=0.0,
        help="stop after the prompt that crosses this many seconds (0: never)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        settings, methods, texts, done = check(args)
    except (ConfigError, DatasetError) as e:  # bad input: one line, before any model loads
        sys.exit(f"error: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    names = list(settings["methods"])  # autoregressive first, then methods, HF contenders

    def rows_of(records: list[dict]) -> list[dict]:
        return [summary(n, settings["methods"][n], records) for n in names]

    pair = load_pair(args.target, None if args.draft == "none" else args.draft)
    prompts = [encode_prompt(pair.target.tokenizer, p, args.prompt_tokens) for p in texts]

    def run(name: str, ids: list[int], n: int) -> dict:
        if name in methods:
            return run_sums(generate(pair, ids, methods[name], n, engine=args.engine))
        return hf_run(pair, ids, n, **settings["methods"][name])

    for n in names:  # warm-up, untimed
        run(n, prompts[0][-64:], min(8, args.max_new_tokens))
    start = time.perf_counter()
    for i in range(len(done), len(prompts)):
        order = names[:]
        random.Random(args.seed * 100_003 + i).shuffle(order)
        done.append(
            {
                "prompt": i,
                "dataset": texts[i].dataset,
                "category": texts[i].category,
                "order": order,
                "runs": {n: run(n, prompts[i], args.max_new_tokens) for n in order},
            }
        )
        this = rows_of(done[-1:])
        print(
            f"prompt {i + 1}/{len(prompts)} ({this[0]['new_tokens']} tokens), speedup on "
            "it: " + ", ".join(f"{r['method']} {r['speedup']:.2f}x" for r in this[1:]),
            file=sys.stderr,
        )
        if args.out:  # a new file, then renamed: a run killed while writing keeps the old one
            with open(args.out + ".tmp", "w") as f:
                json.dump(
                    {**settings, "n_prompts": len(done), "rows": rows_of(done), "per_prompt": done},
                    f,
                    indent=1,
                )
            os.replace(args.out + ".tmp", args.out)
        if args.stop_after_s and time.perf_counter() - start > args.stop_after_s:
            break
    print(markdown_table(rows_of(done), COLUMNS))
    print()
    print(markdown_table(category_rows(done, names, settings), CATEGORY_COLUMNS))


def category_rows(done: list[dict], names: list[str], settings: dict) -> list[dict]:
    """summary() per (dataset/category, method) over the prompts of that category."""
    groups: dict[str, list[dict]] = {}
    for p in done:
        groups.setdefault(f"{p.get('dataset', '')}/{p.get('category', '')}", []).append(p)
    return [
        {"category": c, **summary(n, settings["methods"][n], records)}
        for c, records in groups.items()
        for n in names[1:]
    ]


def hf_contenders(spec: str) -> dict[str, dict]:
    """--hf-lookup "2,10" -> hf_greedy and one prompt-lookup contender per K (hf_run kwargs)."""
    try:
        ks = [int(k) for k in spec.split(",")] if spec else []
    except ValueError:
        raise ConfigError(f"--hf-lookup takes integers K[,K...], got {spec!r}") from None
    if any(k < 1 for k in ks):
        raise ConfigError(f"--hf-lookup sizes must be >= 1, got {spec!r}")
    out = {"hf_greedy": {"prompt_lookup_num_tokens": 0}} if ks else {}
    return out | {f"hf_prompt_lookup_k{k}": {"prompt_lookup_num_tokens": k} for k in ks}


def check(args: argparse.Namespace) -> tuple[dict, dict, list, list[dict]]:
    """Validate methods, parameters and dataset (ConfigError / DatasetError if bad). Returns
    the run's settings (every method's resolved parameters included), the methods by name, the
    dataset's prompts, and with --resume the per-prompt records already measured."""
    overrides: dict[str, dict[str, str]] = {}
    for key, value in parse_key_values(args.param).items():
        method, _, name = key.partition(".")
        overrides.setdefault(method, {})[name] = value
    of = {"autoregressive": "autoregressive"}  # label -> method
    for item in args.methods.split(",") if args.methods else DRAFTERS:
        label, _, method = item.partition("=")
        if label == "autoregressive" and method in ("", label):
            continue  # the baseline always runs, first
        if label in of:
            raise ConfigError(f"--methods names {label!r} twice (autoregressive is the baseline)")
        of[label] = method or label
    names = list(of)
    if args.engine not in ENGINES:
        raise ConfigError(f"--engine {args.engine!r} is not one of {', '.join(ENGINES)}")
    contenders = hf_contenders(args.hf_lookup)
    for method in overrides:
        if method not in names:
            raise ConfigError(f"--param for {method!r}, which is not among the methods run")
    texts = []  # --dataset a,b:category -> n prompts of a, n prompts of b's category
    for item in args.dataset.split(","):
        name, _, category = item.partition(":")
        texts += load_prompts(name, n=args.n_prompts, category=category or None)
    # alone: Sequoia on its fixed profile (no sweep measures one here: engine/methods.py)
    methods = {n: resolve_method(of[n], standalone(of[n], overrides.get(n))) for n in names}
    needs = [n for n in names if of[n] not in MODEL_FREE]
    if args.draft == "none" and needs:
        raise ConfigError(f"--draft none, but {', '.join(needs)} run a draft model")
    names += list(contenders)
    settings = {
        "target": args.target,
        "draft": args.draft,
        "dataset": args.dataset,
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "temperature": 0.0,
        "threads": args.threads or torch.get_num_threads(),
        "seed": args.seed,
        "engine": args.engine,
        "methods": {
            **{n: {"method": of[n], **method_params(m)} for n, m in methods.items()},
            **contenders,
        },
    }
    settings = json.loads(json.dumps(settings))  # as it reads back from the file (lists)
    if not args.resume:
        return settings, methods, texts, []
    if not (args.out and os.path.isfile(args.out)):
        raise ConfigError(f"--resume needs an existing --out file (got {args.out!r})")
    with open(args.out) as f:
        earlier = json.load(f)
    differ = [k for k in settings if earlier.get(k) != settings[k]]
    if differ:
        raise ConfigError(f"--resume: {args.out} was run with other settings ({', '.join(differ)})")
    return settings, methods, texts, earlier["per_prompt"]


if __name__ == "__main__":
    main()
