"""Named checkpoints of learned components under ORCH_HOME/checkpoints/<name>/.

A checkpoint is a folder with `state.pt` (a `torch.save`d dict: the weights, and while training
is unfinished the optimizer state and step to resume from) and `meta.json`:

    {"name", "kind", "sha256" (of state.pt), "config" (the training configuration, JSON),
     "step", "done" (false while training may resume), "torch", "saved" (UTC time)}

Writes are atomic (a temporary file renamed over the old one), so an interrupted trainer leaves
the last complete checkpoint. Trials that use a checkpoint record `describe(name)`: name, kind,
sha256 and training config, so a result says exactly which weights made it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.config import ConfigError
from engine.fetch import orch_home

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class Checkpoint:
    name: str
    kind: str  # "nde" | "talf" | "block-drafter"
    sha256: str  # of state.pt
    config: dict[str, Any]  # the training configuration
    step: int
    done: bool  # false: an unfinished run, resumable
    path: Path  # the folder


def root() -> Path:
    return orch_home() / "checkpoints"


def folder(name: str) -> Path:
    if not NAME.match(name):
        raise ConfigError(
            f"checkpoint name {name!r}: use letters, digits, '.', '_' and '-' (at most 100)"
        )
    return root() / name


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def restore(state: dict[str, Any], module, opt, gen: torch.Generator, weights: str) -> int:
    """A training loop continued from a saved `state`: the module's tensors (under key
    `weights`), the optimizer's and the generator's state put back; returns the step."""
    module.load_state_dict(state[weights])
    opt.load_state_dict(state["optimizer"])
    gen.set_state(state["generator"])
    return state["step"]


def atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(
    name: str, kind: str, state: dict[str, Any], config: dict[str, Any], step: int, done: bool
) -> Checkpoint:
    """Write `state` (and its meta) as checkpoint `name`, replacing an earlier one atomically."""
    d = folder(name)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / "state.pt", lambda f: torch.save(state, f))
    meta = {
        "name": name,
        "kind": kind,
        "sha256": file_sha256(d / "state.pt"),
        "config": config,
        "step": step,
        "done": done,
        "torch": torch.__version__,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(d / "meta.json", lambda f: f.write(json.dumps(meta, indent=1).encode()))
    return _from_meta(meta, d)


def _from_meta(meta: dict[str, Any], d: Path) -> Checkpoint:
    return Checkpoint(
        meta["name"], meta["kind"], meta["sha256"], meta["config"], meta["step"], meta["done"], d
    )


def find(name: str, kind: str | None = None) -> Checkpoint:
    """The checkpoint `name` (of `kind` when given); ConfigError (one line) when it is missing,
    of another kind, or unfinished."""
    d = folder(name)
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        have = ", ".join(c.name for c in list_all()) or "none"
        raise ConfigError(
            f"no checkpoint {name!r} under {root()} (have: {have}; `orch train` makes one)"
        ) from None
    ckpt = _from_meta(meta, d)
    if kind is not None and ckpt.kind != kind:
        raise ConfigError(f"checkpoint {name!r} is a {ckpt.kind} checkpoint, not {kind}")
    if not ckpt.done:
        raise ConfigError(
            f"checkpoint {name!r} is unfinished (step {ckpt.step}); resume its training first"
        )
    return ckpt


def load(name: str, kind: str | None = None) -> tuple[Checkpoint, dict[str, Any]]:
    """The finished checkpoint `name` and its state, checked against its recorded sha256."""
    ckpt = find(name, kind)
    return ckpt, _load_state(ckpt)


def _load_state(ckpt: Checkpoint) -> dict[str, Any]:
    path = ckpt.path / "state.pt"
    if file_sha256(path) != ckpt.sha256:
        raise ConfigError(f"checkpoint {ckpt.name!r}: state.pt does not match its sha256")
    return torch.load(path, map_location="cpu", weights_only=True)


def resumable(name: str, kind: str) -> tuple[Checkpoint, dict[str, Any]] | None:
    """The unfinished checkpoint `name` of `kind` and its state, to resume training; None when
    there is none (or it is finished)."""
    try:
        meta = json.loads((folder(name) / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    ckpt = _from_meta(meta, folder(name))
    if ckpt.done:
        return None
    if ckpt.kind != kind:
        raise ConfigError(f"checkpoint {name!r} is a {ckpt.kind} checkpoint, not {kind}")
    return ckpt, _load_state(ckpt)


def describe(name: str, kind: str | None = None) -> dict[str, Any]:
    """What a trial records of the checkpoint it used."""
    c = find(name, kind)
    return {"name": c.name, "kind": c.kind, "sha256": c.sha256, "config": c.config}


def list_all() -> list[Checkpoint]:
    out = []
    for meta_path in sorted(root().glob("*/meta.json")):
        try:
            out.append(_from_meta(json.loads(meta_path.read_text()), meta_path.parent))
        except (OSError, ValueError, KeyError):
            continue
    return out


def apply_weights(model, weights: dict[str, torch.Tensor]) -> None:
    """Copy trained tensors into `model` (in place, same names and shapes)."""
    params = dict(model.named_parameters())
    missing = [k for k in weights if k not in params or params[k].shape != weights[k].shape]
    if missing:
        raise ValueError(f"the draft has no parameter(s) {missing[:3]} of these shapes")
    with torch.no_grad():
        for k, w in weights.items():
            params[k].copy_(w.to(params[k].dtype))
