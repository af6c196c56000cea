"""A lab's own models, prompts and placement in a sweep file (docs/models.md); parse.py calls
these for the keys they own:

```yaml
pairs:
  - target: {name: meta-llama/Llama-2-7b-hf, revision: 01c7f73d771dfac7d292323805ebc428287df4f9}
    draft: {name: JackFram/llama-68m, revision: main}   # or a plain name, as before
dataset: {path: prompts.jsonl, field: prompt, category_field: topic, id_field: id,
          prompts: 20, prompt_tokens: 256, category: all, chat: true}
                              # a JSONL, JSON, CSV or Parquet file, relative to the sweep file
placement: {gpus_per_trial: 4, offload: cpu, gpu_memory: 80GiB}
                              # GPUs each trial's actor reserves; the target spread over them,
                              # what does not fit offloaded to host memory (engine/placement.py)
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config import ConfigError
from engine.datasets import DatasetError
from engine.model_names import canonical_name
from engine.placement import OFFLOADS, parse_memory
from engine.prompt_files import read_prompt_file, select_prompts
from orchestrator.spec.limits import MODEL_MAX, text_problem
from orchestrator.spec.types import DatasetSel
from orchestrator.spec.values import SpecError, boolean, integer, mapping, string

REVISION_MAX = 200


def model_entry(value: Any, where: str) -> tuple[str, str | None]:
    """A pair's model: a name, or {name, revision} (a hub id's branch, tag or commit)."""
    if isinstance(value, dict):
        m = mapping(value, where, required=("name",), optional=("revision",))
        name = string(m["name"], f"{where}.name")
        rev = m.get("revision")
        if rev is not None:
            rev = string(rev, f"{where}.revision")
            problem = text_problem(rev, REVISION_MAX) or ("empty" if not rev.strip() else "")
            if problem or any(c.isspace() for c in rev):
                raise SpecError(f"{where}.revision: {problem or 'no spaces in a revision'}")
    else:
        name, rev = string(value, where), None
    problem = text_problem(name, MODEL_MAX)
    if problem:
        raise SpecError(f"{where}: {problem}")
    return canonical_name(name), rev


FILE_KEYS = ("path", "field", "category_field", "id_field")


def file_dataset(m: dict, where: str, max_prompts: int, source: str) -> DatasetSel:
    """`dataset: {path: FILE, field: NAME, ...}`: the file read and checked now (its rows,
    sha256, and that it has the prompts asked for)."""
    path = Path(string(m["path"], f"{where}.path")).expanduser()
    if not path.is_absolute() and Path(source).is_file():
        path = Path(source).resolve().parent / path  # relative to the sweep file
    field = string(m.get("field", "prompt"), f"{where}.field")
    cat_field = m.get("category_field")
    cat_field = None if cat_field is None else string(cat_field, f"{where}.category_field")
    id_field = m.get("id_field")
    id_field = None if id_field is None else string(id_field, f"{where}.id_field")
    pt, cat, chat = m.get("prompt_tokens"), m.get("category"), m.get("chat")
    n = integer(
        m.get("prompts", 10), f"{where}.prompts", lo=1, hi=max_prompts, cap="limits.max_prompts"
    )
    category = None if cat is None else string(cat, f"{where}.category")
    try:
        pf = read_prompt_file(path, field, cat_field, id_field)
        select_prompts(pf, n, category)
    except DatasetError as e:
        raise SpecError(f"{where}: {e}") from None
    return DatasetSel(
        name=pf.label,
        prompts=n,
        prompt_tokens=None if pt is None else integer(pt, f"{where}.prompt_tokens", lo=1),
        category=category,
        chat=None if chat is None else boolean(chat, f"{where}.chat"),
        path=str(path.resolve()),
        field=field,
        category_field=cat_field,
        id_field=id_field,
        sha256=pf.sha256,
    )


def prompt_file_key(d: DatasetSel) -> dict[str, Any] | None:
    """A file dataset's part of each trial's identity (TrialConfig.prompt_file): the file's
    content and how its rows are read, not where the driver keeps it."""
    if d.sha256 is None:
        return None
    return {
        "sha256": d.sha256,
        "field": d.field,
        "category_field": d.category_field,
        "id_field": d.id_field,
    }


PLACEMENT_KEYS = ("gpus_per_trial", "offload", "gpu_memory")


def placement(value: Any, where: str) -> dict[str, Any] | None:
    """The sweep's placement as trials store it: only the keys that differ from one device
    (None when none does, so such trials keep their identity)."""
    m = mapping(value, where, optional=PLACEMENT_KEYS)
    gpus = integer(m.get("gpus_per_trial", 1), f"{where}.gpus_per_trial", lo=1, hi=64)
    offload = m.get("offload")
    if offload is not None and offload not in OFFLOADS:
        raise SpecError(f"{where}.offload: {offload!r} is not one of {', '.join(OFFLOADS)}")
    memory = m.get("gpu_memory")
    if memory is not None:
        try:
            parse_memory(string(memory, f"{where}.gpu_memory"))
        except ConfigError as e:
            raise SpecError(f"{where}.gpu_memory: {e}") from None
    out = {"gpus_per_trial": gpus, "offload": offload, "gpu_memory": memory}
    out = {k: v for k, v in out.items() if v is not None and not (k == "gpus_per_trial" and v == 1)}
    return out or None
