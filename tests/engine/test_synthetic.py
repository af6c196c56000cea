"""engine/synthetic.py: aligned synthetic pairs, checked against the construction's documented
steps (planted successors, the model's order, weights that make o_1(x) the greedy token), the
knob (agreement grows with align, near align itself), determinism, names, and every method's
greedy exactness on a synthetic pair."""

import pytest
import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.model_names import SyntheticName, canonical_name, parse_synthetic
from engine.models import load_pair, model_config, resolve
from engine.synthetic import PLANTED, build_synthetic, order, successors
from tests.method_cases import SMALL

V = 16384  # the toy shapes' vocabulary
CPU = torch.device("cpu")
# a target and its draft of one small shape (each forward a few ms on this CPU)
TARGET, DRAFT = "synthetic:toy-draft@align=0.8", "synthetic:toy-draft@seed=0"


def test_names_have_one_spelling_and_bad_ones_one_line():
    assert (
        canonical_name("synthetic:qwen2.5-7b@align=0.80,seed=0") == "synthetic:qwen2.5-7b@align=0.8"
    )
    assert canonical_name("synthetic:toy-draft@seed=3,align=1") == "synthetic:toy-draft@seed=3"
    assert parse_synthetic("synthetic:llama-68m") == SyntheticName("llama-68m", 1.0, 0)
    assert parse_synthetic("tiny-llama") is None
    assert resolve("synthetic:qwen2.5-0.5b@align=0.5") == "synthetic"
    bad = {
        "synthetic:gpt-5": "unknown shape 'gpt-5'",
        "synthetic:toy-draft@align=0": "align must be in (0, 1]",
        "synthetic:toy-draft@align=1.5": "align must be in (0, 1]",
        "synthetic:toy-draft@temp=2": "options are align=A",
        "synthetic:toy-draft@align=0.5,align=0.6": "given once each",
        "synthetic:toy-draft@seed=x": "options are align=A",
    }
    for name, why in bad.items():
        with pytest.raises(ConfigError) as e:
            resolve(name)
        assert why in str(e.value) and "\n" not in str(e.value), name
    cfg = model_config("synthetic:qwen2.5-7b")  # without building it
    assert cfg["model_type"] == "qwen2" and cfg["vocab_size"] == 152064
    assert cfg["tie_word_embeddings"] is False


def test_the_order_follows_the_steps():
    """Step 1: K distinct successors, none the token; step 2: the reference order kept for a
    fraction align of the tokens, else s_j moved to the front with odds 4 : 2 : 1, and the
    kept tokens nest as align grows."""
    s = successors(0, V)
    assert s.shape == (V, PLANTED)
    assert all(len(set(row)) == PLANTED for row in s.tolist())
    assert not (s == torch.arange(V)[:, None]).any()
    kept = {}
    for a in (0.5, 0.8, 0.95):
        o = order(SyntheticName("toy-target", a), V)
        assert torch.equal(o.sort(-1).values, s.sort(-1).values)  # the same successors
        keep = (o == s).all(-1)
        kept[a] = keep
        assert abs(float(keep.float().mean()) - a) < 0.02  # 3 sigma at V = 16384 is 0.012
        moved = o[~keep]
        front = [(moved[:, 0] == s[~keep][:, j]).float().mean().item() for j in (1, 2, 3)]
        assert front == pytest.approx([4 / 7, 2 / 7, 1 / 7], abs=0.03), (a, front)
        rest = torch.stack([r[r != f] for r, f in zip(s[~keep], moved[:, 0])])
        assert torch.equal(moved[:, 1:], rest)  # the others keep the reference's order
    assert bool((kept[0.8] <= kept[0.95]).all() and (kept[0.5] <= kept[0.8]).all())
    assert order(SyntheticName("toy-target", 1.0), V).equal(s)


def test_the_greedy_token_is_the_models_first_successor_in_any_context():
    """Step 3 and 4: after the layers (random, scaled to a tenth of the embedding), the
    argmax at every position is o_1 of that position's token, and the planted successors
    are the top K in the model's order."""
    name = parse_synthetic(TARGET)
    model = build_synthetic(name, CPU, torch.float32)
    x = torch.randint(V, (300,), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        logits = model(x[None]).logits[0]  # [300, V]
    o = order(name, V)[x]
    assert torch.equal(logits.topk(PLANTED, -1).indices, o)


def test_same_seed_same_models_and_the_draft_takes_the_targets_vocabulary():
    a = build_synthetic(parse_synthetic(DRAFT), CPU, torch.float32)
    b = build_synthetic(parse_synthetic(DRAFT), CPU, torch.float32)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    c = build_synthetic(parse_synthetic("synthetic:toy-draft@seed=1"), CPU, torch.float32)
    assert not torch.equal(a.get_input_embeddings().weight, c.get_input_embeddings().weight)
    pair = load_pair("synthetic:toy-draft", "synthetic:llama-68m")  # 32000 tokens of its own
    assert pair.draft.model.config.vocab_size == pair.target.model.config.vocab_size == V


@pytest.fixture(scope="module")
def pairs():
    return {a: load_pair(f"synthetic:toy-draft@align={a}", DRAFT) for a in (0.5, 0.8, 0.95)}


def test_acceptance_grows_with_the_knob_and_is_near_it(pairs):
    """Linear k = 4, greedy, on a random prompt: the share of drafted tokens accepted among
    those the verifier reached is near align, and the tokens per iteration grow with it."""
    prompt = torch.randint(256, (32,), generator=torch.Generator().manual_seed(2)).tolist()
    per_iteration, rates = [], []
    for a, pair in pairs.items():
        g = generate(pair, prompt, "linear", 96, params={"k": 4})
        its = g.stats.iterations
        per_iteration.append(g.stats.new_tokens / len(its))
        rates.append(sum(i.accepted for i in its) / sum(i.tried for i in its))
        assert abs(rates[-1] - a) < 0.15, (a, rates[-1])
    assert per_iteration == sorted(per_iteration) and per_iteration[0] < per_iteration[-1]


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_every_method_is_greedy_exact_on_a_synthetic_pair(pairs, method):
    pair = pairs[0.8]
    prompt = pair.target.tokenizer.encode("def f(x):\n    return x + 1\n")
    reference = generate(pair, prompt, "autoregressive", 24).tokens
    params = SMALL.get(method, {})
    assert generate(pair, prompt, method, 24, params=params).tokens == reference, method
