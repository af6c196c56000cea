"""Replay prompts of a `bench/methods.py` record and check the tokens are still the same.

A refactor of the engine must not change what any method emits. This decodes the chosen
prompts of a record again with the record's settings (pair, dataset, prompt length, new tokens,
every method's resolved parameters, greedy) and compares each method's tokens with the ones
stored for that prompt. Exit code 1 if any differ.

    python bench/replay_record.py bench/records/methods_real_pair.json --prompts 6,16,19 \\
        [--methods linear,dynatree] [--out replay.json]

`--prompts` are 1-based, as in the record's tables. Prompts that ended early at EOS are the
cheap ones on a CPU (Spec-Bench 6, 16 and 19 of the real-pair record emit 14, 12, 16 tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.common import markdown_table  # noqa: E402
from engine.config import ConfigError  # noqa: E402
from engine.datasets import DatasetError, encode_prompt, load_prompts  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.models import load_pair  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record", help="a JSON record written by bench/methods.py")
    ap.add_argument("--prompts", required=True, help="1-based prompt numbers, comma-separated")
    ap.add_argument("--methods", default="", help="comma-separated (default: all of the record)")
    ap.add_argument("--out", default="")
    return ap.parse_args(argv)


def check(args: argparse.Namespace) -> tuple[dict, dict, list[int], list]:
    """The record, its methods resolved, the chosen prompt indices, the prompt texts."""
    try:
        with open(args.record) as f:
            record = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read record {args.record!r}: {e}") from None
    try:
        chosen = [int(x) - 1 for x in args.prompts.split(",")]
    except ValueError:
        raise ConfigError(f"--prompts expects 1-based integers, got {args.prompts!r}") from None
    stored = {p["prompt"] for p in record["per_prompt"]}
    missing = [i + 1 for i in chosen if i not in stored]
    if missing:
        raise ConfigError(f"prompts {missing} are not in the record (it has {len(stored)})")
    names = args.methods.split(",") if args.methods else list(record["methods"])
    unknown = [n for n in names if n not in record["methods"]]
    if unknown:
        raise ConfigError(f"methods {unknown} are not in the record")
    methods = {}  # label -> method: a label's params name its method (bench/methods.py)
    for n in names:
        params = dict(record["methods"][n])
        methods[n] = resolve_method(params.pop("method", n), params)
    texts = load_prompts(record["dataset"], n=record["n_prompts"])
    return record, methods, chosen, texts


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        record, methods, chosen, texts = check(args)
    except (ConfigError, DatasetError) as e:  # bad input: one line, before any model loads
        sys.exit(f"error: {e}")
    pair = load_pair(record["target"], record["draft"])
    by_prompt = {p["prompt"]: p["runs"] for p in record["per_prompt"]}
    rows = []
    for i in chosen:
        ids = encode_prompt(pair.target.tokenizer, texts[i], record["prompt_tokens"])
        for name, m in methods.items():
            start = time.perf_counter()
            g = generate(
                pair, ids, m, record["max_new_tokens"], engine=record.get("engine", "eager")
            )
            want = by_prompt[i][name]["tokens"]
            rows.append(
                {
                    "prompt": i + 1,
                    "method": name,
                    "new_tokens": len(g.tokens),
                    "same_tokens": g.tokens == want,
                    "seconds": time.perf_counter() - start,
                }
            )
            print(f"prompt {i + 1} {name}: same={rows[-1]['same_tokens']}", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"record": args.record, "rows": rows}, f, indent=1)
    print(markdown_table(rows, ["prompt", "method", "new_tokens", "same_tokens", "seconds"]))
    sys.exit(0 if all(r["same_tokens"] for r in rows) else 1)


if __name__ == "__main__":
    main()
