"""Our own Llama / Qwen2 forward (engine/runtime/lean.py, `engine: ENGINE+lean`): the same logits
as the Hugging Face model on the slot cache, the same greedy tokens as autoregressive decoding
for every method on the static-cache engines, its weights shared with the Hugging Face modules,
and one error line, before anything loads, for a model it does not support."""

import copy

import pytest
import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.methods import standalone
from engine.models import check_engine, load_pair
from engine.runtime.lean import LeanLM, lean
from engine.runtime.static import StaticCachedModel
from tests.engine.golden import PROMPTS, reference
from tests.engine.runtime.cache_helpers import tree_then_commit
from tree_kernels.triton_tree_attention import is_interpreted

# the Triton kernels run on CPU tensors only under the interpreter
KERNELS = ["torch"] + (["triton"] if is_interpreted() or torch.cuda.is_available() else [])


def tiny_qwen2():
    """A random Qwen2 (biases on q, k, v; none on o) of the tiny models' sizes, its biases and
    norm weights random too (zeros and ones at init), so that each counts where it is used."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=260,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():  # the init draws from the global generator: seed a copy
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(0)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.normal_(p, std=0.5, generator=gen)
        elif "norm" in name:
            torch.nn.init.normal_(p, mean=1.0, std=0.3, generator=gen)
    return model.requires_grad_(False)


@pytest.fixture(scope="module")
def llama():
    return load_pair("tiny-llama", "tiny-llama-draft")


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_tree_forward_and_compaction_give_the_hf_logits(llama, family, kernels):
    model = llama.target.model if family == "llama" else tiny_qwen2()
    want = tree_then_commit(StaticCachedModel(model))
    ours = LeanLM(copy.deepcopy(model), kernels)
    got = tree_then_commit(StaticCachedModel(ours))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_attention_output_in_sequence_major_order_is_read_right(llama, monkeypatch):
    """CUDA's SDPA kernels may return [B, H, L, D] laid out as [B, L, H, D]: same logits."""
    import engine.runtime.lean as lm

    sdpa = torch.nn.functional.scaled_dot_product_attention

    def sequence_major(*args, **kwargs):
        return sdpa(*args, **kwargs).transpose(1, 2).contiguous().transpose(1, 2)

    want = tree_then_commit(StaticCachedModel(llama.target.model))
    monkeypatch.setattr(lm.F, "scaled_dot_product_attention", sequence_major)
    got = tree_then_commit(StaticCachedModel(LeanLM(copy.deepcopy(llama.target.model), "torch")))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_weights_are_shared_and_the_hf_forward_still_works():
    model = tiny_qwen2()
    before = torch.tensor([[1, 2, 3, 4]])
    want = model(input_ids=before).logits
    ours = lean(model)
    assert lean(ours) is ours and lean(model) is ours  # made once per model
    att = model.model.layers[0].self_attn
    fused = ours.layers[0].qkv
    assert att.q_proj.weight.data_ptr() == fused.data_ptr()
    assert att.v_proj.weight.data_ptr() > att.k_proj.weight.data_ptr() > fused.data_ptr()
    assert ours.config is model.config and ours.device == model.device  # the model's own
    torch.testing.assert_close(ours(input_ids=before).logits, want)  # no slot cache: HF's


def test_forwards_that_return_hidden_states_run_the_hf_forward():
    ours = lean(tiny_qwen2())
    lm = StaticCachedModel(ours, engine="fast")
    lm.hidden_layers = (1,)
    lm.extend([1, 2, 3])
    assert lm.hidden is not None and lm.hidden.shape == (3, ours.config.hidden_size)


@pytest.mark.parametrize("engine", ["fast+lean", "graphs+lean"])
@pytest.mark.parametrize("method", list(DRAFTERS))
def test_every_method_emits_the_autoregressive_tokens(llama, method, engine):
    """Greedy on the lean forward against Hugging Face's autoregressive decoding (the golden
    test's reference), on the fast path and the padded one (`graphs`: CUDA graphs on CUDA)."""
    accepted = 0
    for prompt in PROMPTS[:2]:
        ids = llama.target.tokenizer.encode(prompt)
        got = generate(llama, ids, method, 40, engine=engine, params=standalone(method))
        assert tuple(got.tokens) == reference(llama, prompt, 40), (method, prompt)
        accepted += sum(s.accepted for s in got.stats.iterations)
    assert method == "autoregressive" or accepted > 0


@pytest.mark.parametrize("method", ["linear", "dyspec", "iid"])
def test_sampled_generations_draw_what_the_hf_forward_draws(llama, method):
    """At temperature 1 with one seed, the same logits give the same draws: the sampling
    verifiers see on our forward what their distribution tests checked on Hugging Face's."""
    ids = llama.target.tokenizer.encode(PROMPTS[1])
    got = {
        e: generate(llama, ids, method, 32, temperature=1.0, seed=3, engine=e).tokens
        for e in ("fast", "fast+lean")
    }
    assert got["fast+lean"] == got["fast"]


@pytest.mark.slow
def test_compiled_lean_forward_emits_the_autoregressive_tokens(llama):
    """Under torch.compile (inductor here, CUDA graphs on CUDA) the torch references run, and
    the compiler fuses them."""
    ids = llama.target.tokenizer.encode(PROMPTS[0])
    for method in ("autoregressive", "linear"):
        got = generate(llama, ids, method, 24, engine="compiled+lean")
        assert tuple(got.tokens) == reference(llama, PROMPTS[0], 24), method


def test_the_lean_forward_runs_on_lean_engines_only(llama, monkeypatch):
    """ENGINE+lean's forwards go through LeanLM.forward, the plain engines' do not."""
    calls = []
    forward = LeanLM.forward
    monkeypatch.setattr(LeanLM, "forward", lambda self, *a: calls.append(1) or forward(self, *a))
    ids = llama.target.tokenizer.encode(PROMPTS[0])
    generate(llama, ids, "linear", 16, engine="fast")
    assert calls == []
    g = generate(llama, ids, "linear", 16, engine="fast+lean")
    its = g.stats.iterations
    # every target forward (one per iteration and the prefill) and draft forward
    assert len(calls) >= len(its) + sum(s.draft_forwards for s in its) + 1


def test_unsupported_models_and_engines_fail_with_one_line():
    not_supported = "engine \\+lean: the model is not supported: its family is 'gpt_neox'"
    with pytest.raises(ConfigError, match=not_supported):
        check_engine("graphs+lean", "tiny-llama", "tiny-neox-draft")
    assert check_engine("graphs", "tiny-neox") == "graphs"
    with pytest.raises(ConfigError, match="engine: 'eager\\+lean' is not one of"):
        check_engine("eager+lean", "tiny-llama")
    neox = load_pair("tiny-neox", "tiny-neox-draft")
    with pytest.raises(ConfigError, match=not_supported):  # and at generation, named
        generate(neox, [1, 2, 3], "linear", 4, engine="fast+lean")
