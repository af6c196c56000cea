"""Golden greedy equivalence: every method emits exactly the target's own greedy tokens."""

import dataclasses
import functools

import pytest

from engine.config import ConfigError
from engine.decode import generate
from engine.models import ByteTokenizer

PROMPTS = [
    "a",
    "Hello world",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Speculative decoding drafts tokens with a small model and verifies them with a large "
    "one in a single forward pass over the whole draft tree. " * 3,
]
METHODS = [("linear", {"k": k}) for k in range(1, 7)] + [
    ("fixed_tree", {"depth": 4, "branch": 2, "budget": 16}),
    ("fixed_tree", {"depth": 6, "branch": 3, "budget": 40}),
    ("fixed_tree", {"depth": 2, "branch": 8, "budget": 10}),
    # DynaTree's two variants (Alg. 1 rooted at the draft's top-1 token, and ours), with
    # thresholds low enough for the tiny drafts' flat distributions to grow real trees
    *(
        (
            "dynatree",
            {
                "variant": v,
                "tau": 1e-4,
                "rho_stop": 1e-5,
                "rho_deep": 2e-4,
                "tau_l": 0.018,
                "tau_h": 0.03,
                "N_max": 24,
                "W": 2,
                "accept_high": 0.3,
                "accept_low": 0.1,
            },
        )  # fmt: skip
        for v in ("paper", "ours")
    ),
    # prompt lookup: no draft forward; the prompts repeat themselves, so drafts get accepted
    ("lookup", {}),
    ("lookup", {"max_ngram": 2, "min_ngram": 1, "k": 6, "match": "first"}),
    ("lookup_tree", {}),
    ("lookup_tree", {"max_ngram": 4, "min_ngram": 1, "k": 3, "branches": 8, "budget": 12}),
    ("lookup_hybrid", {}),
    ("lookup_hybrid", {"base": "dynatree", "N": 20, "min_ngram": 1}),
]
NEW = 64


@functools.lru_cache(maxsize=None)
def reference(pair, prompt: str, n: int) -> tuple[int, ...]:
    ids = pair.target.tokenizer.encode(prompt)
    return tuple(generate(pair, ids, "autoregressive", n).tokens)


@pytest.mark.parametrize("method,params", METHODS, ids=lambda x: str(x))
def test_greedy_tokens_equal_autoregressive(tiny_pair, method, params):
    accepted = 0
    for prompt in PROMPTS:
        ids = tiny_pair.target.tokenizer.encode(prompt)
        g = generate(tiny_pair, ids, method, NEW, params=params)
        assert tuple(g.tokens) == reference(tiny_pair, prompt, NEW), (method, params, prompt)
        assert g.stats.new_tokens == NEW == sum(s.emitted for s in g.stats.iterations)
        accepted += sum(s.accepted for s in g.stats.iterations)
    assert accepted > 0, "the draft must agree sometimes, or the test exercises nothing"


@pytest.mark.parametrize("n", [1, 2, 7, 13, 30])
@pytest.mark.parametrize(
    "method,params", [("linear", {"k": 6}), ("fixed_tree", {"depth": 5, "branch": 2})]
)
def test_max_new_tokens_ending_mid_iteration(tiny_pair, method, params, n):
    prompt = PROMPTS[3]
    ids = tiny_pair.target.tokenizer.encode(prompt)
    g = generate(tiny_pair, ids, method, n, params=params)
    assert tuple(g.tokens) == reference(tiny_pair, prompt, NEW)[:n]


def test_stops_at_eos_and_emits_it(tiny_pair):
    """Make a token the greedy output produces mid-way the EOS: every method stops there."""
    prompt = PROMPTS[2]
    ids = tiny_pair.target.tokenizer.encode(prompt)
    ref = reference(tiny_pair, prompt, NEW)
    eos_tok = ref[20]
    tok = ByteTokenizer()
    tok.eos_token_id = eos_tok
    target = dataclasses.replace(tiny_pair.target, tokenizer=tok)
    pair = dataclasses.replace(tiny_pair, target=target)
    expect = list(ref[: ref.index(eos_tok) + 1])
    for method, params in [("autoregressive", {}), ("linear", {"k": 5}), ("fixed_tree", {})]:
        assert generate(pair, ids, method, NEW, params=params).tokens == expect


@pytest.mark.parametrize("method", ["lookup", "lookup_tree", "autoregressive"])
def test_model_free_methods_run_without_a_draft_model(tiny_pair, method):
    """A pair with no draft (load_pair(target, None), `draft: none`): the model-free methods
    give the same tokens; a method that needs the draft is refused in one line."""
    no_draft = dataclasses.replace(tiny_pair, draft=None)
    for prompt in PROMPTS[2:]:
        ids = tiny_pair.target.tokenizer.encode(prompt)
        g = generate(no_draft, ids, method, NEW)
        assert tuple(g.tokens) == reference(tiny_pair, prompt, NEW)
        assert all(s.draft_forwards == 0 for s in g.stats.iterations)
    with pytest.raises(ConfigError, match="draft: none"):
        generate(no_draft, [1, 2, 3], "lookup_hybrid", 4)


def test_lookup_runs_no_draft_forward_with_a_draft_loaded(tiny_pair):
    ids = tiny_pair.target.tokenizer.encode(PROMPTS[4])
    for method in ("lookup", "lookup_tree"):
        its = generate(tiny_pair, ids, method, NEW).stats.iterations
        assert sum(s.draft_forwards for s in its) == 0 and max(s.tree_size for s in its) > 1
