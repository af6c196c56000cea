"""A sweep file's `scale:` block: the same grid, run smaller (on a CPU), on request.

```yaml
scale:                       # applied only by `orch submit FILE --scale`; every key optional
  prompts: 4                 # prompts per dataset entry (at most the file's own)
  prompt_tokens: 128         # prompt truncation (at most the file's own, when it sets one)
  max_new_tokens: 32         # or a list: replaces the top-level lengths and every method's own
  repeats: 1                 # at most the file's own
  warmup: 1                  # at most the file's own
  pairs: [{target: T, draft: D}, ...]   # replaces the pairs
  profile: {sizes: [1, 2, 4], contexts: [128], repeats: 1}   # each key optional, see below
```

Without `--scale` the block is checked and left out: the file runs at its own (the paper's)
scale. With `--scale` the sweep is named `NAME-scaled` (a separate sweep in the database)
and its trials are the file's grid at the block's sizes: every method parameter point of the
full run, no other. A scaled trial measures something else than a full-scale one, so the
block must change what a trial records (its prompts, prompt length, lengths or pairs): a
block whose trials could be the full run's own is an error. Errors are one `SpecError` line.

A file with a `profile:` block (orchestrator/spec/parse.py) profiles at one repeat when scaled (the
median of one timed forward per point, after the usual warmup forward), its sizes and contexts
unchanged, unless the scale block has its own `profile:`: its keys replace the file's, each at
most the file's (repeats, and the largest size and context). A profile trial is not a scaled
measurement: one whose grid is the full run's (a file with `repeats: 1`) is the full run's own
trial, shared, and a resubmission of either sweep does not profile again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from engine.config import ConfigError
from orchestrator.spec.parse import PROFILE_KEYS, _profile, parse_sweep
from orchestrator.spec.types import Sweep
from orchestrator.spec.values import SpecError, integer, mapping, nonempty_list
from orchestrator.spec.yaml_file import read_yaml

SUFFIX = "-scaled"
KEYS = ("prompts", "prompt_tokens", "max_new_tokens", "repeats", "warmup", "pairs", "profile")


class ScaleError(SpecError):
    """The `scale:` block is invalid or missing; one line naming the file and key."""


def apply_scale(data: Any, source: str, scaled: bool) -> Any:
    """The sweep document to parse: the file's own without its `scale:` block, or (scaled)
    the document with the block applied. The block is validated either way."""
    if not isinstance(data, dict) or "scale" not in data:
        if scaled:
            raise ScaleError(f"{source}: --scale, but the file has no scale: block")
        return data
    full = {k: v for k, v in data.items() if k != "scale"}
    sweep = parse_sweep(full, source)
    block = _block(data["scale"], sweep, f"{source}: scale")
    small = _scaled(full, sweep, block)
    _check_distinct(sweep, parse_sweep(small, f"{source}: scale"), f"{source}: scale")
    return small if scaled else full


def describe(data: Any, scaled: bool) -> str:
    """One line for `orch submit`: which scale runs ("" for a file without a scale: block)."""
    block = data.get("scale") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        return ""
    if not scaled:
        return "scale: full (the file's own sizes; --scale runs its scale: block)"
    shown = ", ".join(f"{k} {_shown(block[k])}" for k in KEYS if k in block)
    name = f"{data.get('name')}{SUFFIX}"
    return f"scale: reduced by the file's scale: block ({shown}); the same grid, as sweep {name!r}"


def _shown(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "/".join(f"{p.get('target')}:{p.get('draft')}" for p in value)
    return str(value)


def _block(value: Any, sweep: Sweep, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise ScaleError(f"{where}: expected a mapping with at least one of {', '.join(KEYS)}")
    block = mapping(value, where, optional=KEYS)
    at = lambda key: f"{where}.{key}"  # noqa: E731

    def at_most(key: str, full: int | None, what: str, lo: int = 1) -> None:
        if key in block:
            v = integer(block[key], at(key), lo=lo)
            if full is not None and v > full:
                raise ScaleError(f"{at(key)}: {v} is more than the file's {what} ({full})")

    at_most("prompts", min(d.prompts for d in sweep.datasets), "prompts per dataset")
    tokens = [d.prompt_tokens for d in sweep.datasets if d.prompt_tokens is not None]
    at_most("prompt_tokens", min(tokens, default=None), "prompt_tokens")
    at_most("repeats", sweep.repeats, "repeats")
    at_most("warmup", sweep.warmup, "warmup", lo=0)
    if "max_new_tokens" in block:
        v = block["max_new_tokens"]
        values = nonempty_list(v, at("max_new_tokens")) if isinstance(v, list) else [v]
        most = max(_lengths(sweep))
        for j, n in enumerate(values):
            path = at("max_new_tokens") + (f"[{j}]" if isinstance(v, list) else "")
            if integer(n, path, lo=1) > most:
                raise ScaleError(f"{path}: {n} is more than the file's longest length ({most})")
    if "pairs" in block:
        nonempty_list(block["pairs"], at("pairs"))  # entries are checked by the scaled parse
    if "profile" in block:
        _check_profile(block["profile"], sweep, at("profile"))
    return block


def _check_profile(value: Any, sweep: Sweep, where: str) -> None:
    """The scale block's `profile:`: a mapping of the file's profile keys, each at most the
    file's (a smaller grid, never a larger one)."""
    if sweep.profile is None:
        raise ScaleError(f"{where}: the file has no profile: block to scale")
    mapping(value, where, optional=PROFILE_KEYS)
    full = sweep.profile
    small = _profile({**full.to_dict(), **value}, where)
    for key, what, mine, file_s in (
        ("sizes", "largest size", max(small.sizes), max(full.sizes)),
        ("contexts", "largest context", max(small.contexts), max(full.contexts)),
        ("repeats", "repeats", small.repeats, full.repeats),
    ):
        if mine > file_s:
            raise ScaleError(f"{where}.{key}: {mine} is more than the file's {what} ({file_s})")


def _scaled(full: dict[str, Any], sweep: Sweep, block: dict[str, Any]) -> dict[str, Any]:
    """The document with the block applied; the methods' parameter grids are untouched."""
    small = {**full, "name": sweep.name + SUFFIX}
    sizes = {k: block[k] for k in ("prompts", "prompt_tokens") if k in block}
    if sizes:
        small["dataset"] = [
            {k: v for k, v in {**vars(d), **sizes}.items() if v is not None} for d in sweep.datasets
        ]
    for key in ("repeats", "warmup", "pairs"):
        if key in block:
            small[key] = block[key]
    if sweep.profile is not None:  # one repeat unless the block says otherwise
        small["profile"] = {**sweep.profile.to_dict(), "repeats": 1, **block.get("profile", {})}
    if "max_new_tokens" in block:
        small["max_new_tokens"] = block["max_new_tokens"]
        small["methods"] = [_without_lengths(m) for m in full["methods"]]
    return small


def _without_lengths(method: dict[str, Any]) -> dict[str, Any]:
    """A method entry without its own max_new_tokens (the scaled top-level one applies)."""
    out = dict(method)
    for key in ("params", "grid"):
        if "max_new_tokens" in out.get(key, {}):
            rest = {k: v for k, v in out[key].items() if k != "max_new_tokens"}
            if rest or key == "params":
                out[key] = rest
            else:
                del out[key]  # a grid over lengths only: the method's single point
    return out


def _lengths(sweep: Sweep) -> set[int]:
    """Every max_new_tokens a trial of the sweep can have."""
    out = set(sweep.max_new_tokens)
    for m in sweep.methods:
        if "max_new_tokens" in m.params:
            out.add(m.params["max_new_tokens"])
        out.update(m.grid.get("max_new_tokens", ()))
    return out


def _check_distinct(full: Sweep, small: Sweep, where: str) -> None:
    """A scaled trial differs from every full-scale one in its pair, its dataset selection
    (prompts, prompt_tokens) or its length, so its config hash does too."""
    if (
        set(full.pairs) & set(small.pairs)
        and set(full.datasets) & set(small.datasets)
        and _lengths(full) & _lengths(small)
    ):
        raise ScaleError(
            f"{where}: its trials would be the full run's own: give prompts, prompt_tokens or "
            "max_new_tokens below the file's, or other pairs"
        )


def announce(log: Callable[[str], None], path: str, scaled: bool) -> Callable[[str], None]:
    """`log` that first says which scale runs (its first message comes after validation, so
    a bad file still gives one error line)."""
    said = []

    def out(line: str) -> None:
        if not said:
            said.append(True)
            try:
                scale_line = describe(read_yaml(Path(path)), scaled)
            except ConfigError:
                scale_line = ""
            if scale_line:
                log(scale_line)
        log(line)

    return out


def provenance(path: str | Path, scaled: bool) -> dict[str, Any]:
    """What a stored sweep keeps of its file beside the normalised spec (`source` in
    sweeps.spec, for `orch report`): the file's name, its leading comment (the paper, section
    and table it reproduces, as examples/*.yaml state them) and, with --scale, the scale:
    block that ran (None: the file's own sizes)."""
    p = Path(path)
    try:
        data = read_yaml(p)
        lines = p.read_text(encoding="utf-8").splitlines()
    except (ConfigError, OSError):  # load_sweep read it a moment ago; nothing to add then
        data, lines = None, []
    comment = []
    for line in lines:
        if not line.startswith("#"):
            break
        comment.append(line[1:].removeprefix(" ").rstrip())
    block = data.get("scale") if scaled and isinstance(data, dict) else None
    return {"file": p.name, "comment": "\n".join(comment), "scale": block}
