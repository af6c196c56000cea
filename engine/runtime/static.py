"""The fast path's KV cache: preallocated, appended in place, compacted in place (`engine: fast`).

Same interface and cache layout as `CachedModel` (engine/runtime/eager.py: committed prefix, then
the tree nodes of this iteration); what changes is how the keys/values are kept:

- One buffer `kv` [layers, 2, 1, H_kv, capacity, D] is allocated up front. A forward of n new
  tokens writes their keys/values at slots [length, length + n) with `index_copy_`: no
  `torch.cat` of the whole cache per layer and forward (DynamicCache), no reallocation.
- `commit` moves the accepted slots down with one gather and one scatter over all layers at
  once, then lowers the length; nothing is freed.
- Masks are built on the model's device: no host read of a tensor value inside a forward (the
  eager path's `bool(visible.all())`).
- Padded graph forwards (`engine: compiled` and `engine: graphs`, PADDED in engine/config.py):
  each forward of up to GRAPH_MAX new tokens (tree verification, draft steps; a long prompt's
  prefill runs as on the fast path) is padded to a size bucket (`bucket`: 1 or 2^k + 1, the
  sizes of a root plus a power-of-two budget) and attends to all `capacity` slots with the
  unused tail masked, so every forward of one bucket has the same shapes. `compiled`:
  `torch.compile` captures one graph per bucket, with CUDA graphs on CUDA
  (`mode="reduce-overhead"`). `graphs`: one CUDA graph per bucket recorded from the eager
  kernels, no compilation (engine/runtime/cuda_graphs.py). Pad rows see only their own slot and
  their keys land past the length, where the next forward overwrites them.

Uncompiled, a forward attends to the first length + n slots only (views of the buffer), so
attention costs what the eager path's does, and a target loaded with the "tree_triton"
attention runs its verification forwards through the Triton tree kernel
(tree_kernels/hf_attention.py) as on the eager path.
"""

from __future__ import annotations

import torch

from engine.clock import Clock
from engine.config import PADDED
from engine.runtime.cuda_graphs import GraphedForward
from engine.runtime.eager import NO_CONTEXT, CachedModel, extras, head, inference
from engine.runtime.slots import SlotCache, kv_shape
from engine.transfer import to_device
from engine.tree import additive_mask

MIN_CAPACITY = 256
# padded engines: forwards of more new tokens (a long prompt's prefill) run as on the fast path.
# 513: the largest bucket, a root plus a 512-node budget (DDTree's B = 512; DynaTree's N_max +
# 1 = 257 rows and DDTree's default 257 fit below it: with the earlier limit of 256 their
# verification forwards ran eager on `graphs`, about 20 ms each on the H100 of docs/gpu.md)
GRAPH_MAX = 513


def bucket(n: int) -> int:
    """The padded forward size for n new tokens: 1, else the smallest 2^k + 1 >= n. Trees are a
    root plus a power-of-two budget (DynaTree N_max, DySpec's and SALF's budgets, DDTree's B),
    so their verification forwards fit a bucket exactly, where the next power of two would pad
    a 257-node tree to 512 rows; padding stays under 2x."""
    return 1 if n <= 1 else (1 << (n - 2).bit_length()) + 1


class StaticCachedModel(CachedModel):
    """A causal LM over a preallocated KV cache; see the module docstring."""

    fast = True

    def __init__(self, model, capacity: int = MIN_CAPACITY, engine: str = "fast") -> None:
        self.model = model
        self.device = model.device
        self.on_cuda = self.device.type == "cuda"
        self.dtype = model.dtype
        self.committed = 0
        self.use_clock(Clock(self.device))
        self.forward_calls = 0
        self.forward_tokens = 0
        self._length = 0
        self._n = 0  # rows of the current forward before padding
        self._graph = False  # whether the current forward runs a graph (padded)
        self.engine = engine
        self.padded = (
            engine in PADDED
        )  # forwards padded to buckets and run as graphs (compiled, graphs)
        self.cache = SlotCache(self._alloc(max(capacity, MIN_CAPACITY)))
        self._graph_call = None
        self._graphed: dict[str, GraphedForward] = {}  # graphed(): other graphs over this cache
        if engine == "graphs":
            self._graph_call = GraphedForward(self._model_call, self.device)
        elif engine == "compiled":
            # every bucket of every compiled model is a recompile of one function (_model_call):
            # torch's default limit (8) would silently send later ones back to eager
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self._graph_call = torch.compile(self._model_call, mode=mode, dynamic=False)

    def _alloc(self, capacity: int) -> torch.Tensor:
        layers, kv_heads, head_dim = kv_shape(self.model.config)
        kv = torch.zeros(
            layers, 2, 1, kv_heads, capacity, head_dim, dtype=self.dtype, device=self.device
        )
        self._capacity = capacity
        self._slot_ids = torch.arange(capacity, device=self.device)  # [capacity]
        # [1, 1, 1, capacity] the additive mask of a one-token forward, read-only (a view of
        # its first slots per forward)
        self._open = torch.zeros(1, 1, 1, capacity, dtype=self.dtype, device=self.device)
        if self.padded:
            torch._dynamo.mark_static_address(kv)
        return kv

    def reset(self, capacity: int) -> None:
        """Empty the cache (keeping its buffer, grown to `capacity` if smaller) and the
        counters, for a new generation."""
        self.committed = self._length = 0
        self.use_clock(Clock(self.device))
        self.forward_calls, self.forward_tokens = 0, 0
        if capacity > self.capacity:
            self._grow(capacity)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def length(self) -> int:
        return self._length

    def _grow(self, needed: int) -> None:
        """Double the buffer until `needed` slots fit (a long generation or a huge tree);
        graphs are captured again for the new shapes and buffer."""
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        old = self.cache.kv
        self.cache.kv = self._alloc(capacity)
        self.cache.kv[..., : old.shape[4], :] = old
        if isinstance(self._graph_call, GraphedForward):
            self._graph_call.clear()
        for graphed in self._graphed.values():
            graphed.clear()

    def reserve(self, slots: int) -> None:
        """Grow the buffer to hold `slots` slots, if smaller (before a recorded step writes)."""
        if slots > self._capacity:
            self._grow(slots)

    @property
    def slot_ids(self) -> torch.Tensor:
        """[capacity] long 0, 1, ...: each slot's index (a recorded step's masks and slots)."""
        return self._slot_ids

    def recorded_call(self, **kwargs):
        """One forward inside a step that records this model's forwards with the work between
        them (graphed(); engine/iteration/static_tree.py): `_model_call(**kwargs)` attending to all
        `capacity` slots (kwargs' mask [1, 1, rows, capacity]), returning (head, extras). On
        `engine: compiled` the compiled forward, each call a new step of its CUDA graphs, its
        outputs copied out (a caller may keep a view of one past the next call). The caller
        accounts for the slots it wrote (`recorded`)."""
        self._graph, self.cache.width = True, self._capacity
        if self.engine != "compiled":
            return self._model_call(**kwargs)
        if not self.on_cuda:
            return self._graph_call(**kwargs)
        torch.compiler.cudagraph_mark_step_begin()
        return _copy(self._graph_call(**kwargs))

    def recorded(self, rows: int, calls: int, span: tuple[int, int]) -> None:
        """A recorded step wrote `rows` slots after the length in `calls` forwards, between
        the two stamps of `span` on this model's clock (its work between the forwards
        included)."""
        self._length += rows
        self.forward_calls += calls
        self.forward_tokens += rows
        self.spans.append(span)

    def graphed(self, name: str, fn) -> GraphedForward:
        """A GraphedForward of `fn` made once per model and name, for a step that records this
        model's forwards (`_model_call`) with the work between them in one graph
        (engine/iteration/static_tree.py); dropped with the model's own graphs when the cache
        grows."""
        if name not in self._graphed:
            self._graphed[name] = GraphedForward(fn, self.device)
        return self._graphed[name]

    def _model_call(
        self,
        input_ids,
        position_ids,
        mask,
        slots,
        keep: int = 0,
        top: int = 0,
        argmax=False,
        outputs: tuple[tuple[int, ...], bool] = ((), False),
    ):
        """The model over the slot cache: the logits, or their top-k / argmax computed in the
        forward (CachedModel.forward); `outputs` (CachedModel.outputs), the extras it also
        returns. A graph (padded) returns (head, extras) for _run_model to slice and keep."""
        self.cache.slots = slots
        layers, tap = outputs
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=mask,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=keep,
            output_hidden_states=bool(layers) or tap,
        )
        result = head(out.logits[0], top, argmax)
        if self._graph:
            return result, extras(out, layers, tap)
        self.keep_extras(*extras(out, layers, tap))
        return result

    @inference
    def step(self, token: torch.Tensor, position: torch.Tensor, top: int = 0, argmax=False):
        """forward(token, position, keep=1, top=top, argmax=argmax) for one token [1] that sees
        every slot, a causal continuation: the commonest forward of a generation (each draft
        step of a chain, each autoregressive step), with a fraction of forward()'s host work:
        its mask is a view of the preallocated open row, and no keyword dict or context is
        built. Compiled models take forward() (padded graph shapes)."""
        if self.padded:
            return self.forward(token, position, keep=1, top=top, argmax=argmax)
        start = self._length
        width = self._length = start + 1
        if width > self._capacity:
            self._grow(width)
        self.cache.width, self._graph = width, False
        mask, slots = self._open[..., :width], self._slot_ids[start:width]  # zeros: all seen
        t0 = self.clock.stamp()
        out = self._model_call(
            token.view(1, 1), position.view(1, 1), mask, slots, 1, top, argmax, self.outputs
        )
        self.spans.append((t0, self.clock.stamp()))
        self.forward_calls += 1
        self.forward_tokens += 1
        return out

    def _inputs(self, tokens, positions, visible, parents):
        """Slots, positions and the additive mask [1, 1, rows, width], built on the device;
        the cache's length then counts the n new tokens (CachedModel.forward runs the model
        next, with no method call in between that reads it).

        visible: [n, length + n] bool or None (causal continuation)."""
        n, start = tokens.shape[0], self._length
        self._n, self._graph = n, self.padded and n <= GRAPH_MAX
        self._length = start + n
        rows = bucket(n) if self._graph else n
        if start + rows > self._capacity:
            self._grow(start + rows)
        width = self._capacity if self._graph else start + n
        dev = self.device
        cols = self._slot_ids[:width] if visible is None or rows > n else None  # [width]
        slots = self._slot_ids[start : start + rows]  # [rows]
        if visible is None:  # causal: node i sees every slot up to its own
            seen = cols[None, :] <= slots[:n, None]  # [n, width]
        elif not self._graph:  # width = start + n: the visibility as it is
            seen = to_device(visible, dev)
        else:
            seen = torch.zeros(n, width, dtype=torch.bool, device=dev)
            seen[:, : start + n] = to_device(visible, dev)
        if rows > n:  # pad rows see only their own slot
            seen = torch.cat([seen, cols[None, :] == slots[n:, None]])
            tokens = torch.cat([tokens, tokens[-1:].expand(rows - n)])
            positions = torch.cat([positions, positions[-1:].expand(rows - n)])
        self.cache.width = width
        kwargs = dict(
            input_ids=tokens.view(1, rows),
            position_ids=positions.view(1, rows),
            mask=additive_mask(seen, self.dtype)[None, None],
            slots=slots,
        )
        # the tree kernel reads keys [P + N] with the tree last: uncompiled forwards only (a
        # compiled one attends to every slot, padded)
        return kwargs, NO_CONTEXT if self._graph else self._tree_kernel(n, parents, start)

    def _run_model(self, kwargs: dict, keep: int, top: int = 0, argmax: bool = False):
        """[n or keep, V] (or the top-k pair, or the argmax): compiled forwards compute every
        (padded) row, then drop pads."""
        if not self._graph:
            return self._model_call(
                **kwargs, keep=keep, top=top, argmax=argmax, outputs=self.outputs
            )
        rows = slice(self._n - keep, self._n) if keep else slice(0, self._n)
        cuda_graphs = self.device.type == "cuda"
        if cuda_graphs and not isinstance(self._graph_call, GraphedForward):
            # each call a new step of torch.compile's CUDA-graph trees: earlier outputs are dead
            torch.compiler.cudagraph_mark_step_begin()
        out, (hidden, tapped) = self._graph_call(
            **kwargs, top=top, argmax=argmax, outputs=self.outputs
        )
        out = (out[0][rows], out[1][rows]) if top and not argmax else out[rows]
        hidden = None if hidden is None else hidden[: self._n]  # every row, as unpadded
        tapped = None if tapped is None else (tapped[0][rows], tapped[1][rows])
        if cuda_graphs:  # the graph's output memory is overwritten by its next replay, while a
            # caller may keep an output across calls (a chain's draft tokens): copy it out
            out, hidden, tapped = _copy((out, hidden, tapped))
        self.keep_extras(hidden, tapped)
        return out

    @inference
    def commit(self, accepted_slots: list[int]) -> None:
        """Keep the committed prefix followed by the given slots (ascending): one gather and
        one scatter over all layers for the slots not already in place."""
        n, k = self.committed, len(accepted_slots)
        moved = [(d, s) for d, s in enumerate(accepted_slots, start=n) if d != s]
        if moved:
            dst = to_device([d for d, _ in moved], self.device)
            src = to_device([s for _, s in moved], self.device)
            kv = self.cache.kv
            kv.index_copy_(4, dst, kv.index_select(4, src))
        self.committed = self._length = n + k


def _copy(x):
    """A copy of a graph's outputs (tensors, in nested tuples, or None)."""
    if isinstance(x, tuple):
        return tuple(_copy(t) for t in x)
    return None if x is None else x.clone()
