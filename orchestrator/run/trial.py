"""Run one trial: no Ray, no database. The local executor and every Ray actor call `run_trial`.

A trial generates for each of its prompts with one method and stores the metrics of
`engine.metrics.METRICS` pooled over its generations (`pooled_metrics`: token-weighted where
that is the definition), per-prompt summaries with the generated tokens (and the papers'
acceptance measures under `acceptance`), and per-iteration lists. Unless the config says
`certify: false`, each prompt's output then gets its losslessness certificate
(engine/certify/teacher_forced.py: at temperature 0 one teacher-forced target forward re-checks it
against the
target's greedy decoding), stored as the prompt's `certificate`, outside the timed generation;
`engine.certify.teacher_forced.trial_certificate(per_prompt)` pools them.

A profile trial (records.PROFILE, a sweep's `profile:` block) runs `run_profile` instead: the
forward-cost curves of its pair's models on this worker's device, returned in the result's
`profiles` for the driver to store. An acceptance trial (orchestrator/acceptance.py) runs
`run_acceptance`: Sequoia's acceptance profile of its pair and sampling, returned the same way;
a Sequoia trial with a measured profile runs on the vector the driver attached (`acceptance`).

A trial for a hardware type (a sweep's `hardware:`) is checked first (`check_hardware`): on a
worker whose device is another type (a misplaced actor, a mislabelled node) it fails with one
line naming both, before any model loads, so no result is ever stored under the wrong type.

Model pairs are cached per process, keyed by (target, draft, device, dtype), at most
`PAIR_CACHE_SIZE` at a time (a GPU holds one pair comfortably; executors group trials by
pair). `LOADS` counts loads per key so tests can check that an actor loaded each pair once.
Warmup generations run the first time a pair is used in a process (not stored).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import socket
import time
from collections import Counter, OrderedDict
from typing import Any

from engine.config import ConfigError
from engine.datasets import encode_prompt, load_prompts
from engine.metrics import pooled_metrics
from engine.placement import describe
from orchestrator.acceptance import held_out, is_acceptance, key, needs_profile
from orchestrator.hardware import CPU
from orchestrator.records import TrialConfig, TrialResult
from orchestrator.run.preflight import checkpoint_names
from orchestrator.run.version import code_version
from orchestrator.run.worker_hardware import STAND_IN_ENV, check_hardware

PAIR_CACHE_SIZE = 1
LOADS: Counter = Counter()  # pair key -> loads in this process
_PAIRS: "OrderedDict[tuple, Any]" = OrderedDict()
_WARM: set[tuple] = set()
_PROMPTS: dict[tuple, list] = {}


def get_pair(key: tuple) -> tuple[Any, float]:
    """The loaded pair for (target, draft, device, dtype[, draft_dtype]) and the seconds
    spent loading it."""
    if key in _PAIRS:
        _PAIRS.move_to_end(key)
        return _PAIRS[key], 0.0
    code_version()  # read before this process imports the engine (see code_version)
    from engine.models import load_pair  # lazy: torch

    _quiet_transformers()
    while len(_PAIRS) >= PAIR_CACHE_SIZE:
        _PAIRS.popitem(last=False)
        _free_device_memory()
    start = time.perf_counter()
    # TrialConfig.pair_key; its hardware, when set, places the worker and loads nothing
    target, draft, device, dtype, draft_dtype, t_rev, d_rev, place = (
        *key,
        *(None,) * (8 - len(key)),
    )[:8]
    if os.environ.get(STAND_IN_ENV) and str(device).startswith("cuda"):
        device = CPU  # the test hook's stand-in GPU
    pair = load_pair(
        target,
        draft,
        device=device,
        dtype=dtype,
        draft_dtype=draft_dtype,
        revisions=(t_rev, d_rev),
        **({"placement": dict(place)} if place else {}),
    )
    LOADS[key] += 1
    _PAIRS[key] = pair
    return pair, time.perf_counter() - start


def _quiet_transformers() -> None:
    """No per-weight loading bars in sweep output (the sweep has its own progress bar)."""
    try:
        from transformers.utils import logging as hf_logging  # lazy: transformers

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def clear_cache() -> None:
    _PAIRS.clear()
    _WARM.clear()
    _free_device_memory()


def _free_device_memory() -> None:
    import torch  # lazy: torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def load_trial_prompts(config: TrialConfig) -> list:
    if config.prompt_file is not None:  # the driver ships them: workers have no such file
        raise ConfigError(
            f"dataset {config.dataset}: a prompt file's prompts travel with the trial from the "
            f"driver, and none came with it"
        )
    held = is_acceptance(config)  # an acceptance trial's: the dataset's last ones
    k = (config.dataset, config.prompts, config.category, held)
    if k not in _PROMPTS:
        load = held_out if held else (lambda d, n, c: load_prompts(d, n=n, category=c))
        _PROMPTS[k] = load(config.dataset, config.prompts, config.category)
    return _PROMPTS[k]


def run_trial(
    config: TrialConfig,
    pair: Any = None,
    prompts: list | None = None,
    warmup: int = 0,
    acceptance: tuple[float, ...] | None = None,
) -> TrialResult:
    """Run every prompt of `config` (a profile trial: run_profile; an acceptance trial:
    run_acceptance); a Sequoia trial with a measured profile builds from `acceptance`, the
    stored vector the driver attached. Raises on any error (the executor records it)."""
    code_version()  # read before this process imports the engine (see code_version)
    check_hardware(config)
    if config.is_profile:
        return run_profile(config, pair)
    if is_acceptance(config):
        return run_acceptance(config, pair, prompts)
    if needs_profile(config) and acceptance is None:
        raise ValueError(
            "sequoia: no measured acceptance profile was attached (its acceptance trial failed "
            "or did not run in this sweep); run it, or use profile: fixed"
        )
    from engine.certify.teacher_forced import certificate  # lazy: torch
    from engine.decode import generate  # lazy: torch
    from engine.methods import resolve_method  # lazy: torch

    started = time.time()
    method = resolve_method(
        config.method, dict(config.params), config.temperature, config.draft_temperature
    )
    checkpoints = used_checkpoints(config.params)
    if needs_profile(config):
        method, used = attach_profile(method, config, acceptance)
        checkpoints = [*checkpoints, used]
    drafting = {"draft_temperature": config.draft_temperature, "draft_top_p": config.draft_top_p}
    load_s = 0.0
    if pair is None:
        pair, load_s = get_pair(config.pair_key)
    prompts = prompts if prompts is not None else load_trial_prompts(config)
    tok = pair.target.tokenizer
    ids = [
        encode_prompt(tok, p, prompt_tokens=config.prompt_tokens, chat=config.chat) for p in prompts
    ]
    warmup_s = 0.0
    if warmup and config.pair_key not in _WARM:
        t0 = time.perf_counter()
        for i in range(warmup):
            generate(
                pair,
                ids[i % len(ids)],
                method,
                min(config.max_new_tokens, 32),
                temperature=config.temperature,
                top_p=config.top_p,
                seed=config.seed,
                engine=config.engine,
                **drafting,
            )
        warmup_s = time.perf_counter() - t0
    _WARM.add(config.pair_key)
    per_prompt, per_iteration, stats = [], [], []
    for i, (p, prompt_ids) in enumerate(zip(prompts, ids)):
        g = generate(
            pair,
            prompt_ids,
            method,
            config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=(config.seed * 1_000_003 + i) % 2**64,  # any 64-bit seed (unchanged below 2^44)
            engine=config.engine,
            **drafting,
        )
        stats.append(g.stats)
        d = g.stats.to_dict()
        per_iteration.append({k: [_round(x) for x in v] for k, v in d.pop("per_iteration").items()})
        per_prompt.append(
            {
                "id": p.id,
                "category": p.category,
                "prompt_tokens": len(prompt_ids),
                "tokens": g.tokens,
                **{k: _round(v) for k, v in d.items()},
            }
        )
        if config.certify:
            per_prompt[-1]["certificate"] = certificate(
                pair.target.model,
                method,
                prompt_ids,
                g.tokens,
                config.temperature,
                config.draft_temperature,
            )
    return TrialResult(
        config_hash=config.config_hash,
        metrics=pooled_metrics(stats, [len(x) for x in ids]),
        per_prompt=per_prompt,
        per_iteration=per_iteration,
        host=socket.gethostname(),
        gpu_id=os.environ.get("ORCH_GPU_ID") or _cuda_index(pair),
        started_at=started,
        finished_at=time.time(),
        load_s=load_s,
        warmup_s=warmup_s,
        code_version=code_version(),
        models=[model_info(m) for m in (pair.target, pair.draft) if m is not None],
        device_name=device_name(str(pair.target.device)) + placed(config),
        checkpoints=checkpoints,
        versions=library_versions(str(pair.target.device)),
    )


def run_profile(config: TrialConfig, pair: Any = None) -> TrialResult:
    """A profile trial: engine/curves.py measure_curve of the target and then the draft
    (none for a model-free pair) as loaded for the trial's placement, dtypes and engine path,
    over the grid in config.params (sizes, contexts, repeats). The curves are stored under the
    trial's model names with the device_info of the device that measured them; the driver
    writes them with the trial's status (orchestrator.store.Store.record_result)."""
    from engine.curves import device_info, measure_curve  # lazy: torch

    started = time.time()
    load_s = 0.0
    if pair is None:
        pair, load_s = get_pair(config.pair_key)
    grid = config.params
    profiles = []
    for name, m in ((config.target, pair.target), (config.draft, pair.draft)):
        if m is None:
            continue
        curve = measure_curve(
            m.model, name, grid["sizes"], grid["contexts"], config.engine, grid["repeats"]
        )
        info, measured = device_info(m.device), curve.to_dict()
        if m is pair.target:  # a profile is per placement: the target's curve is the placed one
            info = {**info, "device_name": info["device_name"] + placed(config)}
            measured["device_name"] = info["device_name"]
        profiles.append({"curve": measured, "info": info})
    return measurement(config, pair, started, load_s, profiles)


def measurement(
    config: TrialConfig, pair: Any, started: float, load_s: float, profiles: list
) -> TrialResult:
    """The result of a trial that measures rather than generates (a profile or acceptance
    trial): its `profiles` for the driver to store, where and with what it ran, no metrics."""
    return TrialResult(
        config_hash=config.config_hash,
        metrics={},
        per_prompt=[],
        per_iteration=[],
        host=socket.gethostname(),
        gpu_id=os.environ.get("ORCH_GPU_ID") or _cuda_index(pair),
        started_at=started,
        finished_at=time.time(),
        load_s=load_s,
        code_version=code_version(),
        models=[model_info(m) for m in (pair.target, pair.draft) if m is not None],
        device_name=device_name(str(pair.target.device)) + placed(config),
        profiles=profiles,
        versions=library_versions(str(pair.target.device)),
    )


def attach_profile(method: Any, config: TrialConfig, profile: tuple[float, ...]) -> tuple:
    """The Sequoia method with its measured profile attached, and the record of it the trial
    keeps beside its learned components (trials.checkpoints)."""
    from engine.drafters.sequoia.build import with_profile  # lazy: torch

    cfg = with_profile(method.cfg, tuple(profile))
    used = {"name": "acceptance_profile", "kind": "sequoia_profile", "profile": list(cfg.profile)}
    return dataclasses.replace(method, cfg=cfg), {**used, "key": key(config)}


def run_acceptance(config: TrialConfig, pair: Any = None, prompts: list | None = None):
    """An acceptance trial: Sequoia's acceptance profile p_1..p_width of the pair at the trial's
    sampling (engine/drafters/sequoia/profile.py measure_profile) on its held-out prompts,
    returned in the result's `profiles` for the driver to store (no metrics)."""
    from engine.drafters.sequoia.profile import measure_profile  # lazy: torch

    started = time.time()
    load_s = 0.0
    if pair is None:
        pair, load_s = get_pair(config.pair_key)
    prompts = prompts if prompts is not None else load_trial_prompts(config)
    tok = pair.target.tokenizer
    ids = [
        encode_prompt(tok, p, prompt_tokens=config.prompt_tokens, chat=config.chat) for p in prompts
    ]
    t0 = time.perf_counter()
    profile = measure_profile(
        pair,
        ids,
        new_tokens=config.params["new_tokens"],
        width=config.params["width"],
        temperature=config.temperature,
        samples=config.params["samples"],
        seed=config.seed,
        top_p=config.top_p,
        draft_temperature=config.draft_temperature,
        draft_top_p=config.draft_top_p,
    )
    protocol = {
        "prompts": [p.id for p in prompts],
        "prompt_tokens": config.prompt_tokens,
        "new_tokens": config.params["new_tokens"],
        "samples": config.params["samples"],
        "seed": config.seed,
    }
    measured = {
        **key(config),
        "profile": list(profile),
        "positions": len(ids) * config.params["new_tokens"],
        "protocol": protocol,
        "seconds": time.perf_counter() - t0,
    }
    return measurement(config, pair, started, load_s, [{"acceptance": measured}])


def used_checkpoints(params: dict[str, Any]) -> list[dict[str, Any]]:
    """What the trial records of each checkpoint its method parameters name
    (orchestrator.run.preflight.checkpoint_names): engine.checkpoint.describe, read before
    the trial runs (so the record is of the weights the engine then loads by name)."""
    from engine.checkpoint import describe  # lazy: torch

    return [describe(name) for name in checkpoint_names(params)]


@functools.lru_cache(maxsize=8)
def library_versions(device: str) -> dict[str, str]:
    """python, torch, transformers, triton and the CUDA driver behind `device`."""
    from engine.curves import device_info  # lazy: torch

    info = device_info(device)
    keep = ("torch", "transformers", "triton", "driver")
    return {"python": platform.python_version(), **{k: str(info[k]) for k in keep}}


@functools.lru_cache(maxsize=8)
def device_name(device: str) -> str:
    """The model name of the GPU or CPU behind `device` (what the trial measured on)."""
    from engine.curves import device_info  # lazy: torch

    return device_info(device)["device_name"]


def placed(config: TrialConfig) -> str:
    """The placement's suffix of the device name results and profiles are stored under
    (engine.placement.describe): " x4 +offload cpu"; "" on one device."""
    return describe(config.placement)


def _cuda_index(pair: Any) -> str | None:
    dev = pair.target.device
    return str(dev.index or 0) if dev.type == "cuda" else None


def model_info(m: Any) -> dict[str, Any]:
    cfg = m.model.config
    info = {
        "name": m.name,
        "architecture": getattr(cfg, "model_type", None),
        "parameters": int(sum(p.numel() for p in m.model.parameters())),
        "vocab_size": getattr(cfg, "vocab_size", None),
        "layers": getattr(cfg, "num_hidden_layers", None),
        "dtype": str(m.dtype).removeprefix("torch."),
        "gguf_sha256": m.gguf_sha256,
    }
    if getattr(m, "commit", None) is not None:  # a hub id: the revision asked, the commit loaded
        info["revision"], info["commit"] = m.revision, m.commit
    if getattr(m, "placement", None) is not None:  # spread over GPUs or offloaded
        info["placement"] = m.placement
    if getattr(m, "checkpoint", None) is not None:  # a trained draft (`ckpt:NAME`): the
        info["checkpoint"] = m.checkpoint  # checkpoint's name, kind, sha256, training config
    return info


def _round(x: Any) -> Any:
    return round(x, 7) if isinstance(x, float) else x
