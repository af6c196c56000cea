"""The two records that travel between driver, executors and the database.

`TrialConfig` is one fully resolved trial (pair, dataset slice, sampling, method with all its
parameters incl. the verifier, max_new_tokens, repeat, seed); `config_hash` is a sha256 over
its canonical JSON and is the trial's identity in the database. `TrialResult` is what a
worker sends back: aggregate metrics, per-prompt and per-iteration detail, where and when it
ran. Both are plain data (no torch), so the driver and the database layer import them cheaply.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from engine.metrics import METRICS as ENGINE_METRICS

# Bump only when the meaning of a config field changes: it is part of every hash.
# `device` and `dtype` are hashed as resolved for where the trial runs
# (orchestrator.spec.expand.place): trials stored with `auto` before that resolution existed keep
# their rows, but the same sweep file submitted again gets new hashes for them (and runs them
# again); explicit configs keep theirs. The device's model name is recorded per trial, outside
# the hash (trials.device_name).
CONFIG_VERSION = 1
# Fields added after version 1, with the value every earlier trial had: a trial at that value
# leaves the field out of its hash, so adding a field does not change the stored trials' ids.
HASH_DEFAULTS = {
    "engine": "eager",
    "draft_dtype": None,
    "draft_temperature": None,
    "draft_top_p": None,
    "certify": True,
    "hardware": None,
    "target_revision": None,
    "draft_revision": None,
    "prompt_file": None,
    "placement": None,
}


# The method name of a profile trial (a sweep's `profile:` block, orchestrator/spec/parse.py): it
# measures the forward-cost curves (engine/curves.py) of its pair on the worker that runs it;
# `params` holds its grid {sizes, contexts, repeats}; it has no dataset (prompts 0, length 0)
# and leaves no `results` row, only its curves in `profiles` (Store.record_result).
PROFILE = "profile"


@dataclass(frozen=True)
class TrialConfig:
    target: str
    draft: str
    dataset: str
    prompts: int  # number of prompts (the first N in load_prompts order)
    method: str
    params: dict[str, Any]  # fully resolved method parameters, verifier included
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    repeat: int = 0
    seed: int = 0
    category: str | None = None
    prompt_tokens: int | None = None
    chat: bool | None = None  # None: the dataset's default
    device: str = "auto"
    dtype: str = "auto"  # the target's, and the draft's unless draft_dtype is set
    engine: str = "eager"  # engine/config.py ENGINE_SPECS
    draft_dtype: str | None = None  # None: the draft runs in `dtype`
    # the draft's own sampling (DySpec Sec. 5.1); None: the target's (engine/sampling.py)
    draft_temperature: float | None = None
    draft_top_p: float | None = None
    certify: bool = True  # re-check the output after timing (engine/certify/teacher_forced.py)
    # the hardware type the trial runs on (a sweep's `hardware:`, orchestrator/hardware.py):
    # `cpu` or a GPU type such as H100; None: wherever the executor places it (as before)
    hardware: str | None = None
    # a hub id's revision (engine/hub.py): its commit where the driver could resolve it (a new
    # revision is a new trial), else the branch or tag as given; None: main / not a hub id
    target_revision: str | None = None
    draft_revision: str | None = None
    # a user's prompt file (engine/prompt_files.py): {sha256, field, category_field, id_field};
    # its prompts travel with the trial (the path is the driver's, not part of the identity)
    prompt_file: dict[str, Any] | None = None
    # placement (engine/placement.py): {gpus_per_trial, offload, gpu_memory}, only the keys set:
    # the GPUs each trial's actor reserves, the target spread over them, what does not fit
    # offloaded to host memory (offload "cpu", DySpec's 70B setting); None: one device
    placement: dict[str, Any] | None = None

    def __post_init__(self) -> None:  # 0 and 0.0 must hash alike
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))
        # a draft setting equal to the target's is the default: one trial, one hash
        for name, same in (("draft_temperature", self.temperature), ("draft_top_p", self.top_p)):
            value = getattr(self, name)
            value = None if value is None or float(value) == same else float(value)
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["params"] = dict(sorted(self.params.items()))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrialConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def config_hash(self) -> str:
        payload = {"v": CONFIG_VERSION, **self.to_dict()}
        for k, default in HASH_DEFAULTS.items():
            if payload[k] == default:
                del payload[k]
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def pair_key(self) -> tuple:
        """Trials with one pair key share one loaded model pair (and, with a hardware type,
        run on one kind of worker): (target, draft, device, dtype, draft_dtype,
        target_revision, draft_revision, placement items[, hardware])."""
        key = (
            self.target,
            self.draft,
            self.device,
            self.dtype,
            self.draft_dtype,
            self.target_revision,
            self.draft_revision,
            tuple(sorted((self.placement or {}).items())),
        )
        return key if self.hardware is None else (*key, self.hardware)

    @property
    def gpus(self) -> int:
        """GPUs one trial's actor reserves (placement's gpus_per_trial, default 1)."""
        return int((self.placement or {}).get("gpus_per_trial", 1))

    @property
    def is_profile(self) -> bool:
        return self.method == PROFILE

    def label(self) -> str:
        if self.is_profile:
            dtypes = self.dtype + (f"/{self.draft_dtype}" if self.draft_dtype else "")
            grid = " ".join(
                f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in sorted(self.params.items())
            )
            on = f" on {self.hardware}" if self.hardware else ""
            return f"profile {self.target}/{self.draft} {dtypes} {self.engine} {grid}{on}"
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        engine = f" {self.engine}" if self.engine != "eager" else ""
        drafted = "".join(
            f" {k}={v:g}"
            for k, v in (("draft_T", self.draft_temperature), ("draft_top_p", self.draft_top_p))
            if v is not None
        )
        return (
            f"{self.method}[{params}] {self.target}/{self.draft} {self.dataset} "
            f"n={self.max_new_tokens} r={self.repeat}{engine}{drafted}"
            + (f" on {self.hardware}" if self.hardware else "")
        )


# The trial's metrics, each stored as a result column: engine.metrics.METRICS, by name.
METRICS: tuple[str, ...] = tuple(m.name for m in ENGINE_METRICS)


@dataclass(frozen=True)
class TrialResult:
    config_hash: str
    metrics: dict[str, float]  # keys: METRICS
    per_prompt: list[dict[str, Any]]  # id, prompt_tokens, tokens, and that prompt's summary
    per_iteration: list[dict[str, list]]  # one dict of lists per prompt
    host: str
    gpu_id: str | None
    started_at: float  # unix time on the worker
    finished_at: float
    load_s: float = 0.0  # model loading done inside this trial (0 when the pair was cached)
    warmup_s: float = 0.0
    code_version: str = ""
    models: list[dict[str, Any]] = field(default_factory=list)
    node: str | None = None  # the Ray node id of the worker (None outside Ray)
    device_name: str = ""  # the GPU's or CPU's model name (engine.curves.device_info)
    # a profile trial's measurements: {"curve": ForwardCurve.to_dict(), "info": device_info}
    # per model (its metrics, per_prompt and per_iteration are empty)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    # the learned components the method's parameters name (a `checkpoint` or `*_checkpoint`
    # parameter): engine.checkpoint.describe of each, name, kind, sha256 and training config
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    # the worker's python, torch, transformers, triton and driver (orchestrator.run.trial
    # library_versions); empty where unknown
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        return self.finished_at - self.started_at


@dataclass(frozen=True)
class TrialFailure:
    """A trial that raised inside a healthy worker (bad config, out of memory, ...)."""

    config_hash: str
    error: str
    host: str
    gpu_id: str | None
    started_at: float
    finished_at: float
    node: str | None = None  # the Ray node id of the worker (None outside Ray)
