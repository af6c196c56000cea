"""Hardware profiles in the database (`profiles`, migration 0005) and cost-model predictions
for stored trials on a profiled device (`orch profile`, `orch compare --predict-on`).

A profile row is one ForwardCurve (engine/curves.py) keyed by (device_name, model, dtype,
engine) with who measured it; storing a curve under an existing key replaces that row in one
transaction (a key holds the latest measurement; its created_at says when).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import select

from db.models import Profile
from engine import cost_model
from engine.config import ConfigError
from engine.cost_model import ForwardCurve
from orchestrator.results.query import MEASURED, compare
from orchestrator.results.settings import BASELINE, settings_keys
from orchestrator.store import Store, put_profiles

DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class PredictWith:
    """What a prediction takes from the device instead of from each trial (`orch compare`,
    `query` and `report`'s --predict-engine, --predict-dtype, --predict-host-ms): the curves of
    `engine` and of `dtype` (both roles), and `host_s` seconds outside the forwards per
    iteration of every method (h_i = h_AR). None: the trial's own."""

    engine: str | None = None
    dtype: str | None = None
    host_s: float | None = None

    def describe(self) -> str:
        """The choices made, for a report's text ("" when none)."""
        parts = [f"the {self.engine} engine's curves"] if self.engine else []
        parts += [f"{self.dtype} curves"] if self.dtype else []
        if self.host_s is not None:
            parts.append(f"{self.host_s * 1000:g} ms outside the forwards per iteration")
        return ", ".join(parts)


TRIALS_OWN = PredictWith()  # every trial's own engine, dtype and host time


def normalise_dtype(dtype: str, device_type: str = "cpu") -> str:
    """A trial's or the CLI's dtype as a profile stores it; auto as engine.devices.pick_dtype
    resolves it (bfloat16 on CUDA, float32 on CPU)."""
    if dtype in (None, "auto"):
        return "bfloat16" if device_type == "cuda" else "float32"
    return DTYPE_ALIASES.get(dtype, dtype)


def save_curves(store: Store, measured: Sequence[tuple[ForwardCurve, dict[str, Any]]]) -> None:
    """Store (or replace) each curve's profile, all in one transaction; the dict beside each
    curve is engine.curves.device_info of the device that measured it."""
    names = ", ".join(sorted({c.model for c, _ in measured}))
    store.transact(f"storing the profiles of {names}", lambda s: put_profiles(s, measured))


def read_profile_file(path: str) -> list[tuple[ForwardCurve, dict[str, Any]]]:
    """The curves of a profile file as save_curves takes them, checked before anything is
    stored (ConfigError naming the file and the fault). The format is bench/gpu.py's
    --profile-out, written on a machine with no database: {"device": engine.curves
    device_info, "curves": [ForwardCurve.to_dict(), ...]}, each curve measured on that
    device."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("device"), dict):
        raise ConfigError(f'{path}: no "device" object (bench/gpu.py --profile-out writes one)')
    curves = data.get("curves")
    if not isinstance(curves, list) or not curves:
        raise ConfigError(f'{path}: no curves (a "curves" list of forward-cost curves)')
    info, out = data["device"], []
    for i, c in enumerate(curves):
        try:
            curve = ForwardCurve.from_dict(c)
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"{path}: curve {i} is malformed ({type(e).__name__}: {e})") from None
        if curve.device_name != info.get("device_name"):
            raise ConfigError(
                f"{path}: curve {i} ({curve.model}) was measured on {curve.device_name!r}, "
                f"not the file's device {info.get('device_name')!r}"
            )
        if not curve.points or any(p.seconds <= 0 or p.n < 1 for p in curve.points):
            raise ConfigError(f"{path}: curve {i} ({curve.model}) has no points or a bad one")
        out.append((curve, info))
    return out


def load_profiles(store: Store, device_name: str | None = None) -> list[dict[str, Any]]:
    """Every stored profile (of one device when given): key, curve and provenance."""
    q = select(Profile).order_by(Profile.device_name, Profile.model, Profile.dtype, Profile.engine)
    if device_name is not None:
        q = q.where(Profile.device_name == device_name)

    def tx(s) -> list[dict[str, Any]]:
        return [
            {
                "device_name": p.device_name,
                "model": p.model,
                "dtype": p.dtype,
                "engine": p.engine,
                "driver": p.driver,
                "versions": dict(p.versions),
                "cores": p.cores,
                "host": p.host,
                "created_at": p.created_at,
                "curve": ForwardCurve.from_dict(
                    {
                        "model": p.model,
                        "device_name": p.device_name,
                        "dtype": p.dtype,
                        "engine": p.engine,
                        "points": p.points,
                    }
                ),
            }
            for p in s.scalars(q)
        ]

    return store.transact("reading profiles", tx)


def device_curves(store: Store, device: str) -> dict[tuple[str, str, str], ForwardCurve]:
    """(model, dtype, engine) -> curve of a profiled device; ConfigError naming the profiled
    devices when `device` has none."""
    rows = load_profiles(store, device)
    if not rows:
        known = sorted({r["device_name"] for r in load_profiles(store)})
        raise ConfigError(
            f"--predict-on: no profile for device {device!r} in {store.display_url} "
            f"(profiled: {', '.join(known) or 'none; run `orch profile`'})"
        )
    return {(r["model"], r["dtype"], r["engine"]): r["curve"] for r in rows}


def profile_models(
    roles: Sequence[tuple[str, str, str]],
    sizes: Sequence[int],
    contexts: Sequence[int],
    device: str | None = None,
    engine: str = "eager",
    repeats: int = 3,
    log: Callable[[str], None] | None = None,
) -> list[tuple[ForwardCurve, dict[str, Any]]]:
    """Measure each (role, model name, dtype): load it on `device`, take its curve."""
    from engine.curves import device_info, measure_curve  # lazy: torch
    from engine.models import load_model  # lazy: torch

    out = []
    for role, name, dtype in roles:
        m = load_model(name, device, dtype)
        if log:
            log(f"profiling {role} {name} ({m.dtype}) on {m.device}")
        curve = measure_curve(m.model, name, sizes, contexts, engine, repeats, log=log)
        out.append((curve, device_info(m.device)))
        del m
    return out


def _trial_curve(curves, model: str, dtype: str, engine: str) -> ForwardCurve | None:
    return curves.get((model, dtype, engine)) or curves.get((model, dtype, "eager"))


def predict_frame(
    df: pd.DataFrame, curves: dict, device: str, using: PredictWith = TRIALS_OWN
) -> pd.DataFrame:
    """Per finished trial (a load_frame(details=True) row): the cost model's time per token
    and speedup on `device`, from the trial's iterations and the device's curves for its
    target and draft (its dtypes; the curve of `using.engine`, default the trial's own
    engine, else the eager one: every engine emits the same greedy tokens, so a trial's
    acceptance profile holds on any of them, e.g. a CPU trial predicted on a GPU's `graphs`
    curves; `using.dtype`, the curves of that dtype for both roles: the trial's acceptance
    stands in for that dtype's, e.g. fp32 CPU trials predicted on a GPU's bf16 curves). h_i:
    the trial's own host time; h_AR: the host time per iteration of the autoregressive trial
    with the same settings when stored; `using.host_s` replaces both (every iteration of
    every method, autoregressive included, costs that much outside its forwards: a host time
    measured on the predicted device instead of where the trials ran). Trials whose models
    the device has no curve for are left out."""
    device_type = "cuda" if is_gpu_name(device) else "cpu"
    gens_of, h_ar = {}, {}
    for _, r in df.iterrows():
        gens_of[r["trial_id"]] = [
            cost_model.from_per_iteration(p["prompt_tokens"], it)
            for p, it in zip(r["per_prompt"], r["per_iteration"])
        ]
    key = _settings(df)
    for i, r in df.iterrows():
        if r["method"] == BASELINE:
            h_ar.setdefault(key[i], cost_model.mean_host_per_token(gens_of[r["trial_id"]]))
    rows = []
    for i, r in df.iterrows():
        t_dtype = normalise_dtype(using.dtype or r["dtype"], device_type)
        draft_dtype = using.dtype or _given(r.get("draft_dtype")) or r["dtype"]
        d_dtype = normalise_dtype(draft_dtype, device_type)
        path = using.engine or _given(r.get("engine")) or "eager"
        ct = _trial_curve(curves, r["target"], t_dtype, path)
        cd = _trial_curve(curves, r["draft"], d_dtype, path)
        gens = gens_of[r["trial_id"]]
        needs_draft = any(it.draft_forwards for g in gens for it in g.iterations)
        if ct is None or (needs_draft and cd is None):
            continue
        h = h_ar.get(key[i], 0.0) if using.host_s is None else using.host_s
        p = cost_model.predict(gens, ct, cd, h, host_s=using.host_s)
        rows.append(
            {
                "trial_id": r["trial_id"],
                "predicted_tpot_s": p.time_per_token,
                "predicted_speedup": p.speedup,
            }
        )
    return pd.DataFrame(rows, columns=["trial_id", "predicted_tpot_s", "predicted_speedup"])


def _given(value: Any) -> Any:
    """A config field of a stored trial, None where the trial predates it (NaN in a frame)."""
    return None if value is None or (isinstance(value, float) and value != value) else value


def is_gpu_name(device: str) -> bool:
    """Whether a profiled device name is a GPU's (torch.cuda.get_device_name) rather than a
    CPU model from /proc/cpuinfo."""
    return any(w in device.lower() for w in ("nvidia", "geforce", "tesla", "radeon", "instinct"))


def _settings(df: pd.DataFrame) -> pd.Series:
    return settings_keys(df)


def add_predictions(
    df: pd.DataFrame, curves: dict, device: str, using: PredictWith = TRIALS_OWN
) -> pd.DataFrame:
    """`df` (a report.load_frame(details=True) frame) with predict_frame's columns on `device`
    (its device_curves), NaN for trials it cannot predict."""
    return df.merge(predict_frame(df, curves, device, using), on="trial_id", how="left")


def compare_predicted(df: pd.DataFrame, where, device: str) -> pd.DataFrame:
    """report.compare of `df` (add_predictions' frame for `device`) with the cost model's
    predicted speedup beside the measured one. Measured speedups are kept (and pick each
    method's best config) when every trial ran on `device` (ran_on), else only the prediction
    is shown and the best config is the one with the highest predicted speedup."""
    if ran_on(df, device).all():
        return compare(df, where)
    best = compare(df, where, rank_by="predicted_speedup")
    measured = MEASURED + [c for c in best.columns if c.startswith("speedup.")]
    best[measured] = float("nan")
    return best


def ran_on(df: pd.DataFrame, device: str) -> pd.Series:
    """Per trial, whether it ran on the profiled `device`: its stored device name
    (trials.device_name, the name a profile is keyed by: engine/curves.py device_info)
    equals it; a trial stored without one (before migration 0007) goes by its kind alone,
    on a GPU (trials.gpu_id) for a GPU's name, else on a CPU."""
    name = df["device_name"]
    known = name.notna() & (name != "")
    same_kind = df["gpu_id"].notna() == is_gpu_name(device)
    return (known & (name == device)) | (~known & same_kind)
