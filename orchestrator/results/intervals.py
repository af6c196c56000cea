"""Confidence intervals for a config's speedup and tokens per iteration: a paired bootstrap
over prompts and repeats against the same-machine baseline (settings.py), percentile
intervals (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, Sec. 13.3).

A config has repeats r = 1..R (its trials), its baseline (the autoregressive trials with the
same settings on the same machine) repeats b = 1..R_b, both measured on the prompts p = 1..n
(matched by prompt id; prompts one side lacks are left out). Per (trial, prompt): new tokens
k, seconds s, iterations i. One bootstrap replicate draws

    w ~ Multinomial(n, 1/n)       prompts, the same draw for the config and its baseline
                                  (paired), and for every config of that setting and prompts
    u ~ Multinomial(R, 1/R) / R   the config's repeats;  v ~ Multinomial(R_b, 1/R_b) / R_b

and computes

    speedup* = sum_r u_r (sum_p w_p k_rp / sum_p w_p s_rp)
               / sum_b v_b (sum_p w_p k_bp / sum_p w_p s_bp)
    tau*     = sum_r u_r (sum_p w_p k_rp / sum_p w_p i_rp)

At w = 1, u = v = 1/R, 1/R_b these are the reported values: the mean over repeats of each
trial's throughput (all its tokens over all its time) over the baseline's mean throughput,
and the mean tokens per iteration. The interval is the (1 - LEVEL)/2 and (1 + LEVEL)/2
quantiles of B replicates. Pairing removes what the prompts share: a config that is c times
faster on every prompt has the interval [c, c] however much the prompts differ in length.

Deterministic: the draws come from numpy Generators seeded by sha256 of the setting (w) and
of the config (u, v), so the same database gives the same intervals (and reports stay
byte-identical). Configs without per-prompt timings get NaN.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.results.settings import BASELINE, CONFIG_KEY, settings_keys

B = 2000  # replicates
LEVEL = 0.95
COLUMNS = ("speedup_lo", "speedup_hi", "tau_lo", "tau_hi")


def generator(key: str) -> np.random.Generator:
    """A numpy Generator seeded by sha256 of `key`."""
    return np.random.default_rng(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))


def draws(n: int, b: int, gen: np.random.Generator) -> np.ndarray:
    """b resamples of n items with replacement (Multinomial(n, 1/n) counts), as weights [b, n];
    a single item is always drawn (no randomness spent on it)."""
    if n == 1:
        return np.ones((b, 1))
    picks = gen.integers(0, n, size=(b, n))  # [b, n] item indices
    counts = np.zeros((b, n))
    np.add.at(counts, (np.arange(b)[:, None], picks), 1.0)
    return counts


def percentile(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of the replicates [b]."""
    lo, hi = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def ratio_replicates(
    tokens: np.ndarray, seconds: np.ndarray, w: np.ndarray, u: np.ndarray
) -> np.ndarray:
    """sum_r u_r (w . tokens_r) / (w . seconds_r) per replicate: tokens, seconds [R, n],
    w [b, n], u [b, R] (rows summing to 1) -> [b]."""
    return (u * ((w @ tokens.T) / (w @ seconds.T))).sum(axis=1)


def speedup_interval(
    tokens: np.ndarray,
    seconds: np.ndarray,
    base_tokens: np.ndarray,
    base_seconds: np.ndarray,
    w: np.ndarray,
    gen: np.random.Generator,
    level: float = LEVEL,
) -> tuple[float, float]:
    """The paired bootstrap interval of the speedup (module docstring): the config's tokens
    and seconds [R, n], its baseline's [R_b, n], prompt weights w [b, n], `gen` for the
    repeats' draws."""
    b = w.shape[0]
    u = draws(tokens.shape[0], b, gen) / tokens.shape[0]
    v = draws(base_tokens.shape[0], b, gen) / base_tokens.shape[0]
    num = ratio_replicates(tokens, seconds, w, u)
    return percentile(num / ratio_replicates(base_tokens, base_seconds, w, v), level)


def tau_interval(
    tokens: np.ndarray,
    iterations: np.ndarray,
    w: np.ndarray,
    gen: np.random.Generator,
    level: float = LEVEL,
) -> tuple[float, float]:
    """The bootstrap interval of tokens per iteration: tokens, iterations [R, n], w [b, n]."""
    u = draws(tokens.shape[0], w.shape[0], gen) / tokens.shape[0]
    return percentile(ratio_replicates(tokens, iterations, w, u), level)


def _prompts(per_prompt: Any) -> dict[str, tuple[float, float, float]]:
    """prompt id -> (new tokens, seconds, iterations) of one trial, prompts with timings only."""
    out = {}
    for p in per_prompt if isinstance(per_prompt, list) else []:
        if isinstance(p, dict) and p.get("total_s") and "new_tokens" in p:
            out[str(p.get("id"))] = (
                float(p["new_tokens"]),
                float(p["total_s"]),
                float(p.get("iterations") or 0),
            )
    return out


def _matrix(trials: Sequence[dict[str, tuple]], ids: list[str], field: int) -> np.ndarray:
    return np.array([[t[i][field] for i in ids] for t in trials])  # [R, n]


def add_intervals(df: pd.DataFrame, b: int = B, level: float = LEVEL) -> pd.DataFrame:
    """`df` (a results frame with `per_prompt`) with COLUMNS: per config (CONFIG_KEY, its
    repeats pooled), the bootstrap intervals of its speedup against its baseline (NaN without
    one) and of its tokens per iteration; the same values on each of its trials' rows."""
    ckey, skey = settings_keys(df, CONFIG_KEY), settings_keys(df)
    prompts = [_prompts(pp) for pp in df["per_prompt"]]
    configs: dict[str, list[int]] = {}
    for i, k in enumerate(ckey):
        configs.setdefault(k, []).append(i)
    base: dict[str, list[dict]] = {}
    for k, method, p in zip(skey, df["method"], prompts):
        if method == BASELINE and p:
            base.setdefault(k, []).append(p)
    out = {c: np.full(len(df), math.nan) for c in COLUMNS}
    prompt_draws: dict[str, np.ndarray] = {}  # one draw per setting and prompt set: paired
    for key, rows in configs.items():
        trials = [prompts[i] for i in rows]
        if not all(trials):
            continue
        setting = skey.iloc[rows[0]]
        baseline = base.get(setting, [])
        ids = sorted(set.intersection(*(set(t) for t in trials + baseline)))
        if not ids:
            continue
        seed = f"{setting} {len(ids)} {ids}"
        if seed not in prompt_draws:
            prompt_draws[seed] = draws(len(ids), b, generator(seed))
        w = prompt_draws[seed]
        gen = generator(key)
        tokens = _matrix(trials, ids, 0)
        iterations = _matrix(trials, ids, 2)
        if (iterations > 0).all():
            lo, hi = tau_interval(tokens, iterations, w, gen, level)
            out["tau_lo"][rows], out["tau_hi"][rows] = lo, hi
        if baseline:
            lo, hi = speedup_interval(
                tokens,
                _matrix(trials, ids, 1),
                _matrix(baseline, ids, 0),
                _matrix(baseline, ids, 1),
                w,
                gen,
                level,
            )
            out["speedup_lo"][rows], out["speedup_hi"][rows] = lo, hi
    return df.assign(**out)


def overlaps(lo: float, hi: float, other_lo: float, other_hi: float) -> bool:
    """Whether two intervals share a point (False where either is unknown)."""
    if any(math.isnan(x) for x in (lo, hi, other_lo, other_hi)):
        return False
    return lo <= other_hi and other_lo <= hi
