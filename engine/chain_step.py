"""One greedy chain iteration kept on the device: the fast path's `linear` at temperature 0 (and
the i.i.d. and delayed trees, a chain at temperature 0: `chain_length`).

The general iteration (engine/decode.py `decode_step`) grows a tree through `TreeBuilder`,
which reads every drafted token on the host (the builder keeps Python lists) and builds masks
from them. A greedy chain needs none of that: its ancestor-only mask is the causal mask, its
k draft tokens are argmaxes that can feed the next draft forward as device tensors, and the
greedy verifier (engine/verify/greedy.py) reduces to comparing the chain with the target's
argmax after each node. So one iteration here is

    draft:   d_1 = argmax q(. | committed)           one forward over the tokens the draft has
             d_j = argmax q(. | committed, d_<j)     not seen yet (the root last), then one per
                                                     token, each fed the previous argmax tensor
    target:  b = argmax p(. | committed, d_<=j), j = 0..k     one causal forward over k + 1
    accept:  a = number of leading j with d_j = b_(j-1)    (Leviathan et al. 2023, Alg. 1 at
             emit d_1..d_a, then b_a                         temperature 0)

with a single host read per iteration (the chain and the target's argmaxes, in one
`tolist`), made after the target forward, where the accept decision needs it anyway. The
accepted slots of both caches are already in place (a chain is fed in order), so committing
them moves nothing. Output is token for token the general path's (tests/engine/test_chain_step.py).
"""

from __future__ import annotations

import torch

from engine.cache import CachedModel
from engine.draft import DecodeState, DraftModel
from engine.transfer import to_device
from engine.tree import Tree
from engine.verify import Accept


def chain_length(method) -> int:
    """The length of the chain `method` drafts with a greedy draft, or 0 where its greedy tree
    is not one chain of fixed length: linear without early stopping (k); the i.i.d. tree (L),
    whose K rollouts all draw the draft's argmax and merge into one chain (engine/drafters/
    iid.py: equal draws from one node share the child); the delayed tree with a fixed action
    (L1 + L2: the trunk, then K coinciding branches; engine/drafters/delayed.py). The greedy
    verifier ignores the merged draws' multiplicity, so their iteration is this one."""
    cfg = method.cfg
    if method.name == "linear":
        return cfg.k if cfg.stop_below == 0 else 0
    if method.name == "iid":
        return cfg.L
    if method.name == "delayed":
        return cfg.L1 + cfg.L2 if cfg.selector == "fixed" else 0
    return 0


def applies(target: CachedModel, draft, method, state: DecodeState) -> bool:
    """Whether `method`'s iteration can run here: a greedy chain (chain_length), greedy draft
    and greedy verifier, a draft model, on a fast (static-cache) path."""
    return (
        target.fast
        and method.verifier == "greedy"
        and chain_length(method) > 0
        and state.draft_warp.greedy
        and isinstance(draft, DraftModel)
    )


def chain_step(target: CachedModel, draft: DraftModel, k: int, committed: list[int], state):
    """One iteration (see the module docstring); returns engine.decode.Step."""
    from engine.decode import forward_counters, make_step

    device, lm = target.device, draft.lm
    k = min(k, state.remaining)
    before = forward_counters(target, lm)
    clock = target.clock
    t0 = clock.stamp()
    if lm.length > lm.committed:
        lm.commit([])
    root = state.prefix_len  # the root's position, and its slot in both caches
    positions = torch.arange(lm.committed, root + k + 1, device=device)  # [root + k + 1 - c]
    pending = to_device(committed[lm.committed :], device)  # [n_p + 1], root last
    n_p = pending.shape[0] - 1
    tok = lm.forward(pending, positions[: n_p + 1], keep=1, argmax=True)  # [1]
    lm.committed += n_p
    drafts = [tok]
    for j in range(1, k):  # d_(j+1) below d_j, at position root + j
        tok = lm.step(tok, positions[n_p + j : n_p + j + 1], argmax=True)
        drafts.append(tok)
    chain = torch.cat([pending[-1:], *drafts])  # [k + 1] root, d_1..d_k
    t1 = clock.stamp()
    depth = positions[n_p:] - root  # [k + 1] 0..k
    parents = depth - 1  # [k + 1] -1..k-1
    # [k + 1] the target's token after each node, computed inside the forward; causal: the
    # chain's mask (parents: for a target on the Triton tree kernel)
    best = target.forward(chain, positions[n_p:], parents=parents, argmax=True)
    t2 = clock.stamp()
    read = torch.cat([chain[1:], best]).tolist()  # the one host read: d_1..d_k, b_0..b_k
    drafted, best_host = read[:k], read[k:]
    match = [d == b for d, b in zip(drafted, best_host)]  # d_j = b_(j-1)
    a = match.index(False) if False in match else k
    accept = Accept(path=list(range(1, a + 1)), token=best_host[a])
    # the nodes the draft fed (root..d_(k-1)) and where: DraftModel.commit keeps the accepted
    draft.builder = None
    draft.path_slots = {i: [root + i] for i in range(k)}
    tree = Tree(chain, parents, depth, sampling="deterministic", height=k)
    counts = (sum(match), int(a < k))  # see decode.acceptance_counts
    t3 = clock.stamp()
    new = drafted[:a] + [accept.token]
    return make_step(target, lm, before, (t0, t1, t2, t3), tree, accept, new, counts)
