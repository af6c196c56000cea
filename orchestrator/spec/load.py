"""`load_sweep`: a sweep file read, parsed (parse.py), scaled when asked (scale.py), its grid
measured against the caps (limits.py) and expanded into trial configs (expand.py)."""

from __future__ import annotations

from pathlib import Path

from engine.config import ConfigError
from orchestrator.records import TrialConfig
from orchestrator.spec.expand import expand
from orchestrator.spec.limits import check_grid
from orchestrator.spec.parse import parse_sweep
from orchestrator.spec.scale import apply_scale
from orchestrator.spec.types import Sweep
from orchestrator.spec.values import SpecError
from orchestrator.spec.yaml_file import read_yaml


def load_sweep(
    path: str | Path, local_models: bool = True, scaled: bool = False
) -> tuple[Sweep, list[TrialConfig]]:
    """Read, parse and validate a sweep file; returns the sweep and its expanded trials.
    scaled: run its `scale:` block (orchestrator/spec/scale.py), else the file's own sizes.

    Model names are checked against the registries (real models need not be fetched here:
    workers fetch them on first use). local_models=False (a driver for a remote cluster): a
    model given as a folder path is checked by the worker that loads it."""
    path = Path(path)
    try:
        data = read_yaml(path)
    except ConfigError as e:
        raise SpecError(str(e)) from None
    sweep = parse_sweep(apply_scale(data, str(path), scaled), source=str(path))
    try:
        check_grid(sweep, sweep.limits)  # before expanding: a huge grid fails here, at once
    except ConfigError as e:
        raise SpecError(f"{path}: {e}") from None
    return sweep, expand(sweep, source=str(path), local_models=local_models)
