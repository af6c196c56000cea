"""EAGLE heads on disk: the public EAGLE format, our named checkpoints, and the `eagle:` draft
names a pair loads a head by (engine/models.py).

The public format (EAGLE's released heads, e.g. yuhuili/EAGLE-LLaMA2-Chat-7B) is a folder:

    config.json         a Llama-style config of the one layer: hidden_size, intermediate_size,
                        num_attention_heads, num_key_value_heads, num_hidden_layers = 1,
                        rms_norm_eps, rope_theta, rope_scaling, max_position_embeddings,
                        vocab_size, hidden_act, "bias" (fc's bias), "qkv_bias" (present for
                        Qwen2 targets: the attention projections' biases; EAGLE's code gives
                        them biases when the key is there, so a Qwen2 target's head without
                        it has a bias-free, Llama-style layer, which loads as family llama)
    pytorch_model.bin   a torch-saved state dict: fc.weight, fc.bias, layers.0.self_attn.
                        {q,k,v,o}_proj.weight (+ q/k/v .bias with qkv_bias), layers.0.mlp.
                        {gate,up,down}_proj.weight, layers.0.post_attention_layernorm.weight,
                        and embed_tokens.weight (EAGLE's loader is strict and expects it)
    (or model.safetensors with the same keys)

A head with a draft vocabulary (ours, after EAGLE-3) adds `draft_vocab_size` to config.json
and EAGLE-3's buffers `d2t` [Vd] (draft id d is target id d + d2t[d]) and `t2d` [V] (bool) to
the tensors; its logits are the target LM head's rows of those ids.

Loading ignores embed_tokens.weight beyond its shape: the head always uses the target's
embedding (shared and frozen, engine/runtime/eagle_head.py). `save_folder` writes the format,
with embed_tokens.weight only when given the target's (for EAGLE's own code to load it); our
named checkpoints (kind "eagle", engine/checkpoint.py, written by `orch train eagle`) hold the
head's own tensors only, with its HeadConfig.

Draft names: `eagle:NAME` is the named checkpoint NAME, `eagle:PATH` (a path: it has a `/` or
starts with `~` or `.`) a folder in the public format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from engine.checkpoint import describe, find, load
from engine.config import ConfigError
from engine.runtime.eagle_head import EagleHead, HeadConfig

EAGLE_PREFIX = "eagle:"
KIND = "eagle"  # the named checkpoints' kind
WEIGHTS = ("pytorch_model.bin", "model.safetensors")
EMBED = "embed_tokens.weight"


def eagle_config(c: HeadConfig) -> dict[str, Any]:
    """The public format's config.json of a head."""
    rope = dict(c.rope_parameters)
    rope_type = rope.pop("rope_type", "default")
    theta = rope.pop("rope_theta", 10000.0)
    scaling = None if rope_type == "default" else {"type": rope_type, **rope}
    out = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": theta,
        "rope_scaling": scaling,
        "max_position_embeddings": c.max_position_embeddings,
        "vocab_size": c.vocab_size,
        "pretraining_tp": 1,
        "bias": c.fc_bias,
        "target_family": c.family,  # ours: which decoder layer (EAGLE's code ignores it)
    }
    if c.draft_vocab_size:  # EAGLE-3's key; its d2t / t2d buffers go with the tensors
        out["draft_vocab_size"] = c.draft_vocab_size
    if c.qkv_bias:
        out["qkv_bias"] = True
    return out


def head_config_from(raw: dict[str, Any], where: str) -> HeadConfig:
    """A HeadConfig from a public config.json; ConfigError naming what is wrong."""
    try:
        if int(raw.get("num_hidden_layers", 1)) != 1:
            raise ConfigError(f"{where}: an EAGLE head has one layer (num_hidden_layers = 1)")
        if raw.get("hidden_act", "silu") != "silu":
            raise ConfigError(f"{where}: hidden_act {raw['hidden_act']!r}, not silu")
        heads = int(raw["num_attention_heads"])
        scaling = raw.get("rope_scaling") or None
        rope: dict[str, Any] = {"rope_type": "default"}
        if scaling:
            rope = {k: v for k, v in scaling.items() if k not in ("type", "rope_type")}
            rope["rope_type"] = scaling.get("rope_type", scaling.get("type"))
        rope["rope_theta"] = float(raw.get("rope_theta", 10000.0))
        qkv_bias = bool(raw.get("qkv_bias", False))
        return HeadConfig(
            family=raw.get("target_family") or ("qwen2" if qkv_bias else "llama"),
            hidden_size=int(raw["hidden_size"]),
            intermediate_size=int(raw["intermediate_size"]),
            num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or int(raw["hidden_size"]) // heads),
            vocab_size=int(raw["vocab_size"]),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_parameters=rope,
            max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
            fc_bias=bool(raw.get("bias", True)),
            qkv_bias=qkv_bias,
            draft_vocab_size=int(raw.get("draft_vocab_size") or 0),
        )
    except KeyError as e:
        raise ConfigError(f"{where}: config.json has no {e.args[0]}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"{where}: config.json: {e}") from None


def save_folder(head: EagleHead, folder: str | Path, embed: torch.Tensor | None = None) -> Path:
    """Write `head` in the public format; `embed` (the target's embedding [V, H]) is written
    as embed_tokens.weight for EAGLE's strict loader (None: left out)."""
    out = Path(folder).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    if embed is not None:
        state[EMBED] = embed.detach().cpu().contiguous()
    torch.save(state, out / WEIGHTS[0])
    (out / "config.json").write_text(json.dumps(eagle_config(head.cfg), indent=1))
    return out


def _read_state(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / WEIGHTS[0]).is_file():
        return torch.load(folder / WEIGHTS[0], map_location="cpu", weights_only=True)
    if (folder / WEIGHTS[1]).is_file():
        return load_file(str(folder / WEIGHTS[1]))
    raise ConfigError(f"EAGLE head folder {folder} has no {' or '.join(WEIGHTS)}")


def build(c: HeadConfig, state: dict[str, torch.Tensor], where: str) -> EagleHead:
    """A head of config c with the tensors `state` (embed_tokens.weight, if any, checked
    for its shape and left out: the target's is used)."""
    state = dict(state)
    embed = state.pop(EMBED, None)
    if embed is not None and tuple(embed.shape) != (c.vocab_size, c.hidden_size):
        raise ConfigError(
            f"{where}: {EMBED} is {tuple(embed.shape)}, not [vocab_size, hidden_size]"
        )
    head = EagleHead(c)
    own = head.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or wrong:
        what = [
            f"{name}: {', '.join(keys[:3])}"
            for name, keys in (("missing", missing), ("unexpected", unexpected), ("shape", wrong))
            if keys
        ]
        raise ConfigError(f"{where}: not an EAGLE head of its config ({'; '.join(what)})")
    head.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()})
    return head


def load_folder(folder: str | Path) -> EagleHead:
    """A head in the public format (ConfigError, one line, when it is not one)."""
    path = Path(folder).expanduser()
    where = f"EAGLE head folder {path}"
    try:
        raw = json.loads((path / "config.json").read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {where}: config.json: {e.strerror or e}") from None
    except ValueError:
        raise ConfigError(f"{where}: config.json is not valid JSON") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: config.json is not a JSON object")
    return build(head_config_from(raw, where), _read_state(path), where)


def is_path(ref: str) -> bool:
    return "/" in ref or ref.startswith(("~", "."))


def head_ref(name: str) -> str:
    """NAME or PATH of a draft name `eagle:...` (ConfigError when empty)."""
    ref = name[len(EAGLE_PREFIX) :]
    if not ref:
        raise ConfigError("an EAGLE draft is eagle:CHECKPOINT or eagle:PATH, with a name")
    return ref


def locate_head(name: str, local: bool = True) -> None:
    """Check that the draft name `eagle:...` names a head, without loading it: a named
    checkpoint always, a folder where it is loaded (local=False: a driver validating for
    remote workers leaves a path to them, as engine/models.py does for model folders)."""
    ref = head_ref(name)
    if is_path(ref) and not local:
        return
    if is_path(ref):
        path = Path(ref).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(f"EAGLE head folder {path} has no config.json")
        return
    find(ref, KIND)


def load_head(name: str, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """The fields of engine/models.py's LoadedModel for the draft name `eagle:...`: the head in
    eval mode, frozen, on `device` in `dtype`, with what a trial records of it."""
    ref = head_ref(name)
    if is_path(ref):
        head, record = load_folder(ref), {"name": ref, "kind": "eagle-folder"}
    else:
        ckpt, state = load(ref, KIND)
        head = build(HeadConfig(**state["head_config"]), state["weights"], f"checkpoint {ref}")
        record = describe(ckpt.name, KIND)
    head = head.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return {
        "model": head,
        "tokenizer": SharedTokenizer(head.cfg.vocab_size),
        "device": device,
        "dtype": dtype,
        "checkpoint": record,
    }


class SharedTokenizer:
    """An EAGLE head's tokenizer: the target's (the head reads and drafts the target's tokens);
    it knows the vocabulary size only, for the pair's vocabulary check."""

    eos_token_id = None

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
