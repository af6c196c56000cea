"""Shared helpers of the bench scripts: prompts as token ids, markdown tables."""

from __future__ import annotations

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


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
