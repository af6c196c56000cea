"""A lab's own prompts: a sweep's `dataset: {path: FILE, field: NAME}` (docs/models.md).

Formats by suffix: JSONL (`.jsonl`, `.ndjson`: one JSON object a line), JSON (`.json`: a list
of objects), CSV (`.csv`, a header row) and Parquet (`.parquet`, `.pq`; needs pyarrow). Each row
gives its prompt in `field`: a string (the prompt's text), or a list of chat messages
`[{role, content}, ...]` (encoded through the tokenizer's chat template as a conversation; the
text is the last user turn, for tokenizers without a template). Optional per row:
`category_field` (the group stratified sampling goes round-robin over, and a sweep's
`category:` picks), `id_field` (default: the row's number).

Selection is the bundled sets' (engine/datasets.py): with a category field, `category` None
or "all" goes round-robin over the categories in order of first appearance (file order within
each), a category value takes that category in file order; without one, file order. The
first `n` of that order; the prompt length cut and the chat template are encode_prompt's.

The driver reads the file (`read_prompt_file`); the sha256 of its bytes is stored with the
sweep and is part of each trial's identity, and the selected prompts travel with the trials,
so workers never need the file. Every problem is a DatasetError, one line naming the file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.datasets import ALL, DatasetError, Prompt, _round_robin

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}
FORMATS |= {".parquet": "parquet", ".pq": "parquet"}
MAX_BYTES = 512 << 20  # a prompt file larger than this is refused (it is read whole)


@dataclass(frozen=True)
class PromptFile:
    """A read prompt file: its sha256, its dataset name (`label`) and every prompt, in file
    order."""

    path: str
    sha256: str
    label: str
    prompts: tuple[Prompt, ...]
    categories: bool  # rows carry a category (category_field given)


def file_label(path: Path, sha256: str) -> str:
    """The dataset name trials of this file store: its stem and the start of its sha256
    (two files of one name never share a name; fits the 64-character column)."""
    return f"{path.stem[:40]}@{sha256[:12]}"


def read_prompt_file(
    path: str | Path,
    field: str,
    category_field: str | None = None,
    id_field: str | None = None,
) -> PromptFile:
    """Read and check every row of a prompt file (module doc)."""
    path = Path(path).expanduser()
    where = f"prompt file {path}"
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DatasetError(
            f"{where}: unknown format {path.suffix or '(no suffix)'!r} "
            f"(known: {', '.join(FORMATS)})"
        )
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise DatasetError(f"{where} is {size} bytes; at most {MAX_BYTES} are read")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{where} not found") from None
    except IsADirectoryError:
        raise DatasetError(f"{where} is a folder, not a file") from None
    except OSError as e:
        raise DatasetError(f"cannot read {where}: {e.strerror or e}") from None
    sha = hashlib.sha256(raw).hexdigest()
    rows = _rows(raw, fmt, where)
    if not rows:
        raise DatasetError(f"{where} has no rows")
    label = file_label(path, sha)
    prompts = tuple(
        _prompt(row, i, label, field, category_field, id_field, where)
        for i, row in enumerate(rows, 1)
    )
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise DatasetError(f"{where}: id {dup!r} appears more than once ({id_field})")
    return PromptFile(str(path), sha, label, prompts, category_field is not None)


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DatasetError(f"{where} is not UTF-8 text (line {line})") from None


def _rows(raw: bytes, fmt: str, where: str) -> list[Any]:
    if fmt == "parquet":
        return _parquet(raw, where)
    text = _text(raw, where)
    if fmt == "csv":
        try:
            return list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as e:
            raise DatasetError(f"{where}: not valid CSV ({e})") from None
    if fmt == "json":
        try:
            data = json.loads(text) if text.strip() else []
        except json.JSONDecodeError as e:
            raise DatasetError(f"{where}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, list):
            raise DatasetError(f"{where}: expected a JSON list of objects, one per prompt")
        return data
    rows = []
    for i, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise DatasetError(f"{where} line {i}: not a JSON object") from None
    return rows


def _parquet(raw: bytes, where: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq  # lazy: pyarrow
    except ImportError:
        raise DatasetError(f"{where}: reading Parquet needs pyarrow") from None
    try:
        return pq.read_table(io.BytesIO(raw)).to_pylist()
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise DatasetError(f"{where}: not a readable Parquet file ({first})"[:300]) from None


def _prompt(
    row: Any,
    i: int,
    label: str,
    field: str,
    category_field: str | None,
    id_field: str | None,
    where: str,
) -> Prompt:
    at = f"{where} row {i}"
    if not isinstance(row, dict):
        raise DatasetError(f"{at}: not an object with named fields")
    for name in (field, category_field, id_field):
        if name is not None and name not in row:
            known = ", ".join(map(str, list(row)[:8])) or "none"
            raise DatasetError(f"{at} has no field {name!r} (its fields: {known})")
    value = row[field]
    messages = None
    if isinstance(value, (list, tuple)):
        messages = _messages(value, f"{at}: field {field!r}")
        users = [c for r, c in messages if r == "user"]
        text = users[-1] if users else messages[-1][1]
    elif isinstance(value, str):
        text = value
    else:
        raise DatasetError(
            f"{at}: field {field!r} is neither text nor a list of chat messages "
            f"(got {type(value).__name__})"
        )
    if not text.strip():
        raise DatasetError(f"{at}: field {field!r} is empty")
    category = "" if category_field is None else row[category_field]
    if not isinstance(category, (str, int)) or isinstance(category, bool):
        raise DatasetError(f"{at}: field {category_field!r} is not a category name")
    ident = str(i) if id_field is None else row[id_field]
    return Prompt(
        id=str(ident),
        dataset=label,
        category=str(category),
        text=text,
        messages=messages,
    )


def _messages(value: Any, at: str) -> tuple[tuple[str, str], ...]:
    out = []
    for m in value:
        ok = isinstance(m, dict) and isinstance(m.get("role"), str)
        if not (ok and isinstance(m.get("content"), str)):
            raise DatasetError(f"{at}: each chat message needs a role and a content (text)")
        out.append((m["role"], m["content"]))
    if not out:
        raise DatasetError(f"{at}: empty list of chat messages")
    return tuple(out)


def select_prompts(
    pf: PromptFile, n: int | None = None, category: str | None = None
) -> list[Prompt]:
    """The first `n` prompts of the file's selection `category` (module doc)."""
    prompts = list(pf.prompts)
    where = f"prompt file {pf.path}"
    if category not in (None, ALL):
        if not pf.categories:
            raise DatasetError(f"{where}: category {category!r} needs a category_field")
        prompts = [p for p in prompts if p.category == category]
        if not prompts:
            known = ", ".join(dict.fromkeys(p.category for p in pf.prompts))
            raise DatasetError(f"{where} has no category {category!r} (categories: {known})")
    elif pf.categories:
        prompts = _round_robin(prompts)
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DatasetError(f"number of prompts must be a positive integer, got {n!r}")
        if n > len(prompts):
            sel = "" if category in (None, ALL) else f" in category {category!r}"
            raise DatasetError(f"asked for {n} prompts but {where} has {len(prompts)}{sel}")
        prompts = prompts[:n]
    return prompts


def load_file_prompts(
    path: str | Path,
    sha256: str,
    field: str,
    category_field: str | None,
    id_field: str | None,
    n: int | None,
    category: str | None,
) -> list[Prompt]:
    """The driver's prompts of a stored sweep's file, read again: the file must still be the
    one submitted (its sha256), else DatasetError saying so."""
    pf = read_prompt_file(path, field, category_field, id_field)
    if pf.sha256 != sha256:
        raise DatasetError(
            f"prompt file {pf.path} changed since the sweep was submitted (sha256 "
            f"{pf.sha256[:12]}, was {sha256[:12]}): restore it or submit the sweep again"
        )
    return select_prompts(pf, n, category)
