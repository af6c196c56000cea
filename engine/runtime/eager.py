"""A causal LM with its KV cache: committed prefix, tree append, compaction to the accepted path.

Cache layout during one decoding iteration (S = sequence axis of every layer's keys/values):

    [ committed tokens 0 .. committed-1 | tree nodes appended in feed order ]

Tree nodes are fed with an additive ancestor-only mask and explicit position ids
(prefix + depth), which for Llama/Qwen2 and GPTNeoX gives the same keys/values as feeding the
accepted path one token at a time. After verification `keep` selects the committed slots plus
the accepted nodes' slots, so the prefix is never recomputed (SpecInfer Sec. 4; DDTree Sec. 3.3).
"""

from __future__ import annotations

import contextlib
import functools

import torch

from engine.clock import Clock
from engine.sampling import top_probs, top_token
from engine.transfer import to_device
from engine.tree import additive_mask


def head(logits: torch.Tensor, top: int, argmax: bool):
    """What a forward returns from its logits [n, V] (CachedModel.forward): the logits, the
    top-k pair (top > 0) or the argmax [n]."""
    if argmax:
        return top_token(logits)
    return top_probs(logits, top) if top else logits


def extras(out, layers: tuple[int, ...], tap: bool):
    """A forward's outputs beside its head: the rows of hidden_states[i] for i in `layers`,
    concatenated [n, H * len(layers)] (None without layers), and when `tap` its logits [r, V]
    with the final hidden states of the same rows [r, H] (the LM head's input; None without)."""
    hidden = torch.cat([out.hidden_states[i][0] for i in layers], -1) if layers else None
    if not tap:
        return hidden, None
    logits = out.logits[0]  # [r, V]: `logits_to_keep` sliced the rows before the LM head
    return hidden, (logits, out.hidden_states[-1][0, -logits.shape[0] :])


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


NO_CONTEXT = contextlib.nullcontext()  # reusable: a forward with nothing to enter


def inference(fn):
    """`torch.inference_mode` around fn, entered only when it is not on already. generate()
    runs whole generations in inference mode, and entering it per forward (the decorator
    `@torch.inference_mode()`) cost about 50 us of host time per forward on the real models,
    more than the rest of a one-token forward's host work (docs/fast_path.md)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if torch.is_inference_mode_enabled():
            return fn(*args, **kwargs)
        with torch.inference_mode():
            return fn(*args, **kwargs)

    return run


class CachedModel:
    fast = False  # the eager reference path (engine/runtime/static.py: the fast one)
    padded = False  # forwards padded to size buckets and run as graphs (engine/runtime/static.py)
    # hidden_states indices (0: embeddings) whose rows each forward keeps in `hidden`
    # [n, H * len(hidden_layers)], concatenated: the target features of a drafter conditioned
    # on them (DDTree's block drafter, engine/drafters/ddtree/block.py). The model returns them
    # with its outputs (output_hidden_states: references to tensors the forward computes
    # anyway), so keeping them costs no extra compute.
    hidden_layers: tuple[int, ...] = ()
    hidden: torch.Tensor | None = None
    # the NDE selector's taps (engine/drafters/delayed/taps.py): when set, each forward keeps the
    # logits [r, V] and final hidden states [r, H] of the rows it returns (r: `keep`, or all n) in
    # `tapped`, read from the model's outputs (not by a hook: a replayed CUDA graph runs none)
    tap: bool = False
    tapped: tuple[torch.Tensor, torch.Tensor] | None = None

    def __init__(self, model) -> None:
        from transformers import DynamicCache  # lazy: transformers

        self.model = model
        self.device = model.device
        self.dtype = model.dtype
        self.cache = DynamicCache(config=model.config)
        self.committed = 0  # leading cache slots that hold committed tokens
        self.use_clock(Clock(self.device))
        self.forward_calls = 0
        self.forward_tokens = 0  # tokens fed over all forwards

    def use_clock(self, clock: Clock) -> None:
        """Time the forwards from now on with `clock` (a generation's, shared by both models)."""
        self.clock = clock
        self.spans: list[tuple[int, int]] = []  # each forward's (start, end) stamps on it

    @property
    def forward_seconds(self) -> float:
        """Time inside model forwards since use_clock (on CUDA events: a synchronisation)."""
        return self.clock.spans(self.spans)

    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    @inference
    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        visible: torch.Tensor | None = None,
        parents: torch.Tensor | None = None,
        keep: int = 0,
        top: int = 0,
        argmax: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Append `tokens` [n] at `positions` [n]; returns logits [n, V], or of the last
        `keep` tokens only [keep, V] (keep=0: all).

        top > 0: instead of the logits, the `top` most probable tokens of each row's softmax
        and their probabilities (engine/sampling.py top_probs), computed inside the forward:
        on the fast path they are part of the compiled graph, and no [n, V] tensor leaves it.
        argmax: instead of the logits, each row's top token [n] (the greedy verifier's only
        need), computed inside the forward as well.

        visible: [n, length + n] bool over all cache slots then the new tokens; None means the
        new tokens are a causal continuation of everything in the cache.
        parents: [n] when the new tokens are one tree right after the committed prefix (the
        verification forward); models switched to the "tree_triton" attention then run the
        Triton tree kernel instead of a dense masked attention.
        """
        n = tokens.shape[0]
        kwargs, ctx = self._inputs(tokens, positions, visible, parents)
        start = self.clock.stamp()
        with ctx:
            out = self._run_model(kwargs, keep, top, argmax)  # logits, top-k pair or argmax
        self.spans.append((start, self.clock.stamp()))
        self.forward_calls += 1
        self.forward_tokens += n
        return out

    def _inputs(
        self, tokens, positions, visible, parents
    ) -> tuple[dict, contextlib.AbstractContextManager]:
        """The model's keyword arguments for one forward over the DynamicCache, and the context
        to run it in (the Triton tree kernel's parents, when the model uses it)."""
        n = tokens.shape[0]
        mask = None
        if visible is not None and not bool(visible.all()):
            mask = additive_mask(visible, self.dtype)[None, None]  # [1, 1, n, length + n]
        ctx = self._tree_kernel(n, parents, self.length)
        kwargs = dict(
            input_ids=tokens.view(1, n),
            position_ids=positions.view(1, n),
            attention_mask=mask,
            past_key_values=self.cache,
        )
        return kwargs, ctx

    def _tree_kernel(self, n: int, parents, start: int) -> contextlib.AbstractContextManager:
        """The context a verification forward runs in: the Triton tree kernel's parents when
        the model was switched to the "tree_triton" attention (tree_kernels/hf_attention.py) and the
        n new tokens are one tree right after the committed prefix (start: the cache length
        before them); else nothing."""
        if (
            parents is None
            or n < 2
            or start != self.committed
            or self.model.config._attn_implementation != "tree_triton"
        ):
            return NO_CONTEXT
        from tree_kernels.hf_attention import tree_parents  # lazy: transformers

        return tree_parents(parents)

    def _run_model(self, kwargs: dict, keep: int, top: int = 0, argmax: bool = False):
        layers, tap = self.outputs
        out = self.model(
            **kwargs, use_cache=True, logits_to_keep=keep, output_hidden_states=bool(layers) or tap
        )
        self.keep_extras(*extras(out, layers, tap))
        return head(out.logits[0], top, argmax)

    @property
    def outputs(self) -> tuple[tuple[int, ...], bool]:
        """What a forward returns beside its head: (hidden_layers, tap)."""
        return self.hidden_layers, self.tap

    def keep_extras(self, hidden: torch.Tensor | None, tapped) -> None:
        """Keep a forward's extras (engine.runtime.eager.extras) that were asked for."""
        if self.hidden_layers:
            self.hidden = hidden
        if self.tap:
            self.tapped = tapped

    def extend(self, tokens: list[int], keep: int = 1) -> torch.Tensor | None:
        """Feed committed tokens causally (prefill / catch-up); returns the logits of the last
        `keep` of them [keep, V] (keep=0: all [n, V]). Only the last row is ever needed to
        decode: the prefill of a long prompt skips an [n, V] LM-head product (on a GPU, a
        2k-token prompt's fp32 logits over a 152k vocabulary alone are 1.2 GB)."""
        if not tokens:
            return None
        assert self.length == self.committed, "extend() with uncommitted tree nodes in cache"
        ids = to_device(tokens, self.device, torch.long)
        pos = torch.arange(self.committed, self.committed + len(tokens), device=self.device)
        logits = self.forward(ids, pos, keep=keep)
        self.committed += len(tokens)
        return logits

    @inference
    def commit(self, accepted_slots: list[int]) -> None:
        """Keep the committed prefix followed by the given tree slots (ascending, as any
        root-to-leaf path in topological order is); drop every other tree node.

        Only slots not already in place are moved, then the cache is cropped: a chain whose
        nodes were fed in order (linear drafts, the first branch of a tree) costs no copy.
        """
        n, k = self.committed, len(accepted_slots)
        dest = list(range(n, n + k))
        moved = [(d, s) for d, s in zip(dest, accepted_slots) if d != s]
        if moved:
            dst = to_device([d for d, _ in moved], self.device)
            src = to_device([s for _, s in moved], self.device)
        for layer in self.cache.layers:
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                continue
            if moved:  # gather first (a copy), then scatter: safe since dst <= src
                layer.keys[..., dst, :] = layer.keys[..., src, :]
                layer.values[..., dst, :] = layer.values[..., src, :]
            layer.keys = layer.keys[..., : n + k, :]
            layer.values = layer.values[..., : n + k, :]
        self.committed = n + k
