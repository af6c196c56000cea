"""The block drafter at decoding time (DDTree Sec. 3): the committed context's keys and values
per drafter layer, grown as the decode loop commits tokens, and one drafter forward per round
giving the marginals q_1..q_L of the next L positions, the interface engine/drafters/ddtree/build.py
builds its tree from (`block_marginals(state, L)`). The context's features come back from the
target's verification forward, which runs anyway (engine/runtime/eager.py `hidden_layers`): the
prefill's, then each iteration's root and accepted rows (engine/decode.py).

The keys/values live in one preallocated buffer `kv` [layers, 2, 1, capacity, H, Dh], written in
place (`index_copy_`) at the next slots, never concatenated; a longer generation doubles it.
On `engine: eager` and `fast` the block forward attends to the first `length` slots (views of the
buffer), the same keys in the same order as training's block_loss. On the padded engines
(`compiled`, `graphs`: engine/config.py PADDED) both of the drafter's per-iteration calls run
with fixed shapes and are replayed from CUDA graphs (engine/runtime/cuda_graphs.py GraphedForward,
on `compiled` too: a graph of the few layers' eager kernels removes their launches without a
compilation):

- `extend` of n committed tokens is padded to the static cache's size buckets
  (engine/runtime/static.py `bucket`); pad rows (zero features) write past the length, where
  the next extend overwrites them;
- the block forward attends to all `capacity` slots, those at or past the length masked, and
  reads the root token and the length from one small device tensor.

So a DDTree iteration with the trained drafter launches two replays for it, where the
uncaptured drafter launched its layers' matrix products one by one (bench/gpu_exact.py
--learned counts them). Shapes: D the drafter's hidden size, F its feature width, H heads of
size Dh, L the block size, Q = 1 + L block rows.
"""

from __future__ import annotations

import torch

from engine.config import PADDED, ConfigError
from engine.drafters.ddtree.block import BlockDrafter, cached_drafter, target_parts
from engine.runtime.cuda_graphs import GraphedForward, OneOwner
from engine.runtime.static import GRAPH_MAX, MIN_CAPACITY, bucket
from engine.sampling import warp
from engine.transfer import to_device


class BlockContext:
    """The drafter during a generation; see the module docstring. `reset()` starts the next."""

    def __init__(
        self, drafter: BlockDrafter, target_model, engine: str = "eager", capacity=MIN_CAPACITY
    ) -> None:
        self.drafter = drafter
        self.embed, self.head = target_parts(target_model)
        self.layers = drafter.cfg.target_layers  # what the target's forwards must return
        p = next(drafter.parameters())
        self.device, self.dtype = p.device, p.dtype
        self.padded = engine in PADDED
        q = 1 + drafter.cfg.block_size
        self._offsets = torch.arange(q, device=self.device)[None]  # [1, Q]
        self._block_sees_block = torch.ones(q, q, dtype=torch.bool, device=self.device)
        self._extend_call, self._block_call = self._extend, self._block
        if self.padded:
            self._extend_call = GraphedForward(self._extend, self.device)
            self._block_call = GraphedForward(self._block, self.device)
        self._alloc(capacity)
        self.length = 0  # C: committed tokens whose features are in

    def reset(self) -> None:
        self.length = 0

    def _alloc(self, capacity: int) -> None:
        cfg = self.drafter.cfg
        shape = (cfg.layers, 2, 1, capacity, cfg.heads, cfg.hidden // cfg.heads)
        self.kv = torch.zeros(shape, device=self.device, dtype=self.dtype)
        self._slots = torch.arange(capacity, device=self.device)  # [capacity]

    def _fit(self, needed: int) -> None:
        """Double the buffer until `needed` slots fit; the graphs (which read the old buffer)
        are captured again."""
        capacity = self.kv.shape[3]
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        old = self.kv
        self._alloc(capacity)
        self.kv[:, :, :, : old.shape[3]] = old
        if self.padded:
            self._extend_call.clear()
            self._block_call.clear()

    @torch.inference_mode()
    def extend(self, feats: torch.Tensor) -> None:
        """Append the target features [n, F] of the next n committed tokens."""
        n, start = feats.shape[0], self.length
        if n == 0:
            return
        graph = self.padded and n <= GRAPH_MAX  # a long prompt's prefill runs uncaptured
        rows = bucket(n) if graph else n
        self._fit(start + rows)
        feats = feats.to(self.device, self.dtype)
        if rows > n:
            feats = torch.cat([feats, feats.new_zeros(rows - n, feats.shape[1])])
        slots = self._slots[start : start + rows]
        (self._extend_call if graph else self._extend)(feats=feats, slots=slots)
        self.length = start + n

    def prefill(self, target) -> None:
        """engine/drafters/record.py Attached: the prompt's features (the root's excepted)."""
        self.extend(target.hidden)  # [P, F]

    def commit(self, target, path: list[int]) -> None:
        """Attached: the root's and the accepted nodes' features, committed now."""
        rows = to_device([0] + path, target.hidden.device)
        self.extend(target.hidden[rows])  # [1 + len(path), F]

    def close(self) -> None:
        """Attached: nothing to let go (the context is reset by the next generation)."""

    def _extend(self, feats: torch.Tensor, slots: torch.Tensor) -> None:
        """Keys/values of features feats [rows, F] into slots [rows] (also their positions)."""
        ctx = self.drafter.project(feats[None])  # [1, rows, D]
        for i, layer in enumerate(self.drafter.layers):
            k, v = layer.context_kv(ctx, slots[None])  # [1, rows, H, Dh] each
            self.kv[i, 0].index_copy_(1, slots, k)
            self.kv[i, 1].index_copy_(1, slots, v)

    @torch.inference_mode()
    def block_marginals(self, state, block_size: int) -> torch.Tensor:
        """q_1..q_L [L, V] after the root b = state.root_token at position state.prefix_len,
        from one drafter forward (softmax at a greedy draft warp, the warped q otherwise)."""
        cfg = self.drafter.cfg
        if block_size > cfg.block_size:
            raise ConfigError(
                f"the block drafter drafts {cfg.block_size} positions, not {block_size}"
            )
        if self.length != state.prefix_len:
            raise RuntimeError(f"drafter context {self.length} != prefix {state.prefix_len}")
        root_length = to_device([state.root_token, self.length], self.device)  # [2]
        width = self.kv.shape[3] if self.padded else self.length
        logits = self._block_call(root_length=root_length, width=width)[:block_size]  # [L, V]
        w = state.draft_warp
        return torch.softmax(logits, -1) if w.greedy else warp(logits, w)

    def _block(self, root_length: torch.Tensor, width: int) -> torch.Tensor:
        """The drafter over the masked block [b, m, .., m] at positions length .. length + L,
        seeing the context slots below the length among the first `width`: logits [L, V]."""
        root, length = root_length[:1], root_length[1:]  # [1] each
        block = self.drafter.block_input(self.embed(root).to(self.dtype))  # [1, Q, D]
        q = block.shape[1]
        sees_context = (self._slots[:width] < length).expand(q, width)  # [Q, width]
        mask = torch.cat([sees_context, self._block_sees_block], -1)[None]  # [1, Q, width + Q]
        kv = [(self.kv[i, 0, :, :width], self.kv[i, 1, :, :width]) for i in range(len(self.kv))]
        out = self.drafter(block, length + self._offsets, kv, mask)  # [1, Q, D]
        return self.head(out[0, 1:]).float()


# the current drafter's context per engine path (block_drafter.cached_drafter keeps one drafter)
_OPEN = OneOwner()


def block_context(drafter: BlockDrafter, target_model, engine: str) -> BlockContext:
    """An empty BlockContext for one generation: one per engine path of the current drafter,
    reset, so that its buffer is allocated, and its graphs captured, once per process, not per
    generation."""
    ctx = _OPEN.get(drafter, engine, lambda: BlockContext(drafter, target_model, engine))
    ctx.reset()
    return ctx


def attach(cfg, pair, target, draft, engine: str) -> BlockContext | None:
    """DDTree's learned part for one generation (engine/drafters/record.py `attach`): with
    `drafter: block`, the trained block drafter on this engine path, with the target set to
    return the features it reads; None for the other block drafters. The drafter conditions
    on the target's hidden states of the committed context (DDTree Sec. 3): the prefill's,
    then each iteration's root and accepted nodes' rows of the verification forward, which
    runs anyway."""
    if cfg.drafter != "block":
        return None
    model = pair.target.model
    features = block_context(cached_drafter(cfg.checkpoint, model), model, engine)
    target.hidden_layers = features.layers
    return features
