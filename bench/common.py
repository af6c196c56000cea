"""Shared helpers of the bench scripts: Spec-Bench prompts, markdown tables."""

from __future__ import annotations

import json
import os

SPEC_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                          "spec_bench.jsonl")


def spec_bench_path() -> str:
    data = os.environ.get("ORCH_DATA_DIR")
    if data and os.path.isfile(os.path.join(data, "spec_bench.jsonl")):
        return os.path.join(data, "spec_bench.jsonl")
    for cand in (SPEC_BENCH, "/work/shared/data/spec_bench.jsonl"):
        if os.path.isfile(cand):
            return cand
    raise FileNotFoundError("spec_bench.jsonl not found; set ORCH_DATA_DIR")


def load_prompts(pair, n: int, max_prompt_tokens: int = 512) -> list[list[int]]:
    """The first n Spec-Bench prompts (field `prompt`) as token ids, through the chat template
    when the tokenizer has one, truncated to the last max_prompt_tokens tokens."""
    tok = pair.target.tokenizer
    out = []
    with open(spec_bench_path()) as f:
        for line in f:
            if len(out) >= n:
                break
            text = json.loads(line)["prompt"]
            ids = tok.chat_template_encode(text) or tok.encode(text)
            out.append(ids[-max_prompt_tokens:])
    return out


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
