"""Our own forward of a Llama / Qwen2 model over the fast paths' slot cache (`engine: fast+lean`,
`compiled+lean`, `graphs+lean`).

Why: on a GPU at batch one a decoding step should cost the time to read the weights once (the
bandwidth floor). Hugging Face's modelling code launches about 50 kernels per layer (1403 per
token for Qwen2.5-7B on `graphs`, docs/gpu.md): the matrix products took 1.15x the floor there,
and its unfused norms, rotary embedding, casts and cache copies another 2.7 ms per token. This
forward runs the same model with the same weights in about ten launches per layer:

    h = norm(x)                                    tree_kernels/rms_norm.py (first layer only)
    qkv = h W_qkv^T (+ b)                          one product: q, k, v projections fused
    q = rope(q); cache[slots] = rope(k), v         tree_kernels/rope_append.py
    a = attention(q, cache[:width], mask)          SDPA, query heads packed per key/value head
    h, x = norm(x + a W_o^T)                       tree_kernels/rms_norm.py (add and norm fused)
    m = silu(g) * u, [g | u] = h W_gu^T            one product, tree_kernels/silu_mul.py
    h, x = norm(x + m W_down^T)                    the next layer's input norm (the last: the
                                                   final norm, over the rows kept for logits)

The Triton kernels run on CUDA (`kernels="auto"`); on a CPU, and inside torch.compile (whose
compiler fuses the same elementwise work itself), each has a pure-torch reference with the
same roundings. The fused projection weights are built once; the Hugging Face modules'
weights become views of them, so the model's memory does not grow, and the Hugging Face
forward (the eager path, forwards that return hidden states) keeps working on the same
storage.

Scope: the static-cache engines (`fast`, `compiled`, `graphs`; engine/runtime/static.py), whose
cache is a `SlotCache`, and forwards that need only logits. Anything else (the eager path's
DynamicCache, forwards that return hidden states for a learned drafter or the NDE selector)
goes to the Hugging Face forward of the same model. Supported: transformers' Llama and Qwen2
(the Qwen2.5 pairs) with SiLU MLPs, no sliding window; a power-of-two head dimension for the
Triton kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.config import ConfigError
from engine.runtime.slots import SlotCache
from tree_kernels.rms_norm import rms_norm, rms_norm_reference
from tree_kernels.rope_append import rope_append, rope_append_reference
from tree_kernels.silu_mul import silu_mul, silu_mul_reference

FAMILIES = ("llama", "qwen2")
KERNELS = ("auto", "triton", "torch")


def check_supported(config) -> None:
    """ConfigError unless this forward computes what the model's own does."""
    kind = getattr(config, "model_type", "?")
    why = None
    if kind not in FAMILIES:
        why = f"its family is {kind!r}, not one of {', '.join(FAMILIES)}"
    elif getattr(config, "hidden_act", "silu") != "silu":
        why = f"its activation is {config.hidden_act!r}, not silu"
    elif getattr(config, "mlp_bias", False):
        why = "its MLP has biases"
    elif getattr(config, "use_sliding_window", False):
        why = "it uses sliding-window attention"
    if why:
        raise ConfigError(
            f"engine +lean: the model is not supported: {why} (use the engine without +lean)"
        )


@dataclass(frozen=True)
class Layer:
    qkv: torch.Tensor  # [(H + 2 H_kv) D, hidden]
    qkv_bias: torch.Tensor | None  # [(H + 2 H_kv) D] (Qwen2)
    o: torch.Tensor  # [hidden, H D]
    o_bias: torch.Tensor | None
    gate_up: torch.Tensor  # [2 I, hidden]
    down: torch.Tensor  # [hidden, I]
    norm_in: torch.Tensor  # [hidden]
    norm_post: torch.Tensor  # [hidden]


@dataclass(frozen=True)
class LeanOutput:
    logits: torch.Tensor  # [1, keep or n, V]
    hidden_states: None = None


def fuse(*linears: torch.nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The linears' weights (and biases) stacked by output row; each linear's parameters
    become views of the stacked ones, so nothing is stored twice."""
    weight = torch.cat([m.weight.detach() for m in linears])
    has_bias = linears[0].bias is not None
    bias = torch.cat([m.bias.detach() for m in linears]) if has_bias else None
    start = 0
    for m in linears:
        rows = slice(start, start + m.weight.shape[0])
        m.weight = torch.nn.Parameter(weight[rows], requires_grad=False)
        if has_bias:
            m.bias = torch.nn.Parameter(bias[rows], requires_grad=False)
        start = rows.stop
    return weight, bias


class LeanLM:
    """A Hugging Face Llama / Qwen2 causal LM with our forward on the slot cache (module
    docstring). Called like the model (the keywords engine/runtime/static.py passes); every
    other attribute is the wrapped model's (`config`, `device`, `dtype`, `generate`, ...)."""

    def __init__(self, model, kernels: str = "auto") -> None:
        check_supported(model.config)
        if kernels not in KERNELS:
            raise ConfigError(f"kernels: {kernels!r} is not one of {', '.join(KERNELS)}")
        self.hf = model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.scale = self.head_dim**-0.5
        pow2 = self.head_dim & (self.head_dim - 1) == 0
        on_cuda = model.device.type == "cuda"
        self.triton = kernels == "triton" or (kernels == "auto" and on_cuda and pow2)
        if self.triton and not pow2:
            raise ConfigError(f"kernels triton: head dim {self.head_dim} is not a power of two")
        inner = model.model
        self.embed = inner.embed_tokens
        self.rotary = inner.rotary_emb
        self.final_norm = inner.norm.weight
        self.lm_head = model.lm_head.weight
        self.layers = []
        for block in inner.layers:
            att, mlp = block.self_attn, block.mlp
            qkv, qkv_bias = fuse(att.q_proj, att.k_proj, att.v_proj)
            gate_up, _ = fuse(mlp.gate_proj, mlp.up_proj)
            self.layers.append(
                Layer(
                    qkv=qkv,
                    qkv_bias=qkv_bias,
                    o=att.o_proj.weight,
                    o_bias=att.o_proj.bias,
                    gate_up=gate_up,
                    down=mlp.down_proj.weight,
                    norm_in=block.input_layernorm.weight,
                    norm_post=block.post_attention_layernorm.weight,
                )
            )

    def __getattr__(self, name):  # only for names this object does not have itself
        return getattr(self.hf, name)

    def __call__(
        self,
        input_ids,
        position_ids=None,
        attention_mask=None,
        past_key_values=None,
        use_cache=True,
        logits_to_keep=0,
        output_hidden_states=False,
        **kwargs,
    ):
        if not isinstance(past_key_values, SlotCache) or output_hidden_states or kwargs:
            return self.hf(
                input_ids=input_ids,
                position_ids=position_ids,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                use_cache=use_cache,
                logits_to_keep=logits_to_keep,
                output_hidden_states=output_hidden_states,
                **kwargs,
            )
        logits = self.forward(
            input_ids[0], position_ids, attention_mask, past_key_values, logits_to_keep
        )
        return LeanOutput(logits)

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        cache: SlotCache,
        keep: int = 0,
    ) -> torch.Tensor:
        """Logits [1, keep or n, V] of n new tokens [n] at positions [1, n] under the additive
        mask [1, 1, n, width]; their keys and values go to the cache's slots."""
        kernels = self.triton and not torch.compiler.is_compiling()
        norm = rms_norm if kernels else rms_norm_reference
        rope = rope_append if kernels else rope_append_reference
        act = silu_mul if kernels else silu_mul_reference
        n, heads, kv_heads, d = tokens.shape[0], self.heads, self.kv_heads, self.head_dim
        groups = heads // kv_heads
        x = self.embed(tokens)  # [n, hidden]
        cos, sin = (c[0].contiguous() for c in self.rotary(x, positions))  # [n, D] each
        # query heads packed per key/value head: rows g n + t of head j are query head
        # j groups + g at row t, so each row's mask is its token's, repeated per group
        mask = mask.expand(1, groups, n, -1).reshape(1, 1, groups * n, -1)  # [1, 1, G n, W]
        kv, slots, width = cache.kv, cache.slots, cache.width
        h, x = norm(x, None, self.layers[0].norm_in, self.eps)
        for i, layer in enumerate(self.layers):
            qkv = F.linear(h, layer.qkv, layer.qkv_bias)  # [n, (H + 2 H_kv) D]
            q = rope(qkv, cos, sin, kv[i], slots, heads, kv_heads)  # [H, n, D]
            a = F.scaled_dot_product_attention(
                q.view(1, kv_heads, groups * n, d),
                kv[i, 0, :, :, :width],  # [1, H_kv, W, D]
                kv[i, 1, :, :, :width],
                attn_mask=mask,
                scale=self.scale,
            )  # [1, H_kv, G n, D] = [H, n, D]
            # reshape, not view: a CUDA kernel may return its output in [G n, H_kv, D] order
            a = a.reshape(heads, n, d).transpose(0, 1).reshape(n, heads * d)
            h, x = norm(F.linear(a, layer.o, layer.o_bias), x, layer.norm_post, self.eps)
            m = F.linear(act(F.linear(h, layer.gate_up)), layer.down)  # [n, hidden]
            if i + 1 < len(self.layers):
                h, x = norm(m, x, self.layers[i + 1].norm_in, self.eps)
            else:  # the final norm, over the rows whose logits are kept
                rows = slice(n - keep if keep else 0, n)
                h, _ = norm(m[rows].contiguous(), x[rows].contiguous(), self.final_norm, self.eps)
        return F.linear(h, self.lm_head)[None]


# a model's LeanLM lives on the model (as engine/runtime/static.py's cached models do): its fused
# weights are made once, however often a benchmark asks for it
_LEAN = "_orch_lean"


def lean(model, kernels: str = "auto") -> LeanLM:
    """`model` (a Hugging Face Llama / Qwen2 causal LM, on its device and dtype) with our
    forward, made once per model and `kernels`; ConfigError for another family."""
    if isinstance(model, LeanLM):
        return model
    made = vars(model).setdefault(_LEAN, {})
    if kernels not in made:
        made[kernels] = LeanLM(model, kernels)
    return made[kernels]
