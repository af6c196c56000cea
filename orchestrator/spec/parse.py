"""The sweep file parsed strictly into a Sweep (DESIGN.md, "Sweep file"); load.py reads the
file, applies its scale and expands it. The parsed types are in types.py, the strict value
checks in values.py, the expansion into trials and their placement in expand.py.

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
  # (more grid axes); a point may set them too (its own, default null), and so may a method
  # (its `sampling:` below, which wins over the sweep's for that method's trials)
max_new_tokens: 128                 # a number or a list; default for every method
repeats: 1                          # repeat r runs with seed + r
seed: 0
warmup: 0                           # generations per actor and pair before timing
max_attempts: 3                     # dispatches of a trial whose worker died
device: auto                        # auto | cpu | cuda | cuda:N
hardware: [H100, A100]              # optional: one trial per config and type (or one string);
                                    # GPU types as Ray names its nodes (`accelerator_type:H100`;
                                    # any case, stored upper case) or cpu; see below
dtype: auto                         # auto | float32 | bfloat16 | float16, or per role:
                                    # {target: float32, draft: bfloat16}
engine: eager                       # eager | fast | compiled | graphs, or a list (a grid axis);
                                    # fast+lean etc.: on our own forward (Llama / Qwen2)
certify: true                       # per-trial losslessness certificate
(engine/certify/teacher_forced.py)
limits: {max_trials: 100000}        # caps (orchestrator/spec/limits.py), each optional
scale: {prompts: 4, max_new_tokens: 32}  # sizes for `orch submit --scale` (spec/scale.py)
profile: {sizes: [1, 2, 4], contexts: [128, 512], repeats: 3}  # or `true` for `orch profile`'s
                                    # defaults: one profile trial per pair and engine
methods:                            # required, non-empty
  - name: dynatree                  # a key of engine.drafters.DRAFTERS
    params: {verifier: greedy}      # fixed values
    grid: {depth: [3, 4], branch: [2, 3]}   # cartesian product, lists only, never empty
    sampling: {draft_temperature: 0.0}      # optional: this method's draft sampling, one
                                    # number each (draft_temperature, draft_top_p), for every
                                    # sampling setting of the sweep (DDTree's vanilla-DFlash
                                    # chain: an argmax block verified by the target's samples)
```

A `profile:` block adds, per pair and engine (and so per placement and dtypes, which are the
sweep's), one trial of kind `profile` (records.PROFILE): the worker that runs it measures the
forward-cost curves (engine/curves.py) of the pair's target and draft on its own device and
the driver stores them in `profiles` with the trial's status (Store.record_result), replacing
an earlier profile of the same device, model, dtype and engine, as `orch profile` does. Its
keys default to `orch profile`'s options: sizes 1..256, contexts 128, 512, 1024, repeats 3;
sizes and contexts are lists of integers or comma-separated strings ("1,2,4"), sizes at most
limits.max_tree_nodes + 1 (a verification forward's tokens). Profile trials have no dataset,
no result row and no speedup: query, compare, plot and export never see them.

`hardware:` makes each config (profile trials too) once per listed type, the type part of
its identity (TrialConfig.hardware, in its hash and label): the same file on an H100 node and
an A100 node is two trials, two results, compared side by side. `device` resolves to cpu for
`cpu` and to cuda for a GPU type (`device: cpu` with a GPU type, or cuda with `cpu`, is an
error). The Ray executor runs a type's trials only on nodes of that type, the local executor
only this machine's own (orchestrator/run/preflight.py refuses the others before anything is
written). Without the key, trials and hashes are as before it existed.

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

import itertools
import re
from typing import Any

from engine.config import ENGINE_SPECS, ConfigError
from engine.cost_model import check_grid as check_profile_grid
from engine.cost_model import parse_ints
from engine.datasets import default_category  # spec_bench: "all" (its 6 tasks)
from orchestrator.spec.hardware import parse_hardware
from orchestrator.spec.limits import (
    DEFAULT,
    MODEL_MAX,
    NAME_MAX,
    NAMES,
    Limits,
    text_problem,
)
from orchestrator.spec.sources import FILE_KEYS, file_dataset, model_entry, placement
from orchestrator.spec.types import DatasetSel, MethodSpec, ProfileSpec, Sweep
from orchestrator.spec.values import (
    SpecError,
    axis,
    boolean,
    integer,
    mapping,
    nonempty_list,
    or_none,
    string,
    temperature,
    top_p,
)

DEFAULT_MAX_NEW_TOKENS = 128
_EXTRA_PARAMS = ("verifier", "max_new_tokens")  # accepted by every method
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes unsigned 64-bit seeds

DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")


def parse_sweep(data: Any, source: str = "sweep") -> Sweep:
    """Structural parse of the YAML document (types, unknown keys, ranges)."""
    top = mapping(
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
            "hardware",
            "dtype",
            "engine",
            "certify",
            "limits",
            "profile",
            "placement",
        ),
        root=True,
    )
    at = lambda key: f"{source}: {key}"  # noqa: E731
    limits = _limits(top.get("limits", {}), at("limits"))
    name = string(top["name"], at("name"))
    if not name.strip():
        raise SpecError(f"{at('name')}: must not be empty")
    _name(name, at("name"), NAME_MAX)
    pairs, revisions = [], []
    for i, p in enumerate(nonempty_list(top["pairs"], at("pairs"))):
        m = mapping(p, at(f"pairs[{i}]"), required=("target", "draft"))
        # a name, or {name, revision} (sources.py); the real pair's hub ids: its short names
        target, t_rev = model_entry(m["target"], at(f"pairs[{i}].target"))
        draft, d_rev = model_entry(m["draft"], at(f"pairs[{i}].draft"))
        pairs.append((target, draft))
        revisions.append((t_rev, d_rev))
    ds = top.get("dataset", {"name": "spec_bench", "prompts": 10})
    ds_list = ds if isinstance(ds, list) else [ds]
    ds_where = (
        (lambda i: at(f"dataset[{i}]")) if isinstance(ds, list) else (lambda i: at("dataset"))
    )
    datasets = tuple(
        _dataset(d, ds_where(i), limits.max_prompts, source)
        for i, d in enumerate(nonempty_list(ds_list, at("dataset")))
    )
    sampling = mapping(
        top.get("sampling", {}), at("sampling"), optional=SAMPLING_KEYS + ("points",)
    )
    temps, top_ps, draft_temps, draft_top_ps, points = _sampling(sampling, at("sampling"))
    mnt = axis(
        top.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS),
        at("max_new_tokens"),
        lambda v, w: integer(v, w, lo=1, hi=limits.max_new_tokens, cap="limits.max_new_tokens"),
    )
    methods = tuple(
        _method(m, at(f"methods[{i}]"))
        for i, m in enumerate(nonempty_list(top["methods"], at("methods")))
    )
    device = string(top.get("device", "auto"), at("device"))
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", device):
        raise SpecError(f"{at('device')}: {device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    hardware = ()
    if "hardware" in top:
        hardware = parse_hardware(top["hardware"], at("hardware"), device, at("device"))
    dtype, draft_dtype = _dtypes(top.get("dtype", "auto"), at("dtype"))
    engines = axis(top.get("engine", "eager"), at("engine"), _engine)
    repeats = integer(top.get("repeats", 1), at("repeats"), lo=1)
    seed = integer(top.get("seed", 0), at("seed"), lo=0, hi=SEED_MAX)
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
        certify=boolean(top.get("certify", True), at("certify")),
        max_new_tokens=mnt,
        methods=methods,
        repeats=repeats,
        seed=seed,
        warmup=integer(warmup, at("warmup"), lo=0, hi=limits.max_warmup, cap="limits.max_warmup"),
        max_attempts=integer(top.get("max_attempts", 3), at("max_attempts"), lo=1),
        device=device,
        hardware=hardware,
        dtype=dtype,
        draft_dtype=draft_dtype,
        engines=engines,
        description=string(top.get("description", ""), at("description")),
        limits=limits,
        profile=_profile(top.get("profile", False), at("profile"), limits),
        revisions=tuple(revisions) if any(r != (None, None) for r in revisions) else (),
        placement=placement(top["placement"], at("placement")) if "placement" in top else None,
    )


PROFILE_KEYS = ("sizes", "contexts", "repeats")


def _profile(value: Any, where: str, limits: Limits = DEFAULT) -> ProfileSpec | None:
    """`profile: true` (orch profile's defaults), `false` (none, as without the key) or a
    mapping of sizes, contexts and repeats, checked by engine.curves.check_grid."""
    if isinstance(value, bool):
        return ProfileSpec() if value else None
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected true, false or a mapping of {', '.join(PROFILE_KEYS)}")
    m = mapping(value, where, optional=PROFILE_KEYS)
    base = ProfileSpec()
    sizes = _ints(m.get("sizes", list(base.sizes)), f"{where}.sizes")
    contexts = _ints(m.get("contexts", list(base.contexts)), f"{where}.contexts")
    repeats = integer(m.get("repeats", base.repeats), f"{where}.repeats")
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
    return [integer(v, f"{where}[{j}]") for j, v in enumerate(nonempty_list(value, where))]


def _dtype(value: Any, where: str) -> str:
    dtype = string(value, where)
    if dtype not in DTYPES:
        raise SpecError(f"{where}: {dtype!r} is not one of auto, float32, bfloat16, float16")
    return dtype


def _dtypes(value: Any, where: str) -> tuple[str, str | None]:
    """`dtype: bf16` for both models, or `dtype: {target: fp32, draft: bf16}` per role
    (draft_dtype None: the draft runs in the target's dtype)."""
    if not isinstance(value, dict):
        return _dtype(value, where), None
    m = mapping(value, where, optional=("target", "draft"))
    target = _dtype(m.get("target", "auto"), f"{where}.target")
    draft = _dtype(m.get("draft", target), f"{where}.draft")
    return target, None if draft == target else draft


def _engine(value: Any, where: str) -> str:
    if value not in ENGINE_SPECS:
        raise SpecError(f"{where}: {value!r} is not one of {', '.join(ENGINE_SPECS)}")
    return value


def _limits(value: Any, where: str) -> Limits:
    m = mapping(value, where, optional=NAMES)
    return Limits(
        **{k: integer(v, f"{where}.{k}", lo=int(k != "max_warmup")) for k, v in m.items()}
    )


def _name(value: str, where: str, max_len: int = MODEL_MAX) -> str:
    """A name the database stores: it fits its column and holds no control characters."""
    problem = text_problem(value, max_len)
    if problem:
        raise SpecError(f"{where}: {problem}")
    return value


def _dataset(value: Any, where: str, max_prompts: int, source: str = "sweep") -> DatasetSel:
    if isinstance(value, dict) and "path" in value:  # a user's prompt file (sources.py)
        keys = FILE_KEYS + ("prompts", "prompt_tokens", "category", "chat")
        return file_dataset(mapping(value, where, optional=keys), where, max_prompts, source)
    m = mapping(
        value, where, required=("name",), optional=("prompts", "prompt_tokens", "category", "chat")
    )
    pt, cat, chat = m.get("prompt_tokens"), m.get("category"), m.get("chat")
    return DatasetSel(
        name=string(m["name"], f"{where}.name"),
        prompts=integer(
            m.get("prompts", 10), f"{where}.prompts", lo=1, hi=max_prompts, cap="limits.max_prompts"
        ),
        prompt_tokens=None if pt is None else integer(pt, f"{where}.prompt_tokens", lo=1),
        category=default_category(m["name"]) if cat is None else string(cat, f"{where}.category"),
        chat=None if chat is None else boolean(chat, f"{where}.chat"),
    )


def _method(value: Any, where: str) -> MethodSpec:
    m = mapping(value, where, required=("name",), optional=("params", "grid", "sampling"))
    name = string(m["name"], f"{where}.name")
    own = mapping(
        m.get("sampling", {}), f"{where}.sampling", optional=("draft_temperature", "draft_top_p")
    )
    params = dict(mapping(m.get("params", {}), f"{where}.params"))
    grid: dict[str, tuple] = {}
    if "grid" in m:
        g = mapping(m["grid"], f"{where}.grid")
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
    return MethodSpec(
        name=name,
        params=params,
        grid=grid,
        draft_temperature=or_none(temperature)(
            own.get("draft_temperature"), f"{where}.sampling.draft_temperature"
        ),
        draft_top_p=or_none(top_p)(own.get("draft_top_p"), f"{where}.sampling.draft_top_p"),
    )


SAMPLING_KEYS = ("temperature", "top_p", "draft_temperature", "draft_top_p")


def _sampling(sampling: dict, where: str) -> tuple[tuple, tuple, tuple, tuple, tuple]:
    """(temperatures, top_ps, draft_temperatures, draft_top_ps, points): the grid axes and the
    explicit settings. Without `points` the grid defaults to temperature 0, top_p 1; with
    `points` only, there is no grid. The draft's axes default to (None,): the target's
    settings. A point repeated, or already in the grid, is an error."""
    gridded = "temperature" in sampling or "top_p" in sampling or "points" not in sampling
    temps = axis(sampling.get("temperature", 0.0), f"{where}.temperature", temperature)
    top_ps = axis(sampling.get("top_p", 1.0), f"{where}.top_p", top_p)
    if not gridded:
        temps, top_ps = (), ()
    draft_temps = axis(
        sampling.get("draft_temperature"), f"{where}.draft_temperature", or_none(temperature)
    )
    draft_top_ps = axis(sampling.get("draft_top_p"), f"{where}.draft_top_p", or_none(top_p))
    seen = set(itertools.product(temps, top_ps, draft_temps, draft_top_ps))
    points = []
    raw = nonempty_list(sampling["points"], f"{where}.points") if "points" in sampling else []
    for j, point in enumerate(raw):
        at = f"{where}.points[{j}]"
        point = mapping(point, at, required=("temperature",), optional=SAMPLING_KEYS[1:])
        dt, dp = point.get("draft_temperature"), point.get("draft_top_p")
        x = (
            temperature(point["temperature"], f"{at}.temperature"),
            top_p(point.get("top_p", 1.0), f"{at}.top_p"),
            None if dt is None else temperature(dt, f"{at}.draft_temperature"),
            None if dp is None else top_p(dp, f"{at}.draft_top_p"),
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
