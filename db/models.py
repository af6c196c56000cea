"""SQLAlchemy 2.0 typed models of the lab database.

    sweeps ──< sweep_trials >── trials ──1:1── results        models, datasets (metadata)
                                                              profiles (device cost curves)
                                                              verifier_checks (certificates)

- `trials` is global: one row per `config_hash` (sha256 of the fully resolved config), shared
  by every sweep that contains that config, so a repeated or overlapping submission never
  runs a config twice. Lifecycle (`TrialStatus`): pending -> running -> done | failed;
  `cancel` sets cancelled. A running trial holds its driver's id (`owner`) and a lease
  (`lease_until`) the driver renews by heartbeat; once the lease runs out (a killed or stuck
  driver) any driver may claim the trial again (migration 0003). A sweep's `SweepStatus`:
  submitted -> running -> finished (every trial done or failed, whoever ran them) |
  interrupted | cancelled. CHECK constraints hold both status columns to their enums
  (migration 0002).
- `results` holds one row per finished trial (unique `trial_id` and `config_hash`): every
  aggregate metric as a column, per-prompt and per-iteration detail as JSON.
- Times are unix seconds: `started_at` and `finished_at` from the worker's clock,
  `heartbeat_at` and `lease_until` from the database's, so drivers on several hosts agree.

Schema changes go through Alembic (db/migrations); `db` imports nothing else of the project.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

JSONType = JSON().with_variant(JSONB(), "postgresql")


class _Status(str, enum.Enum):
    """A status as stored: a str that equals, prints and formats as its value."""

    def __str__(self) -> str:
        return self.value


class TrialStatus(_Status):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SweepStatus(_Status):
    SUBMITTED = "submitted"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    FINISHED = "finished"  # every trial done or failed, at least one done
    FAILED = "failed"  # every trial failed (migration 0006)


def _status_type(statuses: type[_Status], constraint: str) -> Enum:
    """VARCHAR(16) holding a status value, with a CHECK constraint named `constraint` that
    allows only `statuses` (created by migration 0002); rows read back as enum members."""
    return Enum(
        statuses,
        native_enum=False,
        length=16,
        create_constraint=True,
        name=constraint,
        values_callable=lambda e: [m.value for m in e],
    )


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSONType, list[Any]: JSONType}


class Sweep(Base):
    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    spec: Mapped[dict[str, Any]]  # the normalised sweep file
    status: Mapped[SweepStatus] = mapped_column(
        _status_type(SweepStatus, "ck_sweeps_status"), default=SweepStatus.SUBMITTED
    )
    code_version: Mapped[str] = mapped_column(String(80), default="")
    driver: Mapped[str | None] = mapped_column(String(200))  # the last driver to heartbeat
    heartbeat_at: Mapped[float | None] = mapped_column(Float)  # several drivers may run a sweep
    # the --only cut of the latest run, [[key, [values]], ...]; None: the whole grid (0009)
    only: Mapped[list[Any] | None] = mapped_column(nullable=True)
    # the lab's annotations (orch tag, orch note; migration 0012): sorted labels, free text
    tags: Mapped[list[Any] | None] = mapped_column(nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class SweepTrial(Base):
    __tablename__ = "sweep_trials"

    sweep_id: Mapped[int] = mapped_column(
        ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True
    )
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (Index("ix_trials_pair", "target", "draft"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config_hash: Mapped[str] = mapped_column(String(64), unique=True)
    config: Mapped[dict[str, Any]]  # orchestrator.records.TrialConfig.to_dict()
    method: Mapped[str] = mapped_column(String(64), index=True)
    target: Mapped[str] = mapped_column(String(200))
    draft: Mapped[str] = mapped_column(String(200))
    dataset: Mapped[str] = mapped_column(String(64))
    temperature: Mapped[float] = mapped_column(Float)
    max_new_tokens: Mapped[int] = mapped_column(Integer)
    repeat: Mapped[int] = mapped_column(Integer)
    status: Mapped[TrialStatus] = mapped_column(
        _status_type(TrialStatus, "ck_trials_status"), default=TrialStatus.PENDING, index=True
    )
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker_host: Mapped[str | None] = mapped_column(String(200))
    gpu_id: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    wall_s: Mapped[float | None] = mapped_column(Float)  # trial time on the worker
    load_s: Mapped[float | None] = mapped_column(Float)  # model loading inside the trial
    code_version: Mapped[str | None] = mapped_column(String(80))  # of the worker that ran it
    owner: Mapped[str | None] = mapped_column(String(200))  # driver id holding a running trial
    lease_until: Mapped[float | None] = mapped_column(Float)  # the owner's claim ends (unix s)
    worker_node: Mapped[str | None] = mapped_column(String(64))  # Ray node id of its worker
    device_name: Mapped[str | None] = mapped_column(String(200))  # GPU or CPU model it ran on
    # learned components it used: [{name, kind, sha256, config}] (engine/checkpoint.py
    # describe), one per checkpoint its method parameters name; None when it used none
    checkpoints: Mapped[list[Any] | None] = mapped_column(nullable=True)
    # {python, torch, transformers, triton, driver} of its worker (migration 0012)
    versions: Mapped[dict[str, Any] | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Result(Base):
    """One finished trial. The metric columns (throughput ... prompt_tokens_mean) are the
    metrics of engine.metrics.METRICS, one column each, of its Python type (int: Integer or
    BigInteger, float: Float). They are written out here rather than derived from that list:
    `db` imports nothing of the project (a database tool or migration must not load the
    engine), and a column exists only once a migration creates it, so a metric added to the
    engine needs a column here and an Alembic revision anyway. A test compares the migrated
    table with METRICS, names and types, so the two cannot drift apart unnoticed."""

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), unique=True)
    config_hash: Mapped[str] = mapped_column(String(64), unique=True)
    throughput: Mapped[float] = mapped_column(Float)  # new tokens / generation time, tok/s
    acceptance_rate: Mapped[float] = mapped_column(Float)
    tokens_per_iteration: Mapped[float] = mapped_column(Float)
    mean_accepted_length: Mapped[float] = mapped_column(Float)
    mean_tree_size: Mapped[float] = mapped_column(Float)
    ttft_s: Mapped[float] = mapped_column(Float)
    tpot_s: Mapped[float] = mapped_column(Float)
    total_s: Mapped[float] = mapped_column(Float)
    prefill_s: Mapped[float] = mapped_column(Float)
    draft_s: Mapped[float] = mapped_column(Float)
    target_s: Mapped[float] = mapped_column(Float)
    verify_s: Mapped[float] = mapped_column(Float)
    bookkeeping_s: Mapped[float] = mapped_column(Float)
    forward_s: Mapped[float] = mapped_column(Float)
    overhead_share: Mapped[float] = mapped_column(Float)
    peak_memory_bytes: Mapped[int] = mapped_column(BigInteger)
    new_tokens: Mapped[int] = mapped_column(Integer)
    iterations: Mapped[int] = mapped_column(Integer)
    prompts: Mapped[int] = mapped_column(Integer)
    prompt_tokens_mean: Mapped[float] = mapped_column(Float)
    per_prompt: Mapped[list[Any]]  # id, category, prompt_tokens, tokens, summary per prompt
    per_iteration: Mapped[list[Any]]  # per prompt: {tree_size: [...], accepted: [...], ...}
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ModelInfo(Base):
    __tablename__ = "models"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    architecture: Mapped[str | None] = mapped_column(String(64))
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    vocab_size: Mapped[int | None] = mapped_column(Integer)
    layers: Mapped[int | None] = mapped_column(Integer)
    dtype: Mapped[str | None] = mapped_column(String(16))
    gguf_sha256: Mapped[str | None] = mapped_column(String(64))  # fetched real models
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class DatasetInfo(Base):
    __tablename__ = "datasets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    file: Mapped[str | None] = mapped_column(String(300))
    items: Mapped[int | None] = mapped_column(Integer)
    categories: Mapped[int | None] = mapped_column(Integer)
    chat: Mapped[bool | None]
    sha256: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class Profile(Base):
    """A device's forward-cost curve for one model, dtype and engine path (engine/curves.py;
    migration 0005). One row per key: re-profiling replaces it."""

    __tablename__ = "profiles"
    __table_args__ = (
        UniqueConstraint("device_name", "model", "dtype", "engine", name="uq_profiles_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_name: Mapped[str] = mapped_column(String(200))  # CPU model or CUDA device name
    model: Mapped[str] = mapped_column(String(200))
    dtype: Mapped[str] = mapped_column(String(16))
    engine: Mapped[str] = mapped_column(String(16))
    points: Mapped[list[Any]]  # [[context, n, seconds], ...]
    driver: Mapped[str] = mapped_column(String(200))  # CUDA runtime / driver, "" on CPU
    versions: Mapped[dict[str, Any]]  # torch, transformers, triton
    cores: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class VerifierCheck(Base):
    """A sampling verifier's distribution check at one setting (engine/certify/distribution.py;
    migration 0010): the certificate of every sampled trial with that verifier, tree sampling
    and sampling. The draft's sampling is stored resolved (the target's where a trial has
    none), so the key has no NULLs. One row per key: rerunning a check replaces it."""

    __tablename__ = "verifier_checks"
    __table_args__ = (
        UniqueConstraint(
            "verifier",
            "tree_sampling",
            "temperature",
            "top_p",
            "draft_temperature",
            "draft_top_p",
            name="uq_verifier_checks_key",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    verifier: Mapped[str] = mapped_column(String(64))
    tree_sampling: Mapped[str] = mapped_column(String(32))
    temperature: Mapped[float] = mapped_column(Float)
    top_p: Mapped[float] = mapped_column(Float)
    draft_temperature: Mapped[float] = mapped_column(Float)
    draft_top_p: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    p_value: Mapped[float] = mapped_column(Float)
    power: Mapped[float] = mapped_column(Float)  # against a verifier emitting the draft's law
    alpha: Mapped[float] = mapped_column(Float)
    support_ok: Mapped[bool]
    passed: Mapped[bool]
    seconds: Mapped[float] = mapped_column(Float)
    code_version: Mapped[str] = mapped_column(String(80))
    host: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AcceptanceProfile(Base):
    """Sequoia's acceptance profile p_1..p_width measured for a pair, its dtypes, a sampling
    setting and a dataset (engine/drafters/sequoia/profile.py; orchestrator/acceptance.py;
    migration 0011). The draft's dtype and sampling are stored resolved (the target's where a
    trial has none), so the key has no NULLs. One row per key: the first measurement stands,
    so every Sequoia trial of that key built its tree from this row's vector."""

    __tablename__ = "acceptance_profiles"
    __table_args__ = (
        UniqueConstraint(
            "target",
            "draft",
            "dtype",
            "draft_dtype",
            "dataset",
            "temperature",
            "top_p",
            "draft_temperature",
            "draft_top_p",
            "width",
            name="uq_acceptance_profiles_key",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target: Mapped[str] = mapped_column(String(200))
    draft: Mapped[str] = mapped_column(String(200))
    dtype: Mapped[str] = mapped_column(String(16))
    draft_dtype: Mapped[str] = mapped_column(String(16))
    dataset: Mapped[str] = mapped_column(String(200))
    temperature: Mapped[float] = mapped_column(Float)
    top_p: Mapped[float] = mapped_column(Float)
    draft_temperature: Mapped[float] = mapped_column(Float)
    draft_top_p: Mapped[float] = mapped_column(Float)
    width: Mapped[int] = mapped_column(Integer)
    profile: Mapped[list[Any]]  # [p_1, ..., p_width]
    positions: Mapped[int] = mapped_column(Integer)  # target positions it averages over
    protocol: Mapped[dict[str, Any]]  # prompts, prompt_tokens, new_tokens, samples, seed
    config_hash: Mapped[str] = mapped_column(String(64))  # the acceptance trial's
    device_name: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(200))
    code_version: Mapped[str] = mapped_column(String(80))
    seconds: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# The metric columns of `results` (everything but identity, detail JSON and timestamps).
METRIC_COLUMNS: tuple[str, ...] = tuple(
    c.name
    for c in Result.__table__.columns
    if c.name not in ("id", "trial_id", "config_hash", "per_prompt", "per_iteration", "created_at")
)
