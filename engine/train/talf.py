"""TALF: the tree-aware loss function for draft training ("salf_talf.txt", Sec. 3.2,
Algorithm 1, App. D).

Algorithm 1, for every training sequence x:
1. the target T builds a tree G with a dynamic tree construction algorithm: EAGLE-2's beam
   search (App. B, "Beam search"; engine/drafters/beam/build.py), run with T's own distributions,
   top_k = 4 and depth 3 (Sec. 4.1: "k=4", "tree depth ... three"). Every token x_s of the
   sequence is a root (Sec. 3.2: "setting each token in a training sequence as the root node");
2. for every node n of G, p_child(n) = T(x_[n]), the target's next-token distribution after
   the path x_[n] (l. 5, "precomputed during tree generation": G is made of the nodes the
   beam search expanded - the root, and the top_k nodes of each depth below `depth` - since
   those are the nodes whose p_child(n) the target computed);
3. p^(d)_child(n) = D(x_[n]) for all nodes at once with tree attention (l. 6);
4. L_n = -sum_v p_child(n)(v) log p^(d)_child(n)(v)  (l. 7), L = sum_{n in G} L_n  (l. 8).

Here the draft D is a plain causal LM (the engine's draft model), so l. 6 is the LM's forward
over the path: no EAGLE/HASS features and, as in TALF (Sec. 3.2, last paragraph), no
regression loss. A batch holds several roots of one sequence; its loss is the mean over roots
of the per-tree sums L.

Packing (the "tree attention" of Sec. 3.2 and Figure 1): the sequence and every root's tree
are one `Tree` (engine/tree.py), the *forest*: the sequence is a chain (token s is the parent
of token s + 1) and each tree node hangs below its root's sequence token. The forest's
ancestor-only mask is then exactly the attention each node needs - sequence tokens see the
tokens before them (causal), a tree node sees its root's prefix and its own ancestors - and its
depths are the position ids. One draft forward over the forest gives every p^(d)_child(n) of
every tree; the target builds the forest depth by depth with the same mask over its KV cache
(engine/runtime/eager.py), one forward per depth for all roots together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.runtime.eager import CachedModel
from engine.tree import Tree, make_tree
from tree_kernels.reference import ancestor_matrix


@dataclass(frozen=True)
class TALFConfig:
    top_k: int = 4  # children per expanded node and nodes expanded per depth (Sec. 4.1: k=4)
    depth: int = 3  # beam-search depth of the training tree (Sec. 4.1, App. D: three)

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.depth < 1:
            raise ValueError(f"top_k and depth must be >= 1, got {self.top_k}, {self.depth}")


@dataclass(frozen=True)
class Forest:
    """A training sequence and its roots' trees as one Tree, with the target's soft labels."""

    tree: Tree  # T nodes: the L sequence tokens as a chain, then the trees' non-root nodes
    rows: torch.Tensor  # [R] long: the forest nodes n of every G (roots first), trained nodes
    labels: torch.Tensor  # [R, V] float32: the target's p_child(n) for each row
    owner: torch.Tensor  # [R] long: which root (index into `roots`) each row's tree belongs to
    roots: tuple[int, ...]  # the sequence positions that are roots


def target_forest(
    target, seq: list[int], roots: list[int], cfg: TALFConfig = TALFConfig()
) -> Forest:
    """Step 1-2 of Algorithm 1 for every root of `seq` at once: the target's EAGLE-2 beam
    tree (App. B) below each root, and p_child(n) at every expanded node.

    Per root, exactly engine/drafters/beam/build.py's expansion phase with the target as the model:
    the root's top_k children are candidates; then for each further depth the top_k nodes of
    the deepest layer by V_n (product of probabilities along the path, ties to the earlier
    candidate) are expanded into top_k children each. Re-ranking (beam.py's N) does not apply:
    the training tree is the set of expanded nodes, whose p_child(n) the target computed.
    """
    L = len(seq)
    if not roots or any(not 0 <= s < L for s in roots):
        raise ValueError(f"roots must be non-empty positions in 0..{L - 1}")
    roots = sorted(set(roots))
    R, k = len(roots), cfg.top_k
    lm = CachedModel(target)
    dev = lm.device
    logits = lm.extend(list(seq), keep=0)  # [L, V] causal
    probs = torch.softmax(logits[torch.tensor(roots, device=dev)].float(), dim=-1)  # [R, V]
    tokens, parents = list(seq), [-1] + list(range(L - 1))
    position = list(range(L))
    rows, labels = [torch.tensor(roots)], [probs.cpu()]
    owner = [torch.arange(R)]
    layer_nodes = torch.tensor(roots)[:, None]  # [R, m] forest nodes of the deepest layer
    layer_v = torch.ones(R, 1, dtype=torch.float64)  # [R, m] their V_n
    probs = probs[:, None]  # [R, m, V]
    for d in range(cfg.depth):
        top_p, top_t = probs.topk(min(k, probs.shape[-1]), dim=-1)  # [R, m, k]
        v = (layer_v[:, :, None] * top_p.double().cpu()).flatten(1)  # [R, m * k]
        if d + 1 == cfg.depth:
            break
        best = _top(v, min(k, v.shape[1])).sort(dim=1).values  # [R, b] deepest layer's top_k
        cand_parent = layer_nodes.repeat_interleave(top_p.shape[-1], dim=1)  # [R, m * k]
        new_parent = cand_parent.gather(1, best)  # [R, b]
        new_token = top_t.cpu().flatten(1).gather(1, best)  # [R, b]
        base, b = len(tokens), best.shape[1]
        new = torch.arange(base, base + R * b).view(R, b)  # [R, b] forest nodes, root-major
        tokens += new_token.flatten().tolist()
        parents += new_parent.flatten().tolist()
        position += [position[p] + 1 for p in new_parent.flatten().tolist()]
        anc = ancestor_matrix(torch.tensor(parents), check=False)  # [T, T]
        logits = lm.forward(
            torch.tensor(tokens[base:], device=dev),
            torch.tensor(position[base:], device=dev),
            anc[base:].to(dev),  # [R * b, T] each new node: its root's prefix and ancestors
        )  # [R * b, V]
        probs = torch.softmax(logits.float(), dim=-1).view(R, b, -1)  # [R, b, V]
        rows.append(new.flatten())
        labels.append(probs.flatten(0, 1).cpu())
        owner.append(torch.arange(R).repeat_interleave(b))
        layer_nodes, layer_v = new, v.gather(1, best)
    return Forest(
        tree=make_tree(tokens, parents),
        rows=torch.cat(rows),
        labels=torch.cat(labels).clone(),  # a normal tensor (the forward ran in inference mode)
        owner=torch.cat(owner),
        roots=tuple(roots),
    )


def _top(v: torch.Tensor, k: int) -> torch.Tensor:
    """[R, k] indices of each row's k largest values, the earlier index first among ties
    (engine/drafters/beam/build.py `_top`, row-wise)."""
    return torch.sort(v, dim=1, descending=True, stable=True).indices[:, :k]


def forest_logits(model, forest: Forest) -> torch.Tensor:
    """l. 6 of Algorithm 1: the draft's logits below every trained node, [R, V], from one
    forward over the forest under its ancestor-only mask (positions: forest depth)."""
    t = forest.tree
    dev = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    out = model.base_model(
        input_ids=t.tokens[None].to(dev),  # [1, T]
        position_ids=t.position_ids(0).to(dev),  # [1, T]
        attention_mask=t.attention_mask(0, dtype).to(dev),  # [1, 1, T, T]
        use_cache=False,
    )
    h = out.last_hidden_state[0]  # [T, H] after the final norm
    return model.get_output_embeddings()(h[forest.rows.to(dev)])  # [R, V]


def tree_cross_entropy(logits: torch.Tensor, forest: Forest) -> torch.Tensor:
    """l. 7-8: L_n = -sum_v p_child(n)(v) log p^(d)_child(n)(v) per row, summed over each
    tree's nodes (L = sum_{n in G} L_n), averaged over the roots of the batch."""
    log_q = torch.log_softmax(logits.float(), dim=-1)  # [R, V]
    per_node = -(forest.labels.to(log_q.device) * log_q).sum(-1)  # [R] L_n
    return per_node.sum() / len(forest.roots)


def talf_loss(draft, forest: Forest) -> torch.Tensor:
    """The TALF loss of `draft` on a forest the target built (Algorithm 1, l. 6-8)."""
    return tree_cross_entropy(forest_logits(draft, forest), forest)
