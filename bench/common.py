"""Shared helpers of the bench scripts: prompts as token ids, markdown tables, JSON records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.datasets import encode_prompt
from engine.datasets import load_prompts as load_dataset


def load_prompts(
    pair, n: int, prompt_tokens: int = 512, dataset: str = "spec_bench"
) -> list[list[int]]:
    """The first n prompts of `dataset` as token ids (engine/datasets.py: Spec-Bench is taken
    round-robin over its 13 categories; chat template where the tokenizer has one), each
    truncated to prompt_tokens."""
    return [
        encode_prompt(pair.target.tokenizer, p, prompt_tokens) for p in load_dataset(dataset, n=n)
    ]


def command_line(script: str, argv: list[str] | None) -> str:
    """The command a record was made with: this process's, or `script` with the `argv` a
    caller (a test) passed to main."""
    return "python " + " ".join(sys.argv if argv is None else [script, *argv])


def write_record(path, record: dict) -> None:
    """Write a bench's JSON record to `path`, making its folder."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def forward_costs(model, sizes, context: int, repeats: int, engine: str, settings=None) -> dict:
    """{setting: {n: median seconds}} of one engine forward of n new tokens under a chain mask
    after `context` cached tokens (as engine/curves.py measures), with every size and setting
    interleaved within each repeat so that load drift hits them alike; the first round warms
    up. settings: {name: callable run before each of its forwards (e.g. switching the
    attention)}; default one setting, "", that changes nothing."""
    import statistics
    import time

    import torch

    from engine.curves import cached_factory

    settings = settings or {"": lambda: None}
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    lm = cached_factory(engine)(model, context + max(sizes) + 1)
    lm.extend(torch.randint(vocab, (context,), generator=gen).tolist())
    times = {s: {n: [] for n in sizes} for s in settings}
    for r in range(repeats + 1):
        for n in sizes:
            tokens = torch.randint(vocab, (n,), generator=gen)  # [n]
            positions = torch.arange(context, context + n)  # [n]
            visible = torch.ones(n, context + n, dtype=torch.bool)  # [n, C + n]
            visible[:, context:] = torch.ones(n, n, dtype=torch.bool).tril()
            for s in list(settings) if r % 2 else list(settings)[::-1]:
                settings[s]()
                start = time.perf_counter()
                lm.forward(tokens, positions, visible if n > 1 else None)
                if r:
                    times[s][n].append(time.perf_counter() - start)
                lm.commit([])
    return {s: {n: statistics.median(v) for n, v in t.items()} for s, t in times.items()}
