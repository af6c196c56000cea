"""The EAGLE head as the draft (engine/draft/eagle.py): its tree rows across iterations equal a
plain per-step loop over the target's features (the head's own output fed back below the
root), and every tree method decodes greedy-exact with it (a randomly initialised head here;
a trained one in tests/engine/train/test_eagle_train.py)."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.draft.eagle import EagleDraft
from engine.drafters.sequoia.profile import measure_profile
from engine.models import LoadedModel, Pair
from engine.runtime.eager import CachedModel
from engine.runtime.eagle_head import EagleHead, head_config
from engine.runtime.eagle_views import teacher_forced_logits
from engine.sampling import Warp
from tests.engine.golden import PROMPTS, reference
from tests.method_cases import SMALL


def random_head(model, seed: int = 0) -> EagleHead:
    torch.manual_seed(seed)
    return EagleHead(head_config(model.config)).eval()


def eagle_pair(target: LoadedModel, head: EagleHead) -> Pair:
    draft = LoadedModel("eagle:test", head, target.tokenizer, target.device, target.dtype)
    return Pair(target=target, draft=draft)


@torch.no_grad()
def plain_rows(head, model, committed: list[int], path: list[int]) -> list[torch.Tensor]:
    """The head's distributions below the root and below each token of `path` [V] each, by
    a direct loop: the target's features of committed[:-1] from one cache-free forward, rows
    (c_j, f_{j-1}) for j >= 1 (a one-token prompt: (c_0, 0)), then per step a causal forward
    of every row from scratch, its last output feature paired with the next path token."""
    embed, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    h = model.config.hidden_size
    if len(committed) > 1:
        out = model(input_ids=torch.tensor([committed[:-1]]), output_hidden_states=True)
        tokens, feats = list(committed[1:]), list(out.hidden_states[-1][0])
    else:
        tokens, feats = list(committed), [torch.zeros(h)]
    rows = []
    for step in range(len(path) + 1):
        n = len(tokens)
        outs, _ = head(embed(torch.tensor(tokens))[None], torch.stack(feats)[None],
                       torch.arange(n)[None])  # fmt: skip
        rows.append(torch.softmax(lm_head(outs[0, -1]).float(), -1))
        if step < len(path):
            tokens.append(path[step])
            feats.append(outs[0, -1])
    return rows


@pytest.mark.parametrize("prompt", [[256, 72, 105, 33, 9, 40], [256]])
def test_tree_rows_equal_a_plain_loop_across_iterations(llama_pair, prompt):
    """Three iterations with forced acceptances (a path of two, none, one), each tree grown
    as builders do (the root, two children, then a node and its child in one expand): every
    row is the plain loop's distribution of its path."""
    model = llama_pair.target.model
    head = random_head(model, seed=1)
    target = CachedModel(model)
    draft = EagleDraft(head, target, Warp(0.0))
    committed = list(prompt)
    with torch.inference_mode():
        target.extend(committed[:-1])
        draft.prefill(target)
        for forced in ([1, 3], [], [2]):
            b = draft.start(committed)
            got = {0: b.expand([0])[0]}
            top2 = got[0].topk(2).indices.tolist()
            c1, c2 = b.add_children(0, top2)
            got.update(zip([c1, c2], b.expand([c1, c2])))
            g = b.add(c1, int(got[c1].argmax()))
            gg = b.add(g, 7)  # fed with its parent: runs after it
            got.update(zip([g, gg], b.expand([g, gg])))
            for node, row in got.items():
                path = b.path_tokens(node)
                want = plain_rows(head, model, committed, path)[-1]
                torch.testing.assert_close(row, want, atol=2e-5, rtol=0)
            tree = b.tree()
            p = len(committed) - 1
            target.forward(tree.tokens, tree.position_ids(p)[0], tree.visibility(p), tree.parents)
            target.commit([p + i for i in [0] + forced])
            draft.commit(forced)
            committed += tree.tokens[forced].tolist() + [11]  # the path, then a bonus token


def test_teacher_forced_rows_are_the_roots_drafts(llama_pair):
    """teacher_forced_logits row t is what the head drafts below a root x_t."""
    model = llama_pair.target.model
    head = random_head(model, seed=3)
    seq = [256, 72, 105, 33, 9, 40, 50]
    with torch.inference_mode():
        logits = teacher_forced_logits(head, model, torch.tensor([seq]))[0]  # [T, V]
        for t in range(1, len(seq)):
            target = CachedModel(model)
            draft = EagleDraft(head, target, Warp(0.0))
            target.extend(seq[:t])
            draft.prefill(target)
            row = draft.start(seq[: t + 1]).expand([0])[0]
            torch.testing.assert_close(row, torch.softmax(logits[t], -1), atol=2e-6, rtol=0)


def test_sequoias_measured_profile_reads_the_head(llama_pair):
    """At temperature 0, p_k is the share of the 8 positions whose target argmax is the
    head's k-th token: multiples of 1/8, summing to at most 1."""
    pair = eagle_pair(llama_pair.target, random_head(llama_pair.target.model))
    ids = llama_pair.target.tokenizer.encode(PROMPTS[1])
    profile = measure_profile(pair, [ids], new_tokens=8, width=4)
    assert len(profile) == 4 and sum(profile) <= 1.0 + 1e-9
    assert all(abs(p * 8 - round(p * 8)) < 1e-3 for p in profile)


def test_head_for_another_target_is_refused(llama_pair):
    from transformers import LlamaConfig

    other = EagleHead(head_config(LlamaConfig(hidden_size=32, num_attention_heads=4)))
    with pytest.raises(ConfigError, match="not for this target"):
        EagleDraft(other, CachedModel(llama_pair.target.model), Warp(0.0))


BUILDERS = {  # every tree method's builder, SpecExec's optimal tree as SALF at th = 0
    "linear": SMALL["linear"],
    "beam": SMALL["beam"],
    "salf": SMALL["salf"],
    "specexec": {"N": 8, "B": 2, "th": 0.0},
    "dynatree": SMALL["dynatree"],
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_greedy_exact_with_each_builder(llama_pair, name):
    pair = eagle_pair(llama_pair.target, random_head(llama_pair.target.model))
    method = "salf" if name == "specexec" else name
    for j, prompt in enumerate(PROMPTS):
        n = 24 if j != 1 else 17
        ids = llama_pair.target.tokenizer.encode(prompt)
        g = generate(pair, ids, method, n, params=BUILDERS[name])
        assert tuple(g.tokens) == reference(llama_pair, prompt, n)
        assert all(it.tree_size > 1 for it in g.stats.iterations[:-1])  # the head drafted


def test_every_registered_method_runs_with_the_head(llama_pair):
    """The head stands in for the draft of every method that runs a draft LM (greedy)."""
    from engine.drafters import DRAFTERS

    pair = eagle_pair(llama_pair.target, random_head(llama_pair.target.model))
    ids = llama_pair.target.tokenizer.encode(PROMPTS[1])
    ref = reference(llama_pair, PROMPTS[1], 12)
    for name, params in SMALL.items():
        if DRAFTERS[name].model_free:
            continue
        assert tuple(generate(pair, ids, name, 12, params=params).tokens) == ref, name


@pytest.mark.parametrize("engine", ["fast", "fast+lean"])
def test_other_engines_greedy_exact(llama_pair, engine):
    """On the static-cache engines the target's features come from their forwards (the lean
    forward hands a forward that asks for hidden states to Hugging Face's)."""
    pair = eagle_pair(llama_pair.target, random_head(llama_pair.target.model))
    ids = llama_pair.target.tokenizer.encode(PROMPTS[2])
    g = generate(pair, ids, "beam", 20, params=SMALL["beam"], engine=engine)
    assert tuple(g.tokens) == reference(llama_pair, PROMPTS[2], 20)


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_tiny_qwen2_target_with_either_layer(qkv_bias):
    """A random Qwen2 target drafts greedy-exact with its family's head (q/k/v biases) and
    with a bias-free, Llama-style one (a public Qwen2 head without `qkv_bias`)."""
    import dataclasses
    from types import SimpleNamespace

    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, rope_theta=1e6)  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    c = head_config(config)
    if not qkv_bias:
        c = dataclasses.replace(c, family="llama", qkv_bias=False)
    head = EagleHead(c).eval()
    tok = SimpleNamespace(eos_token_id=None, vocab_size=64)
    target = LoadedModel("tiny-qwen2", model, tok, torch.device("cpu"), torch.float32)
    pair = eagle_pair(target, head)
    ids = [3, 17, 5, 40, 9]
    with torch.inference_mode():
        ref = []
        for _ in range(12):
            ref.append(int(model(input_ids=torch.tensor([ids + ref])).logits[0, -1].argmax()))
    for method in ("beam", "salf"):
        assert generate(pair, ids, method, 12, params=SMALL[method]).tokens == ref, method


def test_a_methods_learned_part_cannot_take_the_heads_place(llama_pair, monkeypatch):
    """A method whose record attaches a learned part (DDTree's block drafter, NDE taps) reads
    a draft LM or the target's features of its own: refused with one line, the part closed."""
    import dataclasses

    from engine import drafters

    closed = []

    class Part:
        def close(self):
            closed.append(1)

    record = dataclasses.replace(drafters.DRAFTERS["linear"], attach=lambda *a: Part())
    monkeypatch.setitem(drafters.DRAFTERS, "linear", record)
    pair = eagle_pair(llama_pair.target, random_head(llama_pair.target.model))
    with pytest.raises(ConfigError, match="an EAGLE head cannot be its draft"):
        generate(pair, [256, 72], "linear", 4)
    assert closed == [1]


def test_a_bf16_head_beside_an_fp32_target(llama_pair):
    """The head's dtype is its own: features and embeddings are cast to it, its outputs to the
    LM head's (greedy output still the target's)."""
    head = random_head(llama_pair.target.model).to(torch.bfloat16)
    pair = eagle_pair(llama_pair.target, head)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    g = generate(pair, ids, "beam", 12, params=SMALL["beam"])
    assert tuple(g.tokens) == reference(llama_pair, PROMPTS[0], 12)
