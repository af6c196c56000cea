"""The SALF & TALF paper's Fig. 2(b) diagnostic for an EAGLE head (Sec. 3.1, Appendix A): how
well the head's second drafting iteration predicts the target when it is self-conditioned on
the token ranked n-th by its first.

Over a held-out test set of sequences x_{1:s} (here: positions s of held-out stdlib chunks,
engine/train/eagle_data.py `build_corpus(split="held-out")`, with the target's cached
features), for each s and rank n = 1 .. `ranks`:

    p(d)_{s+1}, f(d)_s <- D(x_{2:s}, f_{1:s-1})       the first iteration, teacher-forced on
                                                       the target's features: rows (x_{j+1}, f_j)
    x(d)_{s+1}         =  the n-th ranked token of p(d)_{s+1} (ties: the lower token id first)
    p(d)_{s+2}         <- D(.., (x(d)_{s+1}, f(d)_s))  the head's own output feature fed back,
                                                       as in drafting (engine/draft/eagle.py)
    x~_{s+2}           =  argmax T(x_{1:s}, x(d)_{s+1}) the target's greedy next token

Sec. 3.1 says the token is "sampled from p(d)_{s+1}" and then conditions on its rank; here the
n-th ranked token is taken for each n (no sampling). Its text says p(d)_{s+1} predicts
x~_{s+2}; Appendix A's formulas (followed here) score p(d)_{s+2}. The paper's x_{1:s} starts
the head's rows at x_2, so s >= 2: chunk positions 1 .. T-1 (0-based) are the possible x_s.

Metrics per rank (Appendix A), over the D test positions:

    Acc = 1/|D| sum 1{argmax_v p(d)_{s+2}(v) = x~_{s+2}}
    ECE = sum_m |B_m|/|D| |Acc(B_m) - Conf(B_m)|
    Conf(B_m) = 1/|B_m| sum_{B_m} p(d)_{s+2}(x~_{s+2}),  Acc(B_m) the accuracy over B_m

with M equal-width bins B_m = ((m-1)/M, m/M] of the confidence (a confidence of 0 in B_1), M
= `bins` (the paper does not give M; 10 by default). Appendix A calls the bins "equisized" and
cites Guo et al. (2017), whose bins are equal-width intervals; that is the reading here. Where
it differs from Guo et al.: their confidence is the top probability max_v p(v), the predicted
token's; Appendix A bins by, and averages, the probability of the target's token
p(d)_{s+2}(x~_{s+2}), which equals max_v p(d)_{s+2}(v) where the head is right and is smaller
where it is wrong. `expected_calibration_error` takes any confidence, so Guo et al.'s is the
same call with the top probability.

Batching (exact; tests/engine/train/test_eagle_calibration.py holds it to a plain loop that
appends each token and runs the head and the target causally from scratch): per chunk, one
causal head forward over its teacher-forced rows, then one head forward over the R x n
drafted rows (row (x(d)_{s+1}, f(d)_s) at head position s - 1, seeing the rows up to x_s's and
itself); one causal target forward over the chunk's prefix, then one over the R x n drafted
tokens as sibling tree nodes below their x_s (position s, the ancestor-only mask:
engine/runtime/eager.py CachedModel, as engine/train/talf.py `target_forest`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from engine.config import ConfigError
from engine.models import load_model
from engine.runtime.eager import CachedModel
from engine.runtime.eagle_format import EAGLE_PREFIX, load_head
from engine.runtime.eagle_head import FAMILIES, EagleHead, head_lm_head, shared_parts
from engine.sampling import top_token
from engine.train.eagle_data import build_corpus, cached_features

Progress = Callable[[str, int, int], None]  # (phase, done, total)
GROUP = 64  # roots per pair of forwards (bounds the [R * n, V] logits held at once)


@dataclass(frozen=True)
class RankCalibration:
    """Appendix A's metrics for the head self-conditioned on its rank-th token."""

    rank: int  # n: x(d)_{s+1} is the n-th ranked token of p(d)_{s+1}
    accuracy: float  # Acc: argmax p(d)_{s+2} = x~_{s+2}
    ece: float  # ECE over `bins` equal-width bins of p(d)_{s+2}(x~_{s+2})
    count: int  # |D|: test positions


@dataclass(frozen=True)
class Draws:
    """One chunk's diagnostic at roots (0-based positions r of x_s, s = r + 1)."""

    roots: torch.Tensor  # [R] long
    drafted: torch.Tensor  # [R, n] x(d)_{s+1}: the head's 1st .. n-th ranked tokens
    head_logits: torch.Tensor  # [R, n, V] float32: p(d)_{s+2} = softmax of these
    target_next: torch.Tensor  # [R, n] x~_{s+2}: the target's greedy token after x(d)_{s+1}


def ranked(logits: torch.Tensor, n: int) -> torch.Tensor:
    """The n most probable tokens of each row [..., V] -> [..., n], the lower id first on ties."""
    return torch.sort(logits.float(), dim=-1, descending=True, stable=True).indices[..., :n]


@torch.inference_mode()
def head_draws(
    head: EagleHead, target_model, tokens: torch.Tensor, feats: torch.Tensor,
    roots: torch.Tensor, ranks: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The head's side: (drafted [R, n], the logits of p(d)_{s+2} [R, n, V]) for tokens [T],
    the target's feats [T, H] and roots [R] (each in 1 .. T-1)."""
    embed, lm_head = shared_parts(target_model)
    lm_head = head_lm_head(head, lm_head)  # a draft vocabulary's: -inf off it
    dev, dtype = head.device, head.dtype
    tokens, feats, roots = tokens.to(dev), feats.to(dev, dtype), roots.to(dev)
    r_max = int(roots.max())
    # first iteration: rows j = 0 .. r_max - 1 pair x_{j+2} (tokens[j + 1]) with f_{j+1}
    rows = torch.arange(r_max, device=dev)  # [r_max] head positions
    emb = embed(tokens[1 : r_max + 1]).to(dtype)[None]  # [1, r_max, H]
    out, past = head(emb, feats[:r_max][None], rows[None])  # [1, r_max, H]
    root_out = out[0, roots - 1]  # [R, H] f(d)_s: the output of x_s's row
    first = lm_head(root_out.to(lm_head.weight.dtype))  # [R, V] p(d)_{s+1}
    drafted = ranked(first, ranks)  # [R, n]
    # second iteration: row (x(d)_{s+1}, f(d)_s) at position s - 1 = r, x_s's row and before
    n = drafted.numel()
    node_root = roots.repeat_interleave(ranks)  # [R * n]
    visible = torch.cat(
        [rows[None] < node_root[:, None], torch.eye(n, dtype=torch.bool, device=dev)], 1
    )  # [R * n, r_max + R * n]
    emb = embed(drafted.flatten()).to(dtype)[None]  # [1, R * n, H]
    feat = root_out.repeat_interleave(ranks, 0)[None]  # [1, R * n, H]
    out, _ = head(emb, feat, node_root[None], visible[None], past)  # [1, R * n, H]
    logits = lm_head(out[0].to(lm_head.weight.dtype)).float()  # [R * n, V]
    return drafted.cpu(), logits.view(*drafted.shape, -1).cpu()


def target_next(
    target_model, tokens: torch.Tensor, roots: torch.Tensor, drafted: torch.Tensor
) -> torch.Tensor:
    """x~_{s+2} [R, n]: the target's greedy token after x_{1:s}, x(d)_{s+1}, from one causal
    forward over tokens[: max root + 1] and one over the R x n drafted tokens as siblings
    below their roots (position s = r + 1, ancestor-only mask)."""
    lm = CachedModel(target_model)
    dev = lm.device
    r_max = int(roots.max())
    lm.extend(tokens[: r_max + 1].tolist(), keep=1)
    node_root = roots.repeat_interleave(drafted.shape[1]).to(dev)  # [R * n]
    n = node_root.numel()
    prefix = torch.arange(r_max + 1, device=dev)  # [r_max + 1] cache slots
    visible = torch.cat(
        [prefix[None] <= node_root[:, None], torch.eye(n, dtype=torch.bool, device=dev)], 1
    )  # [R * n, r_max + 1 + R * n]
    best = lm.forward(drafted.flatten().to(dev), node_root + 1, visible, argmax=True)  # [R * n]
    return best.view(drafted.shape).cpu()


def chunk_draws(
    head: EagleHead, target_model, tokens: torch.Tensor, feats: torch.Tensor,
    roots: torch.Tensor, ranks: int,
) -> Draws:  # fmt: skip
    """The diagnostic at `roots` [R] (in 1 .. T-1) of one chunk (tokens [T], feats [T, H])."""
    roots = torch.as_tensor(roots, dtype=torch.long)
    T = tokens.shape[0]
    if roots.numel() == 0 or int(roots.min()) < 1 or int(roots.max()) > T - 1:
        raise ValueError(f"roots must be non-empty positions in 1 .. {T - 1}")
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    drafted, logits = head_draws(head, target_model, tokens, feats, roots, ranks)
    return Draws(roots, drafted, logits, target_next(target_model, tokens, roots, drafted))


def expected_calibration_error(
    confidence: torch.Tensor, correct: torch.Tensor, bins: int = 10
) -> float:
    """Appendix A's ECE of confidences [D] in [0, 1] and outcomes [D] bool: sum over the
    `bins` equal-width bins ((m-1)/M, m/M] (0 in the first) of |B_m|/D |Acc(B_m) - Conf(B_m)|."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    c = confidence.double().flatten()  # [D]
    ok = correct.double().flatten()  # [D]
    if c.numel() == 0:
        return float("nan")
    edges = torch.arange(1, bins, dtype=torch.float64) / bins  # [M - 1] inner edges m/M
    which = torch.bucketize(c, edges, right=False)  # [D] bin m - 1: (m-1)/M < c <= m/M
    acc = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, ok)  # [M] |B_m| Acc(B_m)
    conf = torch.zeros(bins, dtype=torch.float64).index_add_(0, which, c)  # [M] |B_m| Conf(B_m)
    gap = (acc - conf).abs()  # [M] |B_m| |Acc(B_m) - Conf(B_m)|; 0 for an empty bin
    return float(gap.sum() / c.numel())


def rank_metrics(
    confidence: torch.Tensor, correct: torch.Tensor, bins: int
) -> list[RankCalibration]:
    """Per rank (column) of confidence [D, n] and correct [D, n]: accuracy, ECE, count."""
    return [
        RankCalibration(
            rank=j + 1,
            accuracy=float(correct[:, j].double().mean()) if len(correct) else float("nan"),
            ece=expected_calibration_error(confidence[:, j], correct[:, j], bins),
            count=int(correct.shape[0]),
        )
        for j in range(correct.shape[1])
    ]


def draw_positions(
    sequences: int, seq_len: int, positions: int | None, gen: torch.Generator
) -> torch.Tensor:
    """[P, 2] (chunk, root) pairs, sorted: `positions` drawn without replacement (explicit
    generator) from every chunk's roots 1 .. seq_len - 1, or all of them (None)."""
    per = seq_len - 1
    pool = sequences * per
    if per < 1:
        raise ConfigError(f"--seq-len must be >= 2, got {seq_len}")
    if positions is not None and not 1 <= positions <= pool:
        raise ConfigError(
            f"--positions must be 0 (all) or in 1 .. {pool} ({sequences} chunks x {per} "
            f"positions), got {positions}"
        )
    picks = torch.arange(pool) if positions is None else torch.randperm(pool, generator=gen)
    picks = picks[: positions or pool].sort().values  # [P]
    return torch.stack([picks // per, picks % per + 1], 1)


def calibration(
    head: EagleHead, target_model, tokens: torch.Tensor, feats: torch.Tensor, ranks: int = 5,
    bins: int = 10, positions: int | None = 256, gen: torch.Generator | None = None,
    progress: Progress | None = None,
) -> list[RankCalibration]:  # fmt: skip
    """Fig. 2(b)'s numbers for one head: per rank 1 .. `ranks`, Appendix A's accuracy and ECE
    over `positions` test positions drawn with `gen` (None: all) from the held-out chunks
    tokens [S, T] with the target's features feats [S, T, H]."""
    if ranks < 1:
        raise ConfigError(f"--ranks must be >= 1, got {ranks}")
    if bins < 1:
        raise ConfigError(f"--bins must be >= 1, got {bins}")
    progress = progress or (lambda phase, done, total: None)
    gen = gen if gen is not None else torch.Generator().manual_seed(0)
    picks = draw_positions(tokens.shape[0], tokens.shape[1], positions, gen)  # [P, 2]
    confidence, correct = [], []
    done = 0
    for c in picks[:, 0].unique().tolist():
        roots = picks[picks[:, 0] == c, 1]  # [R]
        for start in range(0, len(roots), GROUP):
            d = chunk_draws(
                head, target_model, tokens[c], feats[c], roots[start : start + GROUP], ranks
            )
            probs = torch.softmax(d.head_logits, -1)  # [R, n, V]
            confidence.append(probs.gather(-1, d.target_next[..., None])[..., 0])  # [R, n]
            correct.append(top_token(d.head_logits) == d.target_next)  # [R, n]
            done += len(d.roots)
            progress("calibration", done, len(picks))
    return rank_metrics(torch.cat(confidence), torch.cat(correct), bins)


@dataclass(frozen=True)
class Diagnostic:
    """What `orch train eagle-calibration` runs: heads against one target on the held-out set."""

    heads: tuple[str, ...]  # eagle:NAME or eagle:PATH
    target: str
    sequences: int = 16  # held-out chunks
    seq_len: int = 128  # tokens per chunk
    positions: int | None = 256  # test positions drawn (None: all)
    ranks: int = 5
    bins: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.heads:
            raise ConfigError("--head: at least one EAGLE head (eagle:NAME or eagle:PATH)")
        for h in self.heads:
            if not h.startswith(EAGLE_PREFIX):
                raise ConfigError(f"--head {h!r}: an EAGLE head, eagle:NAME or eagle:PATH")
        if len(set(self.heads)) != len(self.heads):
            raise ConfigError("--head: each head once")
        for k in ("sequences", "ranks", "bins"):
            if getattr(self, k) < 1:
                raise ConfigError(f"--{k} must be >= 1, got {getattr(self, k)}")
        if self.seq_len < 2:
            raise ConfigError(f"--seq-len must be >= 2, got {self.seq_len}")
        draw_positions(self.sequences, self.seq_len, self.positions, torch.Generator())


def run(cfg: Diagnostic, progress: Progress | None = None, device: str | None = None) -> dict:
    """Load the target (fp32 on `device`, default the CPU), the held-out chunks and their
    cached features (engine/train/eagle_data.py), then each head; returns a JSON-able record:
    the config, the corpus's split record, the features' sha256 and per head its rows."""
    progress = progress or (lambda phase, done, total: None)
    target = load_model(cfg.target, device=device or "cpu", dtype="float32")
    tc = target.model.config
    if getattr(tc, "model_type", None) not in FAMILIES:
        raise ConfigError(
            f"--target {cfg.target}: EAGLE heads draft for {' or '.join(FAMILIES)} targets, not "
            f"{getattr(tc, 'model_type', 'unknown')}"
        )
    heads = {}
    for name in cfg.heads:  # every head checked before the features are computed
        head = load_head(name, target.device, torch.float32)["model"]
        if (head.cfg.hidden_size, head.cfg.vocab_size) != (tc.hidden_size, tc.vocab_size):
            raise ConfigError(
                f"{name} (hidden {head.cfg.hidden_size}, vocabulary {head.cfg.vocab_size}) is "
                f"not a head for {cfg.target} (hidden {tc.hidden_size}, vocabulary "
                f"{tc.vocab_size})"
            )
        heads[name] = head
    corpus = build_corpus(target.tokenizer, cfg.sequences, cfg.seq_len, split="held-out")
    feats, meta = cached_features(target.model, corpus.tokens, progress)
    out = []
    for name, head in heads.items():
        gen = torch.Generator().manual_seed(cfg.seed)  # every head at the same positions
        rows = calibration(
            head, target.model, corpus.tokens, feats, cfg.ranks, cfg.bins, cfg.positions, gen,
            lambda phase, done, total: progress(f"{phase} {name}", done, total),
        )  # fmt: skip
        out.append({"head": name, "rows": [asdict(r) for r in rows]})
    return {
        **asdict(cfg),
        "heads": out,
        "corpus": corpus.record(),
        "features": {k: meta[k] for k in ("sha256", "target_fingerprint", "shape")},
    }
