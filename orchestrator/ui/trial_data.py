"""A trial page's data (`/api/trial/ID`): its resolved config and hash, where and with which
code it ran, its certificate, per-prompt table and text, per-iteration series, and the
`orch generate` command that reruns one of its prompts. The only page that reads the
per-iteration JSON."""

from __future__ import annotations

import functools
import shlex
from typing import Any

from sqlalchemy import select

from db.models import Result, Sweep, SweepTrial, Trial
from engine.datasets import DatasetError, encode_prompt, load_prompts
from engine.model_names import TINY_MODELS
from engine.models import ByteTokenizer, local_folder
from engine.tokenizers import HFTokenizer
from orchestrator.records import HASH_DEFAULTS, TrialConfig
from orchestrator.results.values import cell_value
from orchestrator.store.reads import error_line
from orchestrator.ui.reader import Reader

PROMPT_COLUMNS = (
    "id",
    "category",
    "prompt_tokens",
    "new_tokens",
    "iterations",
    "throughput",
    "tokens_per_iteration",
    "acceptance_rate",
    "mean_tree_size",
    "total_s",
)
FRAME_COLUMNS = (
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "tau_lo",
    "tau_hi",
    "lossless",
    "ar_equal",
    "speedup_note",
    "machine",
)


class NotFound(LookupError):
    """No such trial (the page answers 404)."""


def trial_page(reader: Reader, trial_id: int) -> dict[str, Any]:
    def read(s):
        t = s.get(Trial, trial_id)
        if t is None:
            return None
        r = s.scalars(select(Result).where(Result.trial_id == trial_id)).first()
        names = s.scalars(
            select(Sweep.name).join(SweepTrial).where(SweepTrial.trial_id == trial_id)
        ).all()
        cols = {c.name: getattr(t, c.name) for c in Trial.__table__.columns}
        res = None if r is None else {c.name: getattr(r, c.name) for c in Result.__table__.columns}
        return cols, res, list(names)

    found = reader.store.transact("reading a trial", read)
    if found is None:
        raise NotFound(f"no trial {trial_id} in {reader.display_url}")
    t, r, sweeps = found
    cfg = TrialConfig.from_dict({**HASH_DEFAULTS, **t["config"]})
    out: dict[str, Any] = {
        "id": trial_id,
        "config_hash": t["config_hash"],
        "label": cfg.label(),
        "config": cfg.to_dict(),
        "sweeps": sweeps,
        "status": str(t["status"]),
        "error": t["error"] or "",
        "error_line": error_line(t["error"]),
        "environment": {
            "code_version": t["code_version"] or "",
            "device": cfg.device,
            "device_name": t["device_name"] or "",
            "host": t["worker_host"] or "",
            "gpu": t["gpu_id"] or "",
            "attempts": t["attempts"],
            "wall_s": t["wall_s"],
            "load_s": t["load_s"],
            "started_at": t["started_at"],
            "finished_at": t["finished_at"],
            "versions": t.get("versions") or {},
            "checkpoints": t["checkpoints"] or [],
        },
        "metrics": {},
        "summary": {},
        "prompts": [],
        "iterations": [],
    }
    prompts = _dataset_prompts(cfg)
    tok = tokenizer(cfg.target, cfg.target_revision)
    if r is not None:
        skip = {"id", "trial_id", "config_hash", "per_prompt", "per_iteration", "created_at"}
        out["metrics"] = {k: cell_value(v) for k, v in r.items() if k not in skip}
        out["summary"] = _from_frame(reader, sweeps, trial_id)
        for i, p in enumerate(r["per_prompt"] or []):
            row = {c: cell_value(p.get(c)) for c in PROMPT_COLUMNS}
            cert = p.get("certificate") or {}
            row["lossless"] = cert.get("lossless")
            row["first_mismatch"] = cert.get("first_mismatch")
            tokens = p.get("tokens") or []
            row["output"] = tok.decode(tokens) if tok else None
            row["tokens"] = tokens
            source = prompts.get(p.get("id"))
            row["prompt"] = source.text if source else None
            row["generate"] = generate_command(cfg, source, i, tok)
            out["prompts"].append(row)
        out["iterations"] = r["per_iteration"] or []
    return out


def _tiny(name: str) -> bool:
    return name in TINY_MODELS


@functools.lru_cache(maxsize=8)
def tokenizer(name: str, revision: str | None = None) -> Any:
    """The target's tokenizer where this machine has it (the built-in byte tokenizer, or the
    tokenizer files of the model's local folder or hub cache: no weights are read), to show
    outputs as text and give `orch generate` the prompt's exact ids; None elsewhere."""
    if _tiny(name):
        return ByteTokenizer()
    folder = local_folder(name, revision)
    if folder is None:
        return None
    try:
        from transformers import AutoTokenizer  # lazy: transformers

        return HFTokenizer(AutoTokenizer.from_pretrained(str(folder)))  # the engine's protocol
    except Exception:  # noqa: BLE001 - no tokenizer files, or ones this transformers cannot read
        return None


def _dataset_prompts(cfg: TrialConfig) -> dict[str, Any]:
    """The trial's prompts by id (empty where the dataset file is missing here)."""
    try:
        return {p.id: p for p in load_prompts(cfg.dataset, n=cfg.prompts, category=cfg.category)}
    except DatasetError:
        return {}


def _from_frame(reader: Reader, sweeps: list[str], trial_id: int) -> dict[str, Any]:
    """The trial's speedup (with its config's interval), certificate and machine, from the
    results frame of its first sweep (as orch query shows them)."""
    for name in sweeps:
        df = reader.frame(name)
        if df is None:
            continue
        row = df[df["trial_id"] == trial_id]
        if not row.empty:
            return {c: cell_value(row.iloc[0][c]) for c in FRAME_COLUMNS if c in row.columns}
    return {}


def generate_command(cfg: TrialConfig, prompt: Any, index: int, tok: Any = None) -> str:
    """`orch generate ...` with the trial's pair and revisions, method, parameters, sampling,
    engine and the seed its `index`-th prompt ran with (orchestrator/run/trial.py), on that
    prompt: its token ids where the target's tokenizer `tok` is here (exactly as the trial
    encoded it: length cut and chat template), else its text."""
    args = [
        "orch",
        "generate",
        "--target",
        cfg.target,
        "--draft",
        cfg.draft,
        "--method",
        cfg.method,
    ]
    for k, v in sorted(cfg.params.items()):
        args += ["--param", f"{k}={v}"]
    args += [
        "--max-new-tokens",
        str(cfg.max_new_tokens),
        "--temperature",
        f"{cfg.temperature:g}",
        "--top-p",
        f"{cfg.top_p:g}",
    ]
    if cfg.draft_temperature is not None:
        args += ["--draft-temperature", f"{cfg.draft_temperature:g}"]
    if cfg.draft_top_p is not None:
        args += ["--draft-top-p", f"{cfg.draft_top_p:g}"]
    args += ["--seed", str((cfg.seed * 1_000_003 + index) % 2**64), "--engine", cfg.engine]
    args += ["--device", cfg.device, "--dtype", cfg.dtype]
    for role, rev in (("target", cfg.target_revision), ("draft", cfg.draft_revision)):
        if rev is not None:
            args += [f"--{role}-revision", rev]
    if prompt is None:
        args += ["--prompt", "PROMPT"]
    elif tok is not None:
        ids = encode_prompt(tok, prompt, prompt_tokens=cfg.prompt_tokens, chat=cfg.chat)
        args += ["--prompt-ids", ",".join(map(str, ids))]
    else:
        args += ["--prompt", prompt.text]
        if cfg.chat is not None:
            args.append("--chat" if cfg.chat else "--no-chat")
    return shlex.join(args)
