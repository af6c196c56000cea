"""Every verifier end to end through generate() on the tiny pairs.

- Temperature 0: each verifier reproduces autoregressive greedy decoding token for token with
  the i.i.d. and delayed drafters (and NSS / greedy with the deterministic fixed tree).
- Temperature 1.0, top-p 0.9: the first two tokens of generate() with each stochastic verifier
  (method iid, K = 2, L = 2, one seed per sample) against autoregressive sampling and against the
  exact target law (see test_sampling_matches_autoregressive for the tests and their power).
"""

from __future__ import annotations

import functools

import pytest
import torch
from scipy.stats import chi2, chi2_contingency

from engine.decode import generate
from engine.sampling import Warp, warp
from engine.verify import VERIFIERS

STOCHASTIC = [v for v in VERIFIERS if v != "greedy"]
PROMPT = "Hello"
SEEDS = 400  # samples per verifier
AR_SEEDS = 800  # autoregressive reference samples
BINS = 8  # tokens grouped into bins of about equal target mass
FAMILY_ALPHA = 1e-3
ALPHA = FAMILY_ALPHA / (4 * len(STOCHASTIC))  # 4 chi-square tests per verifier, Bonferroni
WARP = Warp(temperature=1.0, top_p=0.9)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models on a shared CPU run far faster single-threaded (no thread contention)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_greedy_end_to_end(tiny_pair, name):
    prompt = tiny_pair.target.tokenizer.encode("The tiny model says")
    want = generate(tiny_pair, prompt, "autoregressive", 20).tokens
    methods = [("iid", {"K": 3, "L": 4}), ("delayed", {"K": 2, "L1": 2, "L2": 2})]
    if name in ("greedy", "nss"):
        methods.append(("fixed_tree", {"depth": 3, "branch": 2}))
    for method, params in methods:
        got = generate(tiny_pair, prompt, method, 20, params={**params, "verifier": name})
        assert got.tokens == want, (name, method)


@functools.lru_cache(maxsize=None)
def _target_laws(pair):
    """Exact target laws over V + 1 outcomes (the last, END, stands for "no token": the
    generation ended with EOS): position 1 [V + 1]; position 2 given y1 [V + 1, V + 1] and its
    marginal [V + 1]."""
    prompt = pair.target.tokenizer.encode(PROMPT)
    eos = pair.target.tokenizer.eos_token_id
    model = pair.target.model
    with torch.inference_mode():
        p1 = warp(model(torch.tensor([prompt])).logits[0, -1], WARP).double()  # [V]
        V = p1.shape[0]
        seqs = torch.tensor([prompt + [y] for y in range(V)])  # [V, T + 1]
        p2 = warp(model(seqs).logits[:, -1], WARP).double()  # [V, V]: row y1
    law1 = torch.cat([p1, torch.zeros(1, dtype=p1.dtype)])
    law2 = torch.zeros(V + 1, V + 1, dtype=p1.dtype)
    law2[:V, :V] = p2
    law2[eos] = 0.0
    law2[eos, V] = 1.0  # after EOS nothing follows
    return prompt, law1, law2, (law1[:, None] * law2).sum(0)


@functools.lru_cache(maxsize=None)
def _samples(pair, name: str) -> torch.Tensor:
    """[n, 2] first two generated tokens (END if the generation stopped), one per seed."""
    prompt = _target_laws(pair)[0]
    if name == "autoregressive":
        seeds, method, params = range(10_000, 10_000 + AR_SEEDS), "autoregressive", {}
    else:
        seeds, method, params = range(SEEDS), "iid", {"K": 2, "L": 2, "verifier": name}
    end = pair.target.model.config.vocab_size  # END: the generation stopped at EOS
    out = [generate(pair, prompt, method, 2, temperature=WARP.temperature, top_p=WARP.top_p,
                    seed=s, params=params).tokens for s in seeds]
    return torch.tensor([(t + [end, end])[:2] for t in out])


def _bins(law: torch.Tensor) -> torch.Tensor:
    """Token -> bin: BINS bins of about equal mass by decreasing probability; zero-probability
    tokens get bin BINS (must stay empty)."""
    order = law.argsort(descending=True)
    cum = law[order].cumsum(0) - law[order]
    out = torch.empty_like(order)
    out[order] = (cum * BINS).long().clamp(max=BINS - 1)
    out[law == 0] = BINS
    return out


def _one_sample_p(tokens: torch.Tensor, law: torch.Tensor) -> float:
    bins = _bins(law)
    obs = torch.bincount(bins[tokens], minlength=BINS + 1)[:BINS].double()
    exp = torch.zeros(BINS, dtype=torch.float64).index_add_(0, bins.clamp(max=BINS - 1), law)
    exp = exp * tokens.numel()
    return float(chi2.sf(float(((obs - exp) ** 2 / exp).sum()), BINS - 1))


def _two_sample_p(a: torch.Tensor, b: torch.Tensor, law: torch.Tensor) -> float:
    bins = _bins(law)
    table = torch.stack([torch.bincount(bins[a], minlength=BINS + 1)[:BINS],
                         torch.bincount(bins[b], minlength=BINS + 1)[:BINS]])
    return float(chi2_contingency(table.numpy())[1])


@pytest.mark.parametrize("name", STOCHASTIC)
def test_sampling_matches_autoregressive(llama_pair, name):
    """Tokens 1 and 2 of generate() (iid tree K = 2, L = 2) at temperature 1, top-p 0.9.

    Checks, at level FAMILY_ALPHA / 32 each (Bonferroni over 8 verifiers x 4 chi-square tests):
    - support: every token lies in the target's top-p set at its context (an outside token has
      probability 0 under autoregressive sampling, so this check is exact);
    - two-sample chi-square (homogeneity), verifier (400 seeds) vs autoregressive sampling
      (800 seeds), per position, on 8 bins of about equal target mass;
    - one-sample chi-square against the exact target law of each position (two batched target
      forwards), same bins.
    Power, simulated with 1000 replicates at this level against moving a fraction eps of the
    target mass from the upper half of the bins to the lower half (total variation eps):
        eps = 0.10: two-sample 0.04, one-sample 0.13
        eps = 0.15: two-sample 0.39, one-sample 0.79
        eps = 0.20: two-sample 0.93, one-sample 1.00
    (false-positive rate under the null: 0 in 1000). The tiny target is nearly uniform on about
    170 tokens here, so these tests see wiring errors (warping, rows of p and q, path and bonus
    positions; test_e2e_checks_have_power), not subtle bias: losslessness is tested with power
    by the Monte Carlo contract suite (test_verifier_contract.py).
    """
    prompt, p1, p2, m2 = _target_laws(llama_pair)
    got, ref = _samples(llama_pair, name), _samples(llama_pair, "autoregressive")
    assert bool((p1[got[:, 0]] > 0).all()), "token 1 outside the target's top-p set"
    assert bool((p2[got[:, 0], got[:, 1]] > 0).all()), "token 2 outside the target's top-p set"
    for pos, law in ((0, p1), (1, m2)):
        two = _two_sample_p(got[:, pos], ref[:, pos], law)
        one = _one_sample_p(got[:, pos], law)
        assert two > ALPHA, f"{name}: token {pos + 1} differs from autoregressive (p = {two:.2e})"
        assert one > ALPHA, f"{name}: token {pos + 1} differs from the target law (p = {one:.2e})"


def test_e2e_checks_have_power(llama_pair, monkeypatch):
    """A verifier that emits draft samples (always accepts the first child) fails: the draft's
    top-p set differs from the target's, so some tokens fall outside the support (the
    chi-square tests alone cannot see it: the tiny draft is within 0.05 of the target in TV)."""
    from engine import decode
    from engine.verify.common import Accept, layout, sample_index

    def accept_first_child(tree, p, gen):
        lay, node, path = layout(tree), 0, []
        while lay.kids[node]:
            node = lay.kids[node][0]
            path.append(node)
        return Accept(path, sample_index(p[node], float(torch.rand((), generator=gen))))

    monkeypatch.setitem(decode.VERIFIERS, "wrong", accept_first_child)
    _samples.cache_clear()
    try:
        with pytest.raises(AssertionError):
            test_sampling_matches_autoregressive(llama_pair, "wrong")
    finally:
        _samples.cache_clear()
