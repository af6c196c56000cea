"""A parsed sweep expanded into trial configs (orchestrator/spec/parse.py, DESIGN.md "Sweep file"):
models, datasets and every method combination checked, the profile trials, the acceptance
trials of Sequoia's measured profiles, and the placement that resolves device and dtype `auto`
to where trials run."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from engine.config import ConfigError, config_fields
from engine.datasets import DatasetError, load_prompts
from orchestrator.acceptance import acceptance_trial, needs_profile
from orchestrator.hardware import device_for
from orchestrator.records import PROFILE, TrialConfig
from orchestrator.spec.limits import DEFAULT, Limits, check_tree
from orchestrator.spec.pairs import pair_commits
from orchestrator.spec.sources import prompt_file_key
from orchestrator.spec.types import MethodSpec, Sweep
from orchestrator.spec.values import SpecError, check_type, integer


def expand(sweep: Sweep, source: str = "sweep", local_models: bool = True) -> list[TrialConfig]:
    """Check models, dataset and every method combination; return the trials in order.

    Order: the profile trials (pair, engine), then pair, dataset, sampling setting (the
    temperature x top_p grid, then the explicit points), method, grid point,
    max_new_tokens, engine, repeat, hardware type (per_hardware).
    Configs that resolve identically are kept once.
    """
    from engine.drafters import MODEL_FREE  # lazy: torch
    from engine.models import NO_DRAFT, check_engine, check_positions  # lazy: torch

    commits = pair_commits(sweep, source, local_models)
    for i, (target, draft) in enumerate(sweep.pairs):
        needs = [m.name for m in sweep.methods if m.name not in MODEL_FREE]
        if draft == NO_DRAFT and needs:
            raise SpecError(
                f"{source}: pairs[{i}].draft: none, but method {needs[0]!r} runs a draft model "
                f"(model-free methods: {', '.join(sorted(MODEL_FREE))})"
            )
        for role, name in (("target", target), ("draft", draft)):
            if role == "draft" and name == NO_DRAFT:
                continue
            try:
                for engine in sweep.engines:  # ENGINE+lean: Llama / Qwen2 only
                    check_engine(engine, name)
            except ConfigError as e:
                raise SpecError(f"{source}: pairs[{i}].{role}: {e}") from None
            if sweep.profile is not None:
                p = sweep.profile
                try:
                    check_positions(name, max(p.contexts) + max(p.sizes) + 1, "contexts plus sizes")
                except ConfigError as e:
                    raise SpecError(f"{source}: profile: {e}") from None
    for d in sweep.datasets:
        if d.sha256 is not None:  # a user's file: read and selected when parsed (sources.py)
            continue
        try:
            load_prompts(d.name, n=d.prompts, category=d.category)
        except DatasetError as e:
            raise SpecError(f"{source}: dataset: {e}") from None
    # (method index, temperature, draft temperature or None) -> list of (params,
    # max_new_tokens axis, method)
    points = {}
    for i, m in enumerate(sweep.methods):
        own = ((t, _apart(m.draft(dt, dp)[0], t)) for t, _, dt, dp in sweep.settings)
        for t, dt in dict.fromkeys(own):
            points[i, t, dt] = _method_points(
                m, t, sweep.max_new_tokens, f"{source}: methods[{i}]", sweep.limits, dt
            )
    _check_vocabularies(sweep, points, source)
    trials: dict[str, TrialConfig] = {}
    for cfg in profile_trials(sweep, commits):
        trials.setdefault(cfg.config_hash, cfg)
    for (k, (target, draft)), d, (t, p, dt, dp) in itertools.product(
        enumerate(sweep.pairs), sweep.datasets, sweep.settings
    ):
        for i, m in enumerate(sweep.methods):
            mdt, mdp = m.draft(dt, dp)
            for params, mnts, _ in points[i, t, _apart(mdt, t)]:
                for mnt, e, r in itertools.product(mnts, sweep.engines, range(sweep.repeats)):
                    cfg = TrialConfig(
                        target=target,
                        draft=draft,
                        dataset=d.name,
                        prompts=d.prompts,
                        category=d.category,
                        prompt_tokens=d.prompt_tokens,
                        chat=d.chat,
                        temperature=t,
                        top_p=p,
                        method=m.name,
                        params=params,
                        max_new_tokens=mnt,
                        repeat=r,
                        seed=sweep.seed + r,
                        device=sweep.device,
                        dtype=sweep.dtype,
                        draft_dtype=sweep.draft_dtype,
                        engine=e,
                        draft_temperature=mdt,
                        draft_top_p=mdp,
                        certify=sweep.certify,
                        target_revision=commits[k][0],
                        draft_revision=commits[k][1],
                        prompt_file=prompt_file_key(d),
                        placement=sweep.placement,
                    )
                    trials.setdefault(cfg.config_hash, cfg)
    return per_hardware(with_acceptance_trials(list(trials.values())), sweep.hardware)


def with_acceptance_trials(trials: list[TrialConfig]) -> list[TrialConfig]:
    """The acceptance trials that Sequoia's measured profiles need (orchestrator/acceptance.py),
    one per key, first; then the trials."""
    first = {}
    for t in trials:
        if needs_profile(t):
            a = acceptance_trial(t)
            first.setdefault(a.config_hash, a)
    return [*first.values(), *trials]


def per_hardware(trials: list[TrialConfig], hardware: tuple[str, ...]) -> list[TrialConfig]:
    """Each trial once per hardware type (a sweep's `hardware:`), the type in its identity and
    `device` resolved for it (cpu, or cuda for a GPU type; an explicit device the parser
    checked is kept); without types, the trials as they are (hashes as before the key)."""
    if not hardware:
        return trials
    return [
        dataclasses.replace(t, hardware=h, device=device_for(h) if t.device == "auto" else t.device)
        for t in trials
        for h in hardware
    ]


def profile_trials(sweep: Sweep, commits: list | None = None) -> list[TrialConfig]:
    """One profile trial per pair and engine of a sweep with a `profile:` block (the sweep's
    device and dtypes are its own; place resolves them like any trial's).
    It has no dataset, prompts or length: its identity is the pair, placement, dtypes,
    engine and the grid in `params`."""
    if sweep.profile is None:
        return []
    commits = commits or [sweep.pair_revisions(k) for k in range(len(sweep.pairs))]
    return [
        TrialConfig(
            target=target,
            draft=draft,
            dataset="",
            prompts=0,
            method=PROFILE,
            params=sweep.profile.to_dict(),
            max_new_tokens=0,
            device=sweep.device,
            dtype=sweep.dtype,
            draft_dtype=sweep.draft_dtype,
            engine=e,
            target_revision=commits[k][0],
            draft_revision=commits[k][1],
            placement=sweep.placement,
        )
        for k, (target, draft) in enumerate(sweep.pairs)
        for e in sweep.engines
    ]


def place(trials: list[TrialConfig], device: str) -> list[TrialConfig]:
    """The trials as they will run: device `auto` becomes `device` (where the executor puts
    them: orchestrator.run.preflight.placement) and dtype `auto` (each role's) what the model
    loads as there (engine.models.auto_dtype), so that a trial's hash names where and how it
    ran and a CPU run and a GPU run of one sweep file are two results, not one.

    Trials stored before this resolution existed hold `auto` in their config: they keep
    their rows and results, but a resubmission gets a new identity (new hash) for them and
    runs them again. Configs that were explicit (e.g. device cpu, dtype float32) keep their
    hashes. Configs that resolve alike are kept once, in order."""
    from engine.models import NO_DRAFT, auto_dtype  # lazy: torch

    out: dict[str, TrialConfig] = {}
    for t in trials:
        dev = device if t.device == "auto" else t.device
        dtype = auto_dtype(t.target, dev) if t.dtype == "auto" else t.dtype
        draft_dtype = None
        if t.draft != NO_DRAFT:
            wanted = t.dtype if t.draft_dtype is None else t.draft_dtype
            draft_dtype = auto_dtype(t.draft, dev) if wanted == "auto" else wanted
            draft_dtype = None if draft_dtype == dtype else draft_dtype
        placed = dataclasses.replace(t, device=dev, dtype=dtype, draft_dtype=draft_dtype)
        out.setdefault(placed.config_hash, placed)
    return list(out.values())


def _check_vocabularies(sweep: Sweep, points: dict, source: str) -> None:
    """No node may need more distinct children than a pair's vocabulary (from the models'
    configs, before loading) has tokens."""
    from engine.models import NO_DRAFT, vocab_size  # lazy: torch
    from engine.tree_bounds import check_vocab  # lazy: torch

    for target, draft in sweep.pairs:
        names = (target,) if draft == NO_DRAFT else (target, draft)
        known = [(v, n) for n in names if (v := vocab_size(n)) is not None]
        if not known:
            continue
        vocab, model = min(known, key=lambda k: k[0])
        for (i, t, dt), pts in points.items():
            for _, _, method in pts:
                try:  # the tree's width depends on how the draft samples
                    check_vocab(method, t if dt is None else dt, vocab, model)
                except ConfigError as e:
                    raise SpecError(f"{source}: methods[{i}]: {e}") from None


def _method_points(
    m: MethodSpec,
    temperature: float,
    default_mnt: tuple[int, ...],
    where: str,
    limits: Limits = DEFAULT,
    draft_temperature: float | None = None,
) -> list[tuple[dict[str, Any], tuple[int, ...], Any]]:
    """Every grid point of one method as (resolved params, max_new_tokens values, method), its
    verifier paired with the trees of a draft at `draft_temperature` (None: `temperature`)."""
    from engine.drafters import DRAFTERS  # lazy: torch
    from engine.methods import method_params, resolve_method  # lazy: torch

    if m.name not in DRAFTERS:
        raise SpecError(f"{where}.name: unknown method {m.name!r} (known: {', '.join(DRAFTERS)})")
    types_ = {**config_fields(DRAFTERS[m.name].config), "verifier": str, "max_new_tokens": int}
    for section, values in (("params", {k: (v,) for k, v in m.params.items()}), ("grid", m.grid)):
        for key, vals in values.items():
            if key not in types_:
                known = ", ".join(k for k in types_ if k != "max_new_tokens") + ", max_new_tokens"
                raise SpecError(
                    f"{where}.{section}.{key}: unknown parameter {key!r} for method "
                    f"{m.name!r} (known: {known})"
                )
            for j, v in enumerate(vals):
                path = f"{where}.{section}.{key}" + (f"[{j}]" if section == "grid" else "")
                check_type(v, types_[key], path)
                if key == "max_new_tokens":
                    integer(v, path, lo=1, hi=limits.max_new_tokens, cap="limits.max_new_tokens")
    keys = list(m.grid)
    out, seen = [], set()
    for combo in itertools.product(*(m.grid[k] for k in keys)):
        raw = {**m.params, **dict(zip(keys, combo))}
        mnt = raw.pop("max_new_tokens", None)
        try:
            method = resolve_method(m.name, raw, temperature, draft_temperature)
            check_tree(method, limits)
            resolved = method_params(method)
        except ConfigError as e:
            shown = ", ".join(f"{k}={v}" for k, v in dict(zip(keys, combo)).items())
            at = f" (grid point {shown})" if shown else ""
            raise SpecError(f"{where}{at}: {e}") from None
        mnts = (mnt,) if mnt is not None else default_mnt
        key = (tuple(sorted(resolved.items())), mnts)
        if key not in seen:
            seen.add(key)
            out.append((resolved, mnts, method))
    return out


def _apart(draft: float | None, target: float) -> float | None:
    """A draft setting, None where it equals the target's (engine/sampling.py draft_warp)."""
    return None if draft is None or draft == target else draft
