"""Monte Carlo harness for the verifier contract suite
(tests/engine/verify/test_verifier_contract.py).

A `World` is a synthetic pair of autoregressive models over a small vocabulary: a target row
p(.|c) and a draft row q(.|c) for every context c of up to `depth` tokens after the root
(random Dirichlet rows; some entries zeroed, as top-p does, so that supports differ). Contexts
are numbered as a V-ary heap: the root is 0 and the child of c by token t is c * V + 1 + t.

A `Case` says how draft trees are drawn from the draft: i.i.d. rollouts (k, L), delayed trees
(L1, K, L2), trees drawn without replacement (branch b, depth D), or deterministic top-b trees;
each sample picks one of the case's shapes uniformly at random. Draws are vectorised over all
samples (inverse CDF on the q table); only merging rollouts into a Tree is per sample.

`run(world, case, verify, n, seed)` returns, for n independent verifications at the root, the
first emitted token, the first two emitted tokens, the accepted length, and (for the first
`keep` samples) the tree and its p rows. The second token comes from the same verification when
it emits two or more tokens; when it rejects at the root (emitting one token y1) a second
verification runs on a fresh tree rooted at context (y1), exactly as the decoding loop does
(drawn with the case's first shape: only its first token is used, and a lossless verifier
emits a target-distributed first token from any draft tree).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.tree import Tree


@dataclass(frozen=True)
class World:
    V: int
    depth: int  # contexts of up to this many tokens below the root
    p: torch.Tensor  # [C, V] float32 target rows
    q: torch.Tensor  # [C + 1, V] float32 draft rows, the last one zero
    q_cdf: torch.Tensor  # [C, V] float64

    def child(self, ctx: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        return ctx * self.V + 1 + tok


def make_world(
    V: int, depth: int, seed: int, alpha: float = 0.8, mix: float = 0.6, zero_frac: float = 0.15
) -> World:
    """q = norm(mix * p + (1 - mix) * noise), then a few entries of p and of q zeroed."""
    g = torch.Generator().manual_seed(seed)
    n = sum(V**d for d in range(depth + 1))

    def dirichlet(rows):
        x = -torch.log(torch.rand(rows, V, generator=g, dtype=torch.float64))  # Gamma(1)
        x = x ** (1 / alpha)  # sharper than uniform Dirichlet
        return x / x.sum(-1, keepdim=True)

    def zero_some(m):
        drop = torch.rand(n, V, generator=g) < zero_frac
        keep = m.argmax(-1, keepdim=True)
        drop.scatter_(1, keep, False)  # never empty a row
        m = m.masked_fill(drop, 0.0)
        return m / m.sum(-1, keepdim=True)

    p = zero_some(dirichlet(n))
    q = zero_some(mix * p + (1 - mix) * dirichlet(n))
    q_rows = torch.cat([q, torch.zeros(1, V, dtype=q.dtype)])  # + a zero row for leaves
    return World(V=V, depth=depth, p=p.float(), q=q_rows.float(), q_cdf=q.cumsum(-1))


SAMPLING = {"iid": "iid", "delayed": "iid", "wor": "without_replacement", "det": "deterministic"}


@dataclass(frozen=True)
class Case:
    name: str
    V: int  # vocabulary of the case's world
    seed: int  # of the world
    # tree shapes, one drawn uniformly per sample: ("iid", (k, L)) k i.i.d. rollouts of L tokens;
    # ("delayed", (L1, K, L2)); ("wor", (b, D)) b children per node drawn without replacement,
    # depth D; ("det", (b, D)) the top-b draft tokens per node (deterministic)
    shapes: tuple[tuple[str, tuple[int, ...]], ...]


def _draw(world: World, ctx: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draws from the q rows of ctx (any shape) with uniforms u (same shape)."""
    cdf = world.q_cdf[ctx]  # [..., V]
    tok = (u[..., None] * cdf[..., -1:] >= cdf).sum(-1)
    return tok.clamp(max=world.V - 1)


def _rollouts(world, ctx0, shape, gen):
    """[n, k, L] tokens of k rollouts of length L (delayed: the first L1 shared)."""
    n = ctx0.shape[0]
    if shape[0] == "iid":
        (k, L), L1 = shape[1], 0
    else:
        L1, k, L2 = shape[1]
        L = L1 + L2
    toks = torch.zeros(n, k, L, dtype=torch.long)
    ctx = ctx0[:, None].expand(n, k).clone()
    for d in range(L):
        u = torch.rand(n, k, generator=gen, dtype=torch.float64)
        if d < L1:
            u = u[:, :1].expand(n, k)  # the trunk: one draw shared by all branches
        t = _draw(world, ctx, u)
        toks[:, :, d] = t
        ctx = world.child(ctx, t)
    return toks


def _merge(rows: list[list[int]], trunk: int = 0):
    """Rollouts -> (tokens, parents, multiplicity) with shared prefixes merged. The first
    `trunk` tokens are one shared draw (a delayed tree's single path): multiplicity 1."""
    tokens, parents, mult = [0], [-1], [1]
    index: dict[tuple[int, int], int] = {}
    at = [0] * len(rows)
    for d in range(len(rows[0]) if rows else 0):
        for r, row in enumerate(rows):
            key = (at[r], row[d])
            node = index.get(key)
            if node is None:
                node = index[key] = len(tokens)
                tokens.append(row[d])
                parents.append(at[r])
                mult.append(0)
            mult[node] = 1 if d < trunk else mult[node] + 1
            at[r] = node
    return tokens, parents, mult


def _wor_level(world, ctx, b, gen, det):
    """b children per context, drawn without replacement (Gumbel top-b) or top-b of q."""
    q = world.q[ctx].double()  # [..., V]
    keys = q.log()
    if not det:
        u = torch.rand(q.shape, generator=gen, dtype=torch.float64).clamp(min=1e-300)
        keys = keys - torch.log(-torch.log(u))
    k = min(b, world.V)
    vals, idx = keys.topk(k, dim=-1)
    return idx, vals > -float("inf")  # [..., b] tokens, and whether each draw exists


def _wor_trees(world, ctx0, shape, gen, det):
    """Per sample (tokens, parents) of a depth-D tree with up to b children per node."""
    b, D = shape[1]
    n = ctx0.shape[0]
    level_ctx = ctx0[:, None]  # [n, w]
    levels = []
    for _ in range(D):
        idx, ok = _wor_level(world, level_ctx, b, gen, det)  # [n, w, b]
        levels.append((idx, ok))
        level_ctx = world.child(level_ctx[..., None], idx).reshape(n, -1)
    out = []
    lv = [(i.tolist(), o.tolist()) for i, o in levels]
    for s in range(n):
        tokens, parents = [0], [-1]
        frontier = [0]  # node index for each slot of the level (-1: absent)
        for idx, ok in lv:
            nxt = []
            for w, node in enumerate(frontier):
                for j in range(len(idx[s][w])):
                    if node >= 0 and ok[s][w][j]:
                        tokens.append(idx[s][w][j])
                        parents.append(node)
                        nxt.append(len(tokens) - 1)
                    else:
                        nxt.append(-1)
            frontier = nxt
        out.append((tokens, parents))
    return out


def sample_trees(world: World, case: Case, ctx0: torch.Tensor, gen: torch.Generator):
    """One tree per root context in ctx0 [n]: (tokens, parents, multiplicity|None, sampling)."""
    n = ctx0.shape[0]
    pick = torch.randint(len(case.shapes), (n,), generator=gen)
    out = [None] * n
    for s_idx, shape in enumerate(case.shapes):
        sel = torch.nonzero(pick == s_idx).flatten()
        if sel.numel() == 0:
            continue
        if shape[0] in ("iid", "delayed"):
            rows = _rollouts(world, ctx0[sel], shape, gen).tolist()
            trunk = shape[1][0] if shape[0] == "delayed" else 0
            trees = [(*_merge(r, trunk), "iid") for r in rows]
        else:
            trees = [
                (t, par, None, SAMPLING[shape[0]])
                for t, par in _wor_trees(world, ctx0[sel], shape, gen, det=shape[0] == "det")
            ]
        for i, tr in zip(sel.tolist(), trees):
            out[i] = tr
    return out


def to_tree(world: World, spec, ctx0: int, root_token: int) -> tuple[Tree, torch.Tensor]:
    """Tree tensors with q rows of leaves zero (as TreeBuilder leaves them) and p rows."""
    tokens, parents, mult, sampling = spec
    n = len(tokens)
    ctx, depth, has_kids = [ctx0] * n, [0] * n, [False] * n
    for i in range(1, n):
        par = parents[i]
        ctx[i] = ctx[par] * world.V + 1 + tokens[i]
        depth[i] = depth[par] + 1
        has_kids[par] = True
    zero_row = world.q.shape[0] - 1  # the last q row is all zeros
    rows = [
        [root_token] + tokens[1:],
        parents,
        depth,
        mult or parents,
        ctx,
        [c if k else zero_row for c, k in zip(ctx, has_kids)],
    ]
    t = torch.tensor(rows)  # [6, n], one tensor for everything
    tree = Tree(
        tokens=t[0],
        parents=t[1],
        depth=t[2],
        q=world.q[t[5]],
        sampling=sampling,
        multiplicity=None if mult is None else t[3],
    )
    return tree, world.p[t[4]]


@dataclass(frozen=True)
class Outcome:
    first: torch.Tensor  # [n] first emitted token
    pair: torch.Tensor  # [n] first * V + second emitted token
    accepted: torch.Tensor  # [n] accepted draft tokens of the first verification
    root_draws: torch.Tensor  # [n] draws below the root (children counted with multiplicity)
    root_iid: torch.Tensor  # [n] bool: the tree was drawn i.i.d.
    kept: list  # (tree, p) of the first `keep` samples


def run(world: World, case: Case, verify, n: int, seed: int, keep: int = 0) -> Outcome:
    return run_group(world, case, {"v": verify}, n, seed, keep)["v"]


@torch.inference_mode()
def run_group(
    world: World, case: Case, verifiers: dict, n: int, seed: int, keep: int = 0
) -> dict[str, Outcome]:
    """`run` for several verifiers on the same n draft trees (each verifier's samples are
    independent of each other; the tests of different verifiers share the trees)."""
    gen = torch.Generator().manual_seed(seed)
    vgen = torch.Generator().manual_seed(seed + 1)
    specs = sample_trees(world, case, torch.zeros(n, dtype=torch.long), gen)
    small: dict = {}  # trees of few nodes recur often: share their (immutable) tensors

    def tree_of(spec, ctx, root):
        if len(spec[0]) > 4:
            return to_tree(world, spec, ctx, root)
        key = (ctx, root, tuple(spec[0]), tuple(spec[1]), spec[2] and tuple(spec[2]), spec[3])
        if key not in small:
            small[key] = to_tree(world, spec, ctx, root)
        return small[key]

    names = list(verifiers)
    first = {v: [] for v in names}
    second = {v: [] for v in names}
    accepted = {v: [] for v in names}
    again: dict[str, list[int]] = {v: [] for v in names}
    kept = []
    for s, spec in enumerate(specs):
        tree, p = tree_of(spec, 0, 0)
        for v in names:
            a = verifiers[v](tree, p, vgen)
            toks = [spec[0][i] for i in a.path] + [a.token]
            first[v].append(toks[0])
            second[v].append(toks[1] if len(toks) > 1 else -1)
            accepted[v].append(len(a.path))
            if len(toks) == 1:
                again[v].append(s)
        if s < keep:
            kept.append((tree, p))
    # chain a second verification rooted at the rejected-at-root token; only its first token
    # is used and any draft tree will do, so it is drawn with the case's first shape
    first_shape = Case(case.name, case.V, case.seed, case.shapes[:1])
    for v in names:
        if not again[v]:
            continue
        roots = torch.tensor([1 + first[v][s] for s in again[v]])
        for s, spec, ctx in zip(
            again[v], sample_trees(world, first_shape, roots, gen), roots.tolist()
        ):
            tree, p = tree_of(spec, ctx, first[v][s])
            a = verifiers[v](tree, p, vgen)
            second[v][s] = spec[0][a.path[0]] if a.path else a.token
    draws = torch.tensor(
        [sum(m for m, par in zip(sp[2] or [1] * len(sp[1]), sp[1]) if par == 0) for sp in specs]
    )
    iid = torch.tensor([sp[3] == "iid" for sp in specs])
    out = {}
    for v in names:
        f = torch.tensor(first[v])
        out[v] = Outcome(
            first=f,
            pair=f * world.V + torch.tensor(second[v]),
            accepted=torch.tensor(accepted[v], dtype=torch.float64),
            root_draws=draws,
            root_iid=iid,
            kept=kept,
        )
    return out


def target_laws(world: World) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's law of the first token [V] and of the first two tokens [V * V]."""
    p0 = world.p[0].double()
    p1 = world.p[1 : 1 + world.V].double()  # row y1 = context (y1)
    return p0, (p0[:, None] * p1).reshape(-1)
