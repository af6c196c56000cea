"""A sampling verifier's output law, tested at one sampling setting on a toy pair: the
certificate of trials at temperature > 0 (issue 17; `orch certify`, stored per setting in
`verifier_checks`, migration 0010).

One sample per prompt cannot show a distribution, so a sampled trial is certified by a separate
experiment, the same for every trial with its verifier, tree sampling and sampling setting:

- The pair: the tiny llama pair seen through its first V_SMALL = 8 logits, times SCALE, with a
  fixed logit bias on the draft (`restricted_pair`). The raw tiny models are nearly uniform over
  260 tokens and their draft within 0.05 of the target in total variation, where a frequency
  test sees nothing; on this view the target law is far from uniform and the draft's clearly
  differs from it, while drafts are still often accepted.
- The tree: a small tree drawn as the trial's trees are (engine/tree.py SAMPLING_MODES): iid
  -> i.i.d. tree K = 2, L = 2; without_replacement -> DySpec, budget 4; deterministic -> fixed
  tree depth 2, branch 2.
- SEEDS generate() calls of two new tokens each at the setting, one seed each (0..SEEDS-1, so
  a check is reproducible), against the exact law of the first two tokens of autoregressive
  sampling at the target's setting (1 + V_SMALL target forwards, `two_token_law`).
- The test: every sampled pair inside the target's top-p support, and a chi-square goodness of
  fit to the exact law, cells expected fewer than 5 times pooled (`chi_square`); it passes at
  p > ALPHA. Stored beside it: its power at ALPHA against a verifier that emits the draft's own
  two-token law (accepting every draft token), from the noncentral chi-square. A check with low
  power (a setting where the two laws nearly coincide, e.g. a low temperature) passes without
  saying much; `informative` is power >= MIN_POWER.

What it shows: the verifier's wiring through generate() at this setting (warps of draft and
target, rows of p and q, path and bonus tokens). Subtle bias is the Monte Carlo contract
suite's job (tests/engine/verify/test_verifier_contract.py, 1e5 samples per verifier).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.draft.eagle import EagleDraft
from engine.drafters import PROBE_TREES
from engine.models import LoadedModel, Pair, load_pair
from engine.runtime.eager import CachedModel
from engine.runtime.eagle_head import EagleHead
from engine.sampling import Warp, draft_warp, warp
from engine.verify import VERIFIERS, canonical

V_SMALL, SCALE, DRAFT_BIAS_STD, BIAS_SEED = 8, 1.5, 0.3, 5
PROMPT = [256, 72, 105, 1, 2, 3]  # BOS "Hi" then tokens inside the small vocabulary
SEEDS = 600
ALPHA = 1e-4  # per check: a sweep certifies tens of settings
MIN_POWER = 0.99


class Restricted(torch.nn.Module):
    """A causal LM whose output is its first V logits, times `scale`, plus `bias` [V]."""

    def __init__(self, model, vocab: int, scale: float, bias: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.vocab, self.scale = model, vocab, scale
        self.register_buffer("bias", bias)
        self.config = model.config

    @property
    def device(self):
        return self.inner.device

    @property
    def dtype(self):
        return self.inner.dtype

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        logits = out.logits[..., : self.vocab] * self.scale + self.bias
        return SimpleNamespace(logits=logits, hidden_states=getattr(out, "hidden_states", None))

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.inner.get_input_embeddings()

    def get_output_embeddings(self) -> torch.nn.Module:
        """The restricted view of the LM head (an EAGLE head drafts through it)."""
        return RestrictedHead(self.inner.get_output_embeddings(), self)


class RestrictedHead(torch.nn.Module):
    """An LM head seen as Restricted sees its model's: first V logits, times scale, plus bias."""

    def __init__(self, head: torch.nn.Module, view: Restricted) -> None:
        super().__init__()
        self.head, self.view = head, [view]  # a list: not a submodule (no cycle)

    @property
    def weight(self) -> torch.Tensor:
        return self.head.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        v = self.view[0]
        return self.head(hidden)[..., : v.vocab] * v.scale + v.bias


def restricted_pair(
    pair: Pair, vocab: int = 8, scale: float = 3.0, bias_std: float = 0.8, seed: int = 5
) -> Pair:
    """`pair` seen through its first `vocab` logits, times `scale`; the draft gets a fixed
    N(0, bias_std) logit bias drawn with `seed` (the target none)."""
    bias = torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * bias_std

    def wrap(m: LoadedModel, b: torch.Tensor) -> LoadedModel:
        return LoadedModel(
            name=m.name + f"-v{vocab}",
            model=Restricted(m.model, vocab, scale, b),
            tokenizer=m.tokenizer,
            device=m.device,
            dtype=m.dtype,
        )

    return Pair(target=wrap(pair.target, torch.zeros(vocab)), draft=wrap(pair.draft, bias))


def pooled(expected: torch.Tensor, min_expected: float = 5.0) -> torch.Tensor:
    """Cell -> bin index: cells with expected count < min_expected share one bin."""
    small = expected < min_expected
    bins = torch.cumsum(~small, 0) - 1
    return torch.where(small, int((~small).sum()), bins)


def chi_square(
    counts: torch.Tensor, law: torch.Tensor, alt: torch.Tensor | None = None, alpha: float = 1e-3
) -> tuple[float, float | None]:
    """Goodness of fit of `counts` (flat, n samples) to `law` (flat probabilities): p-value, and
    the test's power at level alpha against the alternative law `alt` (noncentral chi-square,
    lambda = n * sum (alt - law)^2 / law over the pooled bins)."""
    from scipy import stats  # lazy: scipy

    n = float(counts.sum())
    bins = pooled(n * law)
    k = int(bins.max()) + 1
    if k < 2:  # one bin (a law on a single cell): nothing to fit
        return 1.0, 0.0 if alt is not None else None
    obs = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, counts.double())
    exp = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, n * law.double())
    stat = float(((obs - exp) ** 2 / exp).sum())
    pvalue = float(stats.chi2.sf(stat, k - 1))
    power = None
    if alt is not None:
        alt_b = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, alt.double())
        lam = float(n * ((alt_b - exp / n) ** 2 / (exp / n)).sum())
        power = float(stats.ncx2.sf(stats.chi2.isf(alpha, k - 1), k - 1, lam))
    return pvalue, power


@torch.inference_mode()
def two_token_law(model: Any, w: Warp) -> torch.Tensor:
    """P(y1, y2) of autoregressive sampling with warp w after PROMPT: [V_SMALL^2] float64,
    y1 major."""
    p1 = warp(model(input_ids=torch.tensor([PROMPT])).logits[0, -1], w).double()  # [V]
    ctx = torch.tensor([PROMPT + [y] for y in range(V_SMALL)])  # [V, len(PROMPT) + 1]
    p2 = warp(model(input_ids=ctx).logits[:, -1], w).double()  # [V, V] row y1
    return (p1[:, None] * p2).reshape(-1)


@torch.inference_mode()
def draft_two_token_law(pair: Pair, w: Warp) -> torch.Tensor:
    """The draft's P(y1, y2) after PROMPT at warp w [V_SMALL^2] float64: two_token_law of a
    draft LM; of an EAGLE head, the head's own drafting law (engine/draft/eagle.py): y1 from
    the root's row on the target's features of the prompt, y2 from y1's row on the root's
    output feature, as its trees draw them."""
    if not isinstance(pair.draft.model, EagleHead):
        return two_token_law(pair.draft.model, w)
    target = CachedModel(pair.target.model)
    draft = EagleDraft(pair.draft.model, target, w)
    target.extend(PROMPT[:-1])
    draft.prefill(target)
    b = draft.start(PROMPT)
    rows = b.expand([0])  # [1, V]
    rows = torch.cat([rows, b.expand(b.add_children(0, list(range(V_SMALL))))])  # [1 + V, V]
    if w.greedy:  # the tree's q is one-hot at the argmax (the feed returns the softmax)
        rows = torch.zeros_like(rows).scatter_(-1, rows.argmax(-1, keepdim=True), 1.0)
    rows = rows.double()
    return (rows[0][:, None] * rows[1:]).reshape(-1)


@dataclass(frozen=True)
class Setting:
    """What a sampled trial's certificate depends on: its verifier, how its trees are drawn,
    and its sampling (the draft's None: the target's)."""

    verifier: str
    tree_sampling: str
    temperature: float
    top_p: float = 1.0
    draft_temperature: float | None = None
    draft_top_p: float | None = None

    def __post_init__(self) -> None:
        if canonical(self.verifier) not in VERIFIERS:  # an alias (tv) checks its verifier
            raise ConfigError(f"unknown verifier {self.verifier!r}")
        if self.tree_sampling not in PROBE_TREES:
            raise ConfigError(f"unknown tree sampling {self.tree_sampling!r}")
        if self.temperature <= 0:
            raise ConfigError("a distribution check needs a temperature > 0")
        if self.draft.greedy and self.tree_sampling == "without_replacement":
            raise ConfigError("trees drawn without replacement need a draft temperature > 0")
        if not VERIFIERS[canonical(self.verifier)].accepts(self.tree_sampling, self.temperature):
            raise ConfigError(
                f"verifier {self.verifier!r} is not lossless on {self.tree_sampling} trees"
            )

    @property
    def warp(self) -> Warp:
        return Warp(self.temperature, self.top_p)

    @property
    def draft(self) -> Warp:
        return draft_warp(self.warp, self.draft_temperature, self.draft_top_p)


def samples(pair: Pair, s: Setting, seeds: int = SEEDS) -> torch.Tensor:
    """[seeds] the first two tokens of generate() at setting s as y1 * V_SMALL + y2."""
    method, params = PROBE_TREES[s.tree_sampling]
    out = [
        generate(
            pair,
            PROMPT,
            method,
            2,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=seed,
            params={**params, "verifier": s.verifier},
            draft_temperature=s.draft_temperature,
            draft_top_p=s.draft_top_p,
        ).tokens
        for seed in range(seeds)
    ]
    return torch.tensor([t[0] * V_SMALL + t[1] for t in out])


def check_pair() -> Pair:
    """The toy pair every check runs on: the tiny llama pair's restricted view (CPU, fp32)."""
    pair = load_pair("tiny-llama", "tiny-llama-draft", device="cpu", dtype="float32")
    return restricted_pair(pair, V_SMALL, SCALE, DRAFT_BIAS_STD, BIAS_SEED)


def check(s: Setting, pair: Pair | None = None, seeds: int = SEEDS) -> dict[str, Any]:
    """Run the check of setting s (see the module docstring): the stored record."""
    pair = pair or check_pair()
    start = time.perf_counter()
    law = two_token_law(pair.target.model, s.warp)  # [V^2]
    draft_law = draft_two_token_law(pair, s.draft)  # [V^2]
    got = samples(pair, s, seeds)  # [seeds]
    support = bool((law[got] > 0).all())
    counts = torch.bincount(got, minlength=law.numel())
    pvalue, power = chi_square(counts, law, draft_law, ALPHA)
    return {
        **asdict(s),
        "samples": seeds,
        "p_value": pvalue,
        "support_ok": support,
        "alpha": ALPHA,
        "power": power,
        "passed": support and pvalue > ALPHA,
        "informative": power >= MIN_POWER,
        "seconds": time.perf_counter() - start,
    }
