"""The sweep file: a strict loader and its expansion into trial configs (DESIGN.md, "Sweep file").

```yaml
name: dynatree-grid                 # required; a sweep is identified by its name
description: ...                    # optional
pairs: [{target: T, draft: D}, ...] # required; cross-model comparisons
dataset: {name: wikitext2, prompts: 10, prompt_tokens: 256, category: null, chat: null}
                                    # or a list of such mappings (one more grid axis);
                                    # default {name: spec_bench, prompts: 10}
sampling: {temperature: 0.0, top_p: 1.0}   # each a number or a list (grid axes)
  # and/or explicit settings beside the grid (Delayed Tree Expansion's 8: T at top-p 1, plus
  # T=1 at top-p 0.9 and 0.99): points: [{temperature: 1.0, top_p: 0.9}, ...] (top_p
  # defaults to 1.0); with points only, the grid is empty instead of its default T=0, top-p 1
  # draft_temperature / draft_top_p: the draft's own sampling (DySpec Sec. 5.1 drafts at 0.6
  # for targets at 0 and 0.6), each a number, null (= the target's, the default) or a list
  # (more grid axes); a point may set them too (its own, default null)
max_new_tokens: 128                 # a number or a list; default for every method
repeats: 1                          # repeat r runs with seed + r
seed: 0
warmup: 0                           # generations per actor and pair before timing
max_attempts: 3                     # dispatches of a trial whose worker died
device: auto                        # auto | cpu | cuda | cuda:N
dtype: auto                         # auto | float32 | bfloat16 | float16, or per role:
                                    # {target: float32, draft: bfloat16}
engine: eager                       # eager | fast | compiled, or a list (a grid axis)
certify: true                       # per-trial losslessness certificate (engine/certify.py)
limits: {max_trials: 100000}        # caps (orchestrator/limits.py), each optional
scale: {prompts: 4, max_new_tokens: 32}  # sizes for `orch submit --scale` (orchestrator/scale.py)
profile: {sizes: [1, 2, 4], contexts: [128, 512], repeats: 3}  # or `true` for `orch profile`'s
                                    # defaults: one profile trial per pair and engine
methods:                            # required, non-empty
  - name: dynatree                  # a key of engine.drafters.DRAFTERS
    params: {verifier: greedy}      # fixed values
    grid: {depth: [3, 4], branch: [2, 3]}   # cartesian product, lists only, never empty
```

A `profile:` block adds, per pair and engine (and so per placement and dtypes, which are the
sweep's), one trial of kind `profile` (records.PROFILE): the worker that runs it measures the
forward-cost curves (engine/profile.py) of the pair's target and draft on its own device and
the driver stores them in `profiles` with the trial's status (Store.record_result), replacing
an earlier profile of the same device, model, dtype and engine, as `orch profile` does. Its
keys default to `orch profile`'s options: sizes 1..256, contexts 128, 512, 1024, repeats 3;
sizes and contexts are lists of integers or comma-separated strings ("1,2,4"), sizes at most
limits.max_tree_nodes + 1 (a verification forward's tokens). Profile trials have no dataset,
no result row and no speedup: query, compare, plot and export never see them.

Precedence of `max_new_tokens`: a method's own `params`/`grid` value wins for that method's
trials; otherwise the top-level `max_new_tokens` applies (a list there is a grid axis for every
method that does not set its own); otherwise 128.

Validation is strict and happens before any database write or model load: unknown keys are
rejected with their path, method parameters are type-checked against the method's config
dataclass (YAML values must already have the right type), every combination is resolved with
`engine.methods.resolve_method` (range checks, the verifier's pairing with the method's
tree sampling at each temperature), models are resolved by name and the
dataset selection is loaded. The file must be UTF-8 and may not repeat a key in a mapping.
Names are checked against the database's columns, counts against the caps (`limits:`; the
grid's size is computed before it is expanded), tree sizes against the node cap and tree widths
against the models' vocabularies. Errors are `SpecError`, one line naming the file and path.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.config import ENGINES, ConfigError
from engine.model_names import canonical_name
from engine.profile import DEFAULT_CONTEXTS, DEFAULT_REPEATS, DEFAULT_SIZES, parse_ints
from engine.profile import check_grid as check_profile_grid
from orchestrator.limits import (
    DEFAULT,
    MODEL_MAX,
    NAME_MAX,
    NAMES,
    Limits,
    check_grid,
    check_tree,
    text_problem,
)
from orchestrator.records import PROFILE, TrialConfig
from orchestrator.yaml_file import read_yaml

DEFAULT_MAX_NEW_TOKENS = 128
_EXTRA_PARAMS = ("verifier", "max_new_tokens")  # accepted by every method
_YAML11_FLOAT = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")  # `1e-2` is a string in YAML 1.1
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes unsigned 64-bit seeds


class SpecError(ConfigError):
    """The sweep file is invalid; the message names the file and the offending path."""


DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")


@dataclass(frozen=True)
class DatasetSel:
    name: str
    prompts: int
    prompt_tokens: int | None = None
    category: str | None = None
    chat: bool | None = None


@dataclass(frozen=True)
class MethodSpec:
    name: str
    params: dict[str, Any]
    grid: dict[str, tuple]


@dataclass(frozen=True)
class ProfileSpec:
    """A sweep's `profile:` block: the grid every profile trial measures (engine/profile.py
    measure_curve), sorted and without repeats so that equal grids hash alike."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    repeats: int = DEFAULT_REPEATS

    def to_dict(self) -> dict[str, Any]:
        """The grid as a profile trial's params (and the stored spec's `profile`)."""
        return {"sizes": list(self.sizes), "contexts": list(self.contexts), "repeats": self.repeats}


@dataclass(frozen=True)
class Sweep:
    name: str
    pairs: tuple[tuple[str, str], ...]
    datasets: tuple[DatasetSel, ...]
    temperatures: tuple[float, ...]  # the temperature x top_p grid (both empty: no grid)
    top_ps: tuple[float, ...]
    max_new_tokens: tuple[int, ...]
    methods: tuple[MethodSpec, ...]
    repeats: int = 1
    seed: int = 0
    warmup: int = 0
    max_attempts: int = 3
    device: str = "auto"
    dtype: str = "auto"  # the target's (and the draft's unless draft_dtype)
    draft_dtype: str | None = None
    engines: tuple[str, ...] = ("eager",)
    description: str = ""
    limits: Limits = DEFAULT
    # explicit (temperature, top_p, draft_temperature, draft_top_p) settings
    points: tuple[tuple[float, float, float | None, float | None], ...] = ()
    draft_temperatures: tuple[float | None, ...] = (None,)  # grid axes; None: the target's
    draft_top_ps: tuple[float | None, ...] = (None,)
    certify: bool = True
    profile: ProfileSpec | None = None  # None: no profile trials

    @property
    def settings(self) -> tuple[tuple[float, float, float | None, float | None], ...]:
        """Every (temperature, top_p, draft_temperature, draft_top_p) the sweep runs: the
        grid, then the explicit points."""
        grid = itertools.product(
            self.temperatures, self.top_ps, self.draft_temperatures, self.draft_top_ps
        )
        return tuple(grid) + self.points

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec, JSON-ready (stored with the sweep)."""
        return {
            "name": self.name,
            "description": self.description,
            "pairs": [{"target": t, "draft": d} for t, d in self.pairs],
            "datasets": [vars(d) for d in self.datasets],
            "sampling": {"temperature": list(self.temperatures), "top_p": list(self.top_ps)}
            | ({"points": [_point(x) for x in self.points]} if self.points else {})
            | (  # only when set: the stored spec of a sweep without them is unchanged
                {"draft_temperature": list(self.draft_temperatures)}
                if self.draft_temperatures != (None,)
                else {}
            )
            | ({"draft_top_p": list(self.draft_top_ps)} if self.draft_top_ps != (None,) else {}),
            "max_new_tokens": list(self.max_new_tokens),
            "repeats": self.repeats,
            "seed": self.seed,
            "warmup": self.warmup,
            "max_attempts": self.max_attempts,
            "device": self.device,
            "dtype": (
                self.dtype
                if self.draft_dtype is None
                else {"target": self.dtype, "draft": self.draft_dtype}
            ),
            "engine": list(self.engines),
            **({} if self.certify else {"certify": False}),
            **({} if self.profile is None else {"profile": self.profile.to_dict()}),
            "limits": vars(self.limits),
            "methods": [
                {
                    "name": m.name,
                    "params": m.params,
                    "grid": {k: list(v) for k, v in m.grid.items()},
                }
                for m in self.methods
            ],
        }


# ----------------------------------------------------------------------------- loading


def load_sweep(
    path: str | Path, local_models: bool = True, scaled: bool = False
) -> tuple[Sweep, list[TrialConfig]]:
    """Read, parse and validate a sweep file; returns the sweep and its expanded trials.
    scaled: run its `scale:` block (orchestrator/scale.py), else the file's own sizes.

    Model names are checked against the registries (real models need not be fetched here:
    workers fetch them on first use). local_models=False (a driver for a remote cluster): a
    model given as a folder path is checked by the worker that loads it."""
    path = Path(path)
    try:
        data = read_yaml(path)
    except ConfigError as e:
        raise SpecError(str(e)) from None
    from orchestrator.scale import apply_scale

    sweep = parse_sweep(apply_scale(data, str(path), scaled), source=str(path))
    try:
        check_grid(sweep, sweep.limits)  # before expanding: a huge grid fails here, at once
    except ConfigError as e:
        raise SpecError(f"{path}: {e}") from None
    return sweep, expand(sweep, source=str(path), local_models=local_models)


def parse_sweep(data: Any, source: str = "sweep") -> Sweep:
    """Structural parse of the YAML document (types, unknown keys, ranges)."""
    top = _mapping(
        data,
        source,
        required=("name", "pairs", "methods"),
        optional=(
            "description",
            "dataset",
            "sampling",
            "max_new_tokens",
            "repeats",
            "seed",
            "warmup",
            "max_attempts",
            "device",
            "dtype",
            "engine",
            "certify",
            "limits",
            "profile",
        ),
        root=True,
    )
    at = lambda key: f"{source}: {key}"  # noqa: E731
    limits = _limits(top.get("limits", {}), at("limits"))
    name = _str(top["name"], at("name"))
    if not name.strip():
        raise SpecError(f"{at('name')}: must not be empty")
    _name(name, at("name"), NAME_MAX)
    pairs = []
    for i, p in enumerate(_list(top["pairs"], at("pairs"))):
        m = _mapping(p, at(f"pairs[{i}]"), required=("target", "draft"))
        target = _name(_str(m["target"], at(f"pairs[{i}].target")), at(f"pairs[{i}].target"))
        draft = _name(_str(m["draft"], at(f"pairs[{i}].draft")), at(f"pairs[{i}].draft"))
        pairs.append((canonical_name(target), canonical_name(draft)))  # hub ids: short names
    ds = top.get("dataset", {"name": "spec_bench", "prompts": 10})
    ds_list = ds if isinstance(ds, list) else [ds]
    ds_where = (
        (lambda i: at(f"dataset[{i}]")) if isinstance(ds, list) else (lambda i: at("dataset"))
    )
    datasets = tuple(
        _dataset(d, ds_where(i), limits.max_prompts)
        for i, d in enumerate(_list(ds_list, at("dataset")))
    )
    sampling = _mapping(
        top.get("sampling", {}), at("sampling"), optional=SAMPLING_KEYS + ("points",)
    )
    temps, top_ps, draft_temps, draft_top_ps, points = _sampling(sampling, at("sampling"))
    mnt = _axis(
        top.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS),
        at("max_new_tokens"),
        lambda v, w: _int(v, w, lo=1, hi=limits.max_new_tokens, cap="limits.max_new_tokens"),
    )
    methods = tuple(
        _method(m, at(f"methods[{i}]")) for i, m in enumerate(_list(top["methods"], at("methods")))
    )
    device = _str(top.get("device", "auto"), at("device"))
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", device):
        raise SpecError(f"{at('device')}: {device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    dtype, draft_dtype = _dtypes(top.get("dtype", "auto"), at("dtype"))
    engines = _axis(top.get("engine", "eager"), at("engine"), _engine)
    repeats = _int(top.get("repeats", 1), at("repeats"), lo=1)
    seed = _int(top.get("seed", 0), at("seed"), lo=0, hi=SEED_MAX)
    if seed + repeats - 1 > SEED_MAX:
        raise SpecError(
            f"{at('seed')}: seed + repeats - 1 must be <= {SEED_MAX} (repeat r runs with "
            f"seed + r), got seed {seed} and repeats {repeats}"
        )
    warmup = top.get("warmup", 0)
    return Sweep(
        name=name,
        pairs=tuple(pairs),
        datasets=datasets,
        temperatures=temps,
        top_ps=top_ps,
        points=points,
        draft_temperatures=draft_temps,
        draft_top_ps=draft_top_ps,
        certify=_bool(top.get("certify", True), at("certify")),
        max_new_tokens=mnt,
        methods=methods,
        repeats=repeats,
        seed=seed,
        warmup=_int(warmup, at("warmup"), lo=0, hi=limits.max_warmup, cap="limits.max_warmup"),
        max_attempts=_int(top.get("max_attempts", 3), at("max_attempts"), lo=1),
        device=device,
        dtype=dtype,
        draft_dtype=draft_dtype,
        engines=engines,
        description=_str(top.get("description", ""), at("description")),
        limits=limits,
        profile=_profile(top.get("profile", False), at("profile"), limits),
    )


PROFILE_KEYS = ("sizes", "contexts", "repeats")


def _profile(value: Any, where: str, limits: Limits = DEFAULT) -> ProfileSpec | None:
    """`profile: true` (orch profile's defaults), `false` (none, as without the key) or a
    mapping of sizes, contexts and repeats, checked by engine.profile.check_grid."""
    if isinstance(value, bool):
        return ProfileSpec() if value else None
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected true, false or a mapping of {', '.join(PROFILE_KEYS)}")
    m = _mapping(value, where, optional=PROFILE_KEYS)
    base = ProfileSpec()
    sizes = _ints(m.get("sizes", list(base.sizes)), f"{where}.sizes")
    contexts = _ints(m.get("contexts", list(base.contexts)), f"{where}.contexts")
    repeats = _int(m.get("repeats", base.repeats), f"{where}.repeats")
    try:
        check_profile_grid(sizes, contexts, repeats)
    except ConfigError as e:
        raise SpecError(f"{where}: {e}") from None
    cap = limits.max_tree_nodes + 1  # a verification forward: the tree's nodes and its root
    if max(sizes) > cap:
        raise SpecError(
            f"{where}.sizes: must be <= {cap} (limits.max_tree_nodes + 1), got {max(sizes)}"
        )
    return ProfileSpec(tuple(sorted(set(sizes))), tuple(sorted(set(contexts))), repeats)


def _ints(value: Any, where: str) -> list[int]:
    """A list of integers, or the comma-separated string `orch profile --sizes` takes."""
    if isinstance(value, str):
        try:
            return parse_ints(value, where)
        except ConfigError as e:
            raise SpecError(str(e)) from None
    return [_int(v, f"{where}[{j}]") for j, v in enumerate(_list(value, where))]


def _dtype(value: Any, where: str) -> str:
    dtype = _str(value, where)
    if dtype not in DTYPES:
        raise SpecError(f"{where}: {dtype!r} is not one of auto, float32, bfloat16, float16")
    return dtype


def _dtypes(value: Any, where: str) -> tuple[str, str | None]:
    """`dtype: bf16` for both models, or `dtype: {target: fp32, draft: bf16}` per role
    (draft_dtype None: the draft runs in the target's dtype)."""
    if not isinstance(value, dict):
        return _dtype(value, where), None
    m = _mapping(value, where, optional=("target", "draft"))
    target = _dtype(m.get("target", "auto"), f"{where}.target")
    draft = _dtype(m.get("draft", target), f"{where}.draft")
    return target, None if draft == target else draft


def _engine(value: Any, where: str) -> str:
    if value not in ENGINES:
        raise SpecError(f"{where}: {value!r} is not one of {', '.join(ENGINES)}")
    return value


def _limits(value: Any, where: str) -> Limits:
    m = _mapping(value, where, optional=NAMES)
    return Limits(**{k: _int(v, f"{where}.{k}", lo=int(k != "max_warmup")) for k, v in m.items()})


def _name(value: str, where: str, max_len: int = MODEL_MAX) -> str:
    """A name the database stores: it fits its column and holds no control characters."""
    problem = text_problem(value, max_len)
    if problem:
        raise SpecError(f"{where}: {problem}")
    return value


def _dataset(value: Any, where: str, max_prompts: int) -> DatasetSel:
    from engine.datasets import default_category  # spec_bench: "all" (its 6 tasks)

    m = _mapping(
        value, where, required=("name",), optional=("prompts", "prompt_tokens", "category", "chat")
    )
    pt, cat, chat = m.get("prompt_tokens"), m.get("category"), m.get("chat")
    return DatasetSel(
        name=_str(m["name"], f"{where}.name"),
        prompts=_int(
            m.get("prompts", 10), f"{where}.prompts", lo=1, hi=max_prompts, cap="limits.max_prompts"
        ),
        prompt_tokens=None if pt is None else _int(pt, f"{where}.prompt_tokens", lo=1),
        category=default_category(m["name"]) if cat is None else _str(cat, f"{where}.category"),
        chat=None if chat is None else _bool(chat, f"{where}.chat"),
    )


def _method(value: Any, where: str) -> MethodSpec:
    m = _mapping(value, where, required=("name",), optional=("params", "grid"))
    name = _str(m["name"], f"{where}.name")
    params = dict(_mapping(m.get("params", {}), f"{where}.params"))
    grid: dict[str, tuple] = {}
    if "grid" in m:
        g = _mapping(m["grid"], f"{where}.grid")
        if not g:
            raise SpecError(f"{where}.grid: empty grid (give at least one parameter with values)")
        for key, values in g.items():
            if not isinstance(values, list):
                raise SpecError(f"{where}.grid.{key}: expected a list of values, got {values!r}")
            if not values:
                raise SpecError(f"{where}.grid.{key}: empty grid axis (give at least one value)")
            if key in params:
                raise SpecError(f"{where}.grid.{key}: also set in {where}.params")
            grid[str(key)] = tuple(values)
    return MethodSpec(name=name, params=params, grid=grid)


# ----------------------------------------------------------------------------- expansion


def expand(sweep: Sweep, source: str = "sweep", local_models: bool = True) -> list[TrialConfig]:
    """Check models, dataset and every method combination; return the trials in order.

    Order: the profile trials (pair, engine), then pair, dataset, sampling setting (the
    temperature x top_p grid, then the explicit points), method, grid point,
    max_new_tokens, engine, repeat.
    Configs that resolve identically are kept once.
    """
    from engine.datasets import DatasetError, load_prompts
    from engine.drafters import MODEL_FREE
    from engine.models import NO_DRAFT, resolve

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
                resolve(name, local=local_models)
            except ConfigError as e:
                raise SpecError(f"{source}: pairs[{i}].{role}: {e}") from None
    for d in sweep.datasets:
        try:
            load_prompts(d.name, n=d.prompts, category=d.category)
        except DatasetError as e:
            raise SpecError(f"{source}: dataset: {e}") from None
    # (method index, temperature, draft temperature or None) -> list of (params,
    # max_new_tokens axis, method)
    points = {}
    for t, dt in dict.fromkeys((t, _apart(dt, t)) for t, _, dt, _ in sweep.settings):
        for i, m in enumerate(sweep.methods):
            points[i, t, dt] = _method_points(
                m, t, sweep.max_new_tokens, f"{source}: methods[{i}]", sweep.limits, dt
            )
    _check_vocabularies(sweep, points, source)
    trials: dict[str, TrialConfig] = {}
    for cfg in profile_trials(sweep):
        trials.setdefault(cfg.config_hash, cfg)
    for (target, draft), d, (t, p, dt, dp) in itertools.product(
        sweep.pairs, sweep.datasets, sweep.settings
    ):
        for i, m in enumerate(sweep.methods):
            for params, mnts, _ in points[i, t, _apart(dt, t)]:
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
                        draft_temperature=dt,
                        draft_top_p=dp,
                        certify=sweep.certify,
                    )
                    trials.setdefault(cfg.config_hash, cfg)
    return list(trials.values())


def profile_trials(sweep: Sweep) -> list[TrialConfig]:
    """One profile trial per pair and engine of a sweep with a `profile:` block (the sweep's
    device and dtypes are its own; orchestrator.spec.place resolves them like any trial's).
    It has no dataset, prompts or length: its identity is the pair, placement, dtypes,
    engine and the grid in `params`."""
    if sweep.profile is None:
        return []
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
        )
        for target, draft in sweep.pairs
        for e in sweep.engines
    ]


def place(trials: list[TrialConfig], device: str) -> list[TrialConfig]:
    """The trials as they will run: device `auto` becomes `device` (where the executor puts
    them: orchestrator.preflight.placement) and dtype `auto` (each role's) what the model
    loads as there (engine.models.auto_dtype), so that a trial's hash names where and how it
    ran and a CPU run and a GPU run of one sweep file are two results, not one.

    Trials stored before this resolution existed hold `auto` in their config: they keep
    their rows and results, but a resubmission gets a new identity (new hash) for them and
    runs them again. Configs that were explicit (e.g. device cpu, dtype float32) keep their
    hashes. Configs that resolve alike are kept once, in order."""
    from engine.models import NO_DRAFT, auto_dtype

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
    from engine.models import NO_DRAFT, vocab_size
    from engine.tree_bounds import check_vocab

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
    from engine.config import config_fields
    from engine.drafters import DRAFTERS
    from engine.methods import method_params, resolve_method

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
                _check_type(v, types_[key], path)
                if key == "max_new_tokens":
                    _int(v, path, lo=1, hi=limits.max_new_tokens, cap="limits.max_new_tokens")
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


# ----------------------------------------------------------------------------- strict values


def _check_type(value: Any, tp: Any, where: str) -> None:
    """YAML values must already have the annotated type (no string -> number coercion)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            choices = ", ".join(map(str, typing.get_args(tp)))
            raise SpecError(f"{where}: {value!r} is not one of {choices}")
    elif origin in (typing.Union, types.UnionType):
        if value is not None:
            _check_type(value, [a for a in typing.get_args(tp) if a is not type(None)][0], where)
    elif origin is tuple:
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {value!r}")
        item = [a for a in typing.get_args(tp) if a is not Ellipsis][0]
        for v in value:
            _check_type(v, item, where)
    elif tp is bool:
        _bool(value, where)
    elif tp is int:
        _int(value, where)
    elif tp is float:
        _number(value, where)
    elif tp is str:
        _str(value, where)


def _mapping(
    value: Any,
    where: str,
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] | None = None,
    root: bool = False,
) -> dict:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a mapping, got {_shown(value)}")
    if optional is not None:
        known = required + optional
        for key in value:
            if key not in known:
                path = f"{where}: {key}" if root else f"{where}.{key}"
                raise SpecError(f"{path}: unknown key (known: {', '.join(known)})")
    for key in required:
        if key not in value:
            raise SpecError(f"{where}: missing required key {key!r}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise SpecError(f"{where}: expected a list, got {_shown(value)}")
    if not value:
        raise SpecError(f"{where}: empty list (give at least one entry)")
    return value


def _temperature(value: Any, where: str) -> float:
    return _number(value, where, lo=0.0)


def _top_p(value: Any, where: str) -> float:
    return _number(value, where, lo=0.0, hi=1.0, lo_open=True)


SAMPLING_KEYS = ("temperature", "top_p", "draft_temperature", "draft_top_p")


def _or_none(check):
    """A check that lets null through (a draft setting: null = the target's)."""
    return lambda value, where: None if value is None else check(value, where)


def _apart(draft: float | None, target: float) -> float | None:
    """A draft setting, None where it equals the target's (engine/sampling.py draft_warp)."""
    return None if draft is None or draft == target else draft


def _point(x: tuple) -> list:
    """A stored point: [temperature, top_p] plus the draft's settings where set."""
    return list(x[:2]) if x[2:] == (None, None) else list(x)


def _sampling(sampling: dict, where: str) -> tuple[tuple, tuple, tuple, tuple, tuple]:
    """(temperatures, top_ps, draft_temperatures, draft_top_ps, points): the grid axes and the
    explicit settings. Without `points` the grid defaults to temperature 0, top_p 1; with
    `points` only, there is no grid. The draft's axes default to (None,): the target's
    settings. A point repeated, or already in the grid, is an error."""
    gridded = "temperature" in sampling or "top_p" in sampling or "points" not in sampling
    temps = _axis(sampling.get("temperature", 0.0), f"{where}.temperature", _temperature)
    top_ps = _axis(sampling.get("top_p", 1.0), f"{where}.top_p", _top_p)
    if not gridded:
        temps, top_ps = (), ()
    draft_temps = _axis(
        sampling.get("draft_temperature"), f"{where}.draft_temperature", _or_none(_temperature)
    )
    draft_top_ps = _axis(sampling.get("draft_top_p"), f"{where}.draft_top_p", _or_none(_top_p))
    seen = set(itertools.product(temps, top_ps, draft_temps, draft_top_ps))
    points = []
    raw = _list(sampling["points"], f"{where}.points") if "points" in sampling else []
    for j, point in enumerate(raw):
        at = f"{where}.points[{j}]"
        point = _mapping(point, at, required=("temperature",), optional=SAMPLING_KEYS[1:])
        dt, dp = point.get("draft_temperature"), point.get("draft_top_p")
        x = (
            _temperature(point["temperature"], f"{at}.temperature"),
            _top_p(point.get("top_p", 1.0), f"{at}.top_p"),
            None if dt is None else _temperature(dt, f"{at}.draft_temperature"),
            None if dp is None else _top_p(dp, f"{at}.draft_top_p"),
        )
        if x in seen:
            drafted = "".join(
                f", {k} {v:g}"
                for k, v in zip(("draft_temperature", "draft_top_p"), x[2:])
                if v is not None
            )
            raise SpecError(
                f"{at}: temperature {x[0]:g}, top_p {x[1]:g}{drafted} is given twice "
                "(already a point or in the temperature x top_p grid)"
            )
        seen.add(x)
        points.append(x)
    return temps, top_ps, draft_temps, draft_top_ps, tuple(points)


def _axis(value: Any, where: str, check) -> tuple:
    if isinstance(value, list):
        return tuple(check(v, f"{where}[{j}]") for j, v in enumerate(_list(value, where)))
    return (check(value, where),)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where}: expected a string, got {_shown(value)}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: expected true or false, got {_shown(value)}")
    return value


def _int(
    value: Any, where: str, lo: int | None = None, hi: int | None = None, cap: str = ""
) -> int:
    """An integer in [lo, hi]; `cap` names where `hi` comes from (a limits key)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}: expected an integer, got {_shown(value)}")
    if lo is not None and value < lo:
        raise SpecError(f"{where}: must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise SpecError(f"{where}: must be <= {hi}{f' ({cap})' if cap else ''}, got {value}")
    return value


def _number(
    value: Any, where: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    if isinstance(value, str) and _YAML11_FLOAT.match(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where}: expected a number, got {_shown(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise SpecError(f"{where}: must be a finite number, got {_shown(value)}")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise SpecError(f"{where}: must be {'>' if lo_open else '>='} {lo}, got {value}")
    if hi is not None and value > hi:
        raise SpecError(f"{where}: must be <= {hi}, got {value}")
    return float(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
