"""The paired bootstrap intervals (orchestrator/results/intervals.py) against closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from orchestrator.results.intervals import (
    add_intervals,
    draws,
    generator,
    overlaps,
    ratio_replicates,
    speedup_interval,
    tau_interval,
)


def test_the_bootstrap_of_a_mean_has_the_plug_in_variance_over_n():
    """With one-second prompts and a baseline of one token per second on each, speedup* is
    the w-weighted mean of the tokens per prompt: its bootstrap distribution has mean x_bar and
    variance sigma_hat^2 / n (sigma_hat^2 with divisor n), and for n = 400 normal-ish values
    the percentile interval is x_bar -+ 1.96 sigma_hat / sqrt(n)."""
    rng = np.random.default_rng(7)
    x = rng.normal(10.0, 2.0, size=400)
    n = len(x)
    ones = np.ones((1, n))
    w = draws(n, 20_000, generator("mean"))
    lo, hi = speedup_interval(x[None, :], ones, ones, ones, w, generator("repeats"))
    se = x.std(ddof=0) / math.sqrt(n)
    replicates = (w @ x) / n
    assert replicates.mean() == pytest.approx(x.mean(), abs=0.05 * se)
    assert replicates.std() == pytest.approx(se, rel=0.03)
    assert lo == pytest.approx(x.mean() - 1.96 * se, abs=0.1 * se)
    assert hi == pytest.approx(x.mean() + 1.96 * se, abs=0.1 * se)


def test_three_prompts_give_the_enumerated_bootstrap_quantiles():
    """n = 3: the 10 distinct resamples and their multinomial probabilities, enumerated; the
    bootstrap's 2.5% and 97.5% quantiles equal the exact distribution's to the draws' error."""
    x = np.array([1.0, 2.0, 7.0])
    exact = []
    for counts in itertools.product(range(4), repeat=3):
        if sum(counts) != 3:
            continue
        prob = math.factorial(3) / math.prod(math.factorial(c) for c in counts) / 27
        exact.append((float(np.dot(counts, x)) / 3, prob))
    exact.sort()
    cdf = np.cumsum([p for _, p in exact])
    q = [exact[int(np.searchsorted(cdf, level))][0] for level in (0.025, 0.975)]
    ones = np.ones((1, 3))
    w = draws(3, 20_000, generator("three"))
    lo, hi = speedup_interval(x[None, :], ones, ones, ones, w, generator("r"))
    assert (lo, hi) == pytest.approx(q)  # 1.0 and 7.0: all weight on one prompt, p = 1/27 each


def test_pairing_cancels_what_the_prompts_share():
    """A config twice as fast as its baseline on every prompt has the interval [2, 2], however
    much the prompts differ; the same numbers unpaired (the baseline's prompts resampled on
    their own) give a wide interval."""
    rng = np.random.default_rng(3)
    tokens = rng.integers(10, 500, size=(1, 12)).astype(float)
    base_s = rng.uniform(0.5, 30.0, size=(1, 12))
    w = draws(12, 2000, generator("paired"))
    lo, hi = speedup_interval(tokens, base_s / 2, tokens, base_s, w, generator("r"))
    assert (lo, hi) == pytest.approx((2.0, 2.0))
    v = draws(12, 2000, generator("other"))
    unpaired = ((w @ tokens.T) / (w @ (base_s / 2).T))[:, 0] / ((v @ tokens.T) / (v @ base_s.T))[
        :, 0
    ]
    assert np.quantile(unpaired, 0.975) - np.quantile(unpaired, 0.025) > 0.5


def test_tau_interval_and_the_reported_value_at_unit_weights():
    """At w = 1 and u = 1/R, tau* is the mean over repeats of each trial's tokens over its
    iterations (32/18 and 2); the interval lies within the per-prompt extremes around it."""
    tokens = np.array([[8.0, 8.0, 8.0, 8.0], [8.0, 8.0, 8.0, 8.0]])
    iterations = np.array([[2.0, 4.0, 8.0, 4.0], [4.0, 4.0, 4.0, 4.0]])
    mean = (32 / 18 + 2.0) / 2
    assert ratio_replicates(tokens, iterations, np.ones((1, 4)), np.full((1, 2), 0.5))[
        0
    ] == pytest.approx(mean)
    lo, hi = tau_interval(tokens, iterations, draws(4, 2000, generator("t")), generator("u"))
    assert 1.0 < lo < mean < hi <= 4.0


def test_overlaps():
    assert overlaps(1.0, 2.0, 1.5, 3.0) and overlaps(1.0, 2.0, 2.0, 3.0)
    assert not overlaps(1.0, 2.0, 2.1, 3.0)
    assert not overlaps(math.nan, 2.0, 1.0, 3.0)


def _trial(method, params, prompts, machine="cpu0", repeat=0):
    return {
        "target": "t",
        "draft": "d",
        "dataset": "x",
        "prompts": len(prompts),
        "category": None,
        "prompt_tokens": None,
        "chat": None,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_new_tokens": 8,
        "device": "cpu",
        "dtype": "float32",
        "engine": "eager",
        "target_revision": None,
        "draft_revision": None,
        "placement": None,
        "machine": machine,
        "draft_temperature": None,
        "draft_top_p": None,
        "draft_dtype": None,
        "method": method,
        "params": params,
        "repeat": repeat,
        "per_prompt": [
            {"id": f"p{i}", "new_tokens": k, "total_s": s, "iterations": it}
            for i, (k, s, it) in enumerate(prompts)
        ],
    }


def test_add_intervals_pairs_each_config_with_its_own_machines_baseline():
    ar = [(8, 1.0, 8), (8, 4.0, 8), (8, 2.0, 8)]
    fast = [(8, 0.5, 2), (8, 2.0, 4), (8, 1.0, 2)]  # 2x on every prompt
    df = pd.DataFrame(
        [
            _trial("autoregressive", "", ar),
            _trial("linear", "k=2", fast),
            _trial("linear", "k=2", fast, repeat=1),
            _trial("linear", "k=2", fast, machine="gpu0"),  # no baseline on gpu0
        ]
    )
    out = add_intervals(df)
    assert out.loc[1, ["speedup_lo", "speedup_hi"]].tolist() == pytest.approx([2.0, 2.0])
    assert out.loc[2, "speedup_lo"] == out.loc[1, "speedup_lo"]  # one config, both repeats
    assert out.loc[0, ["speedup_lo", "speedup_hi"]].tolist() == pytest.approx([1.0, 1.0])
    assert math.isnan(out.loc[3, "speedup_lo"]) and math.isnan(out.loc[3, "speedup_hi"])
    assert 2.0 <= out.loc[3, "tau_lo"] <= 24 / 8 <= out.loc[3, "tau_hi"] <= 4.0
    assert add_intervals(df).equals(out)  # deterministic
