"""The prompts a driver ships with its jobs (orchestrator/run/runner.py): each dataset slice
loaded once in the driver, so workers need no dataset file (a user's prompt file: read again
from where the sweep's spec says, its sha256 checked; an acceptance trial's: the dataset's last
prompts), and the `datasets` rows a submitted sweep stores."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from engine.config import ConfigError
from engine.datasets import DatasetError, dataset_info, load_prompts
from engine.prompt_files import load_file_prompts, read_prompt_file
from orchestrator.acceptance import held_out, is_acceptance
from orchestrator.run.executors import Job


def attach_prompts(jobs: list[Job], cache: dict[tuple, list], spec: dict | None = None) -> None:
    """Load each dataset slice once in the driver and ship the prompts with the jobs (a
    user's prompt file: read again from where the sweep's spec says, its sha256 checked)."""
    for job in jobs:
        c = job.config
        if c.is_profile:  # no dataset
            continue
        held = is_acceptance(c)  # an acceptance trial's prompts: the dataset's last ones
        key = (c.dataset, c.prompts, c.category, c.prompt_file is not None, held)
        if key not in cache:
            if c.prompt_file is not None:
                cache[key] = file_prompts(c, spec or {}, held)
            elif held:
                cache[key] = held_out(c.dataset, c.prompts, c.category)
            else:
                cache[key] = load_prompts(c.dataset, n=c.prompts, category=c.category)
        job.prompts = cache[key]


def file_prompts(c: Any, spec: dict, held: bool = False) -> list:
    """A trial's prompts from the user's file its sweep was submitted with (`held`: an
    acceptance trial's, the file's last ones)."""
    pf = c.prompt_file
    paths = [d["path"] for d in spec.get("datasets", []) if d.get("sha256") == pf["sha256"]]
    if not paths:
        raise ConfigError(
            f"trial {c.label()}: its prompt file (sha256 {pf['sha256'][:12]}) is not in this "
            f"sweep's spec: submit the sweep file that names it"
        )
    try:
        prompts = load_file_prompts(
            paths[0],
            pf["sha256"],
            pf["field"],
            pf["category_field"],
            pf["id_field"],
            None if held else c.prompts,
            c.category,
        )
        return prompts[-c.prompts :] if held else prompts
    except DatasetError as e:
        raise ConfigError(str(e)) from None


def file_row(d: Any) -> dict[str, Any]:
    """The datasets row of a user's prompt file (a DatasetSel with its sha256)."""
    pf = read_prompt_file(d.path, d.field, d.category_field, d.id_field)
    return {
        "name": d.name,
        "file": d.path[-300:],
        "items": len(pf.prompts),
        "categories": len({p.category for p in pf.prompts}) if pf.categories else None,
        "chat": True if d.chat is None else d.chat,
        "sha256": pf.sha256,
    }


def dataset_row(name: str) -> dict[str, Any]:
    info = dataset_info(name)
    sha = None
    if info["path"]:
        sha = hashlib.sha256(Path(info["path"]).read_bytes()).hexdigest()
    return {
        "name": name,
        "file": info["file"],
        "items": info["items"],
        "categories": info["categories"],
        "chat": info["chat"],
        "sha256": sha,
    }
