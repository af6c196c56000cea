"""One greedy chain iteration kept on the device: the methods whose greedy tree is one chain of
fixed length (their record's `chain(cfg)` > 0, engine/drafters/record.py: linear, and the
i.i.d. and delayed trees, whose greedy rollouts coincide).

The general iteration (engine/iteration/general.py) grows a tree through `TreeBuilder`,
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
them moves nothing. Output is token for token the general path's
(tests/engine/iteration/test_chain_path.py).
"""

from __future__ import annotations

import torch

from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.iteration.step import forward_counters, make_step
from engine.methods import Method
from engine.runtime.eager import CachedModel
from engine.transfer import to_device
from engine.tree import Tree
from engine.verify import Accept


def applies(target: CachedModel, draft, method: Method, state: DecodeState) -> int:
    """The chain's length k where `method`'s iteration can run here (else 0): a greedy chain
    (the record's `chain`), greedy draft and greedy verifier, a draft model, on a fast
    (static-cache) path."""
    if not (
        target.fast
        and method.verifier == "greedy"
        and state.draft_warp.greedy
        and isinstance(draft, DraftModel)
    ):
        return 0
    return DRAFTERS[method.name].chain(method.cfg)


def run(target: CachedModel, draft: DraftModel, method, committed: list[int], state, gen, k: int):
    """One iteration of the chain of length k (see the module docstring)."""
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
    counts = (sum(match), int(a < k))  # see step.acceptance_counts
    t3 = clock.stamp()
    new = drafted[:a] + [accept.token]
    return make_step(target, lm, before, (t0, t1, t2, t3), tree, accept, new, counts)
