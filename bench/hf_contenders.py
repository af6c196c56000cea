"""Hugging Face transformers' own decoding as contenders in bench/methods.py: plain greedy
`model.generate` and its prompt lookup (`prompt_lookup_num_tokens=k`, no assistant model;
`PromptLookupCandidateGenerator`, `max_matching_ngram_size` at its default).

The target's forward calls are counted with a pre-hook: every call after the prefill is one
verification iteration. In assisted generation the first call verifies the first draft
together with the prompt, so iterations = calls, and drafted tokens = every call's input
length minus one (the first call's minus the prompt). Accepted tokens = emitted - iterations
(each iteration emits its accepted drafts and one target token; the last may be truncated by
max_new_tokens, so this is exact up to that last iteration).
"""

from __future__ import annotations

import contextlib
import time

import torch


@contextlib.contextmanager
def stock_attention(model):
    """Run Hugging Face's contenders as a user of transformers gets them: the engine loads
    models with its own attention (tree_kernels/sdpa_gqa.py); inside, the model runs stock sdpa."""
    ours = model.config._attn_implementation
    if ours == "sdpa_gqa":
        model.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        if ours == "sdpa_gqa":
            model.set_attn_implementation(ours)


def hf_run(pair, ids: list[int], max_new_tokens: int, prompt_lookup_num_tokens: int = 0) -> dict:
    """One HF generation as bench/methods.py run_sums records it: plain greedy, or prompt
    lookup proposing `prompt_lookup_num_tokens` tokens when that is > 0."""
    model = pair.target.model
    eos = pair.target.tokenizer.eos_token_id
    lengths: list[int] = []

    def count(_module, args, kwargs):
        x = kwargs.get("input_ids", args[0] if args else None)
        if x is not None:
            lengths.append(int(x.shape[-1]))

    lookup = prompt_lookup_num_tokens
    extra = {"prompt_lookup_num_tokens": lookup} if lookup else {}
    inputs = torch.tensor([ids], device=pair.target.device)  # [1, L]
    handle = model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        start = time.perf_counter()
        with torch.inference_mode(), stock_attention(model):
            out = model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=eos,
                pad_token_id=eos,
                **extra,
            )
        seconds = time.perf_counter() - start
    finally:
        handle.remove()
    tokens = out[0, len(ids) :].tolist()
    iterations = len(lengths)
    drafted = sum(n - 1 for n in lengths[1:]) + (lengths[0] - len(ids) if lengths else 0)
    if not lookup:  # no drafts: the first call is the prefill
        drafted = 0
    return {
        "new_tokens": len(tokens),
        "seconds": seconds,
        "iterations": iterations,
        "drafted": drafted,
        "accepted": max(0, len(tokens) - iterations) if drafted else 0,
        "tree_nodes": drafted + iterations,
        "draft_s": 0.0,
        "target_s": seconds,
        "build_s": 0.0,
        "tokens": tokens,
    }


def hf_generate(pair, ids: list[int], n: int, assisted: bool) -> tuple[list[int], float]:
    """Hugging Face greedy `generate`, or assisted generation with the pair's draft as its
    assistant (adaptive draft length, as transformers ships it): the new tokens and the wall
    time (synchronised on a GPU)."""
    x = torch.tensor([ids], device=pair.target.device)
    kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=pair.target.tokenizer.eos_token_id)
    if assisted:
        kw["assistant_model"] = pair.draft.model
    cuda = x.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(x.device)
    start = time.perf_counter()
    with (
        torch.inference_mode(),
        stock_attention(pair.target.model),
        stock_attention(pair.draft.model),
    ):
        out = pair.target.model.generate(x, **kw)
    if cuda:
        torch.cuda.synchronize(x.device)
    return out[0, len(ids) :].tolist(), time.perf_counter() - start
