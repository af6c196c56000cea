"""A method as a trial runs it: drafter name, parsed config, verifier; resolved once, strictly.

`resolve_method` is the one place that checks a method against the registries (engine/drafters,
engine/verify): the drafter's parameters (engine/config.py) and the pairing of the drafter's
tree sampling (its `SAMPLING`, at the draft's temperature) with the verifier's declared modes
(its `MODES`, at the target's temperature). The draft's temperature is the target's unless a
trial sets it apart (engine/sampling.py draft_warp): a greedy target with a sampling draft
builds i.i.d. / without-replacement trees that the greedy verifier checks exactly; a sampling
target with a greedy draft builds deterministic trees, which only NSS verifies losslessly.
The CLI and the sweep loader call it before any model loads, so a bad pairing is one clear
line, never a failed trial.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from engine.config import ConfigError, parse_config
from engine.drafters import DRAFTERS, MODEL_FREE
from engine.verify import ALIASES, VERIFIERS, canonical


@dataclass(frozen=True)
class Method:
    """A resolved method: drafter name, its parsed config, and the verifier to use."""

    name: str
    cfg: Any
    verifier: str


def default_verifier(
    method: str, temperature: float, draft_temperature: float | None = None
) -> str:
    """greedy at target temperature 0; above it the drafter's default, or NSS (lossless for
    every tree) where a draft temperature set apart makes the trees something the default
    does not verify."""
    if temperature == 0.0:
        return "greedy"
    default = DRAFTERS[method].default_verifier
    if default in compatible_verifiers(method, temperature, draft_temperature):
        return default
    return "nss"


def compatible_verifiers(
    method: str, temperature: float, draft_temperature: float | None = None
) -> list[str]:
    """The verifiers that are lossless for `method`'s trees, drawn at `draft_temperature`
    (None: `temperature`), against a target at `temperature`."""
    mode = tree_sampling(method, temperature if draft_temperature is None else draft_temperature)
    return [v for v, spec in VERIFIERS.items() if spec.accepts(mode, temperature)]


def tree_sampling(method: str, temperature: float) -> str | None:
    """How `method`'s trees are drawn at (draft) `temperature`; None for root-only trees."""
    sampling = DRAFTERS[method].sampling
    return None if sampling is None else sampling.at(temperature == 0.0)


def resolve_method(
    method: str,
    params: dict[str, Any] | None = None,
    temperature: float = 0.0,
    draft_temperature: float | None = None,
) -> Method:
    """Validate a method name, its parameters (strings or typed) and its verifier pairing at
    target `temperature` with trees drawn at `draft_temperature` (None: the target's);
    ConfigError (one line) if anything is wrong."""
    if method not in DRAFTERS:
        raise ConfigError(f"unknown method {method!r} (known: {', '.join(DRAFTERS)})")
    params = dict(params or {})
    verifier = canonical(params.pop("verifier", None)) or default_verifier(
        method, temperature, draft_temperature
    )  # an alias (tv) resolves to the verifier whose law it is (engine/verify ALIASES)
    if verifier not in VERIFIERS:
        known = ", ".join([*VERIFIERS, *(f"{a} (= {v})" for a, v in ALIASES.items())])
        raise ConfigError(f"unknown verifier {verifier!r} (known: {known})")
    ok = compatible_verifiers(method, temperature, draft_temperature)
    if verifier not in ok:
        dt = temperature if draft_temperature is None else draft_temperature
        mode = tree_sampling(method, dt) or "root-only"
        drafted = "" if dt == temperature else f" with a draft at temperature {dt:g}"
        raise ConfigError(
            f"verifier {verifier!r} is not lossless for method {method!r} at "
            f"temperature {temperature:g}{drafted} (its trees are {mode}); compatible "
            f"verifiers: {', '.join(ok)}"
        )
    cfg = parse_config(DRAFTERS[method].config, params, where=f"method {method!r}")
    return Method(name=method, cfg=cfg, verifier=verifier)


def method_params(m: Method) -> dict[str, Any]:
    """The fully resolved parameters of a method (defaults filled in), verifier included;
    parameters added later (engine/config.py ADDED_LATER) only where they differ from their
    default."""
    out = {
        f.name: getattr(m.cfg, f.name)
        for f in fields(m.cfg)
        if not (f.metadata.get("omit_at_default") and getattr(m.cfg, f.name) == f.default)
    }
    out["verifier"] = m.verifier
    return out


def standalone(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """`params` with what `method` needs to run alone (no sweep measures anything first: orch
    generate, the benchmarks, the tests that run every method) filled in where they do not
    say: its record's `standalone` (Sequoia: its fixed profile). An unknown method's are left
    as they are, for resolve_method to name."""
    record = DRAFTERS.get(method)
    return {**dict(record.standalone if record else ()), **(params or {})}


def check_standalone(m: Method) -> None:
    """ConfigError (one line) for a config that needs what only a sweep measures first (its
    record's `measured_first`: Sequoia's measured profile, orchestrator/acceptance.py)."""
    first = DRAFTERS[m.name].measured_first
    why = first(m.cfg) if first is not None else None
    if why:
        alone = ", ".join(f"{k}={v}" for k, v in DRAFTERS[m.name].standalone)
        raise ConfigError(
            f"method {m.name!r}: {why}; alone, pass --param {alone} or explicit values "
            "(bench/sequoia_profile.py measures a profile)"
        )


def check_without_draft(method: str) -> None:
    """ConfigError (one line) unless `method` runs without a draft model (a pair with
    `draft: none`): the model-free methods (their record's `model_free`)."""
    if method not in MODEL_FREE:
        raise ConfigError(
            f"method {method!r} runs a draft model but the pair has none (draft: none); "
            f"model-free methods: {', '.join(sorted(MODEL_FREE))}"
        )
