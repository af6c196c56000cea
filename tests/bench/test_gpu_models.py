"""bench/gpu/models.py: the random-weight models' published shapes and the bandwidth floor's
arithmetic."""

import pytest
import torch

from bench.gpu.models import ARCHS, build, floor_seconds, kv_bytes_per_token, weight_bytes_read


def test_floor_is_weight_and_kv_bytes_over_bandwidth():
    cpu = torch.device("cpu")
    tied = build(ARCHS["qwen2.5-0.5b"].tiny(), cpu, torch.float32, 0)  # tied embeddings
    untied = build(ARCHS["llama-2-7b"].tiny(), cpu, torch.float32, 0)
    params = sum(p.numel() for p in tied.parameters())
    assert weight_bytes_read(tied) == 4 * params  # the tied matrix is the LM head, read once
    emb = untied.get_input_embeddings().weight.numel()
    assert weight_bytes_read(untied) == 4 * (sum(p.numel() for p in untied.parameters()) - emb)
    cfg = untied.config  # 2 layers, 4 KV heads of 16, keys and values, fp32
    assert kv_bytes_per_token(cfg, torch.float32) == 2 * 2 * 4 * 16 * 4
    assert kv_bytes_per_token(cfg, torch.bfloat16) == 2 * 2 * 4 * 16 * 2
    assert floor_seconds(1000, 10, 50, 1e3) == pytest.approx(1.5)  # (1000 + 50 * 10) / 1000
    with pytest.raises(ValueError):
        floor_seconds(1000, 10, 50, 0.0)
    # published shapes: parameter counts as the model cards give them
    meta = torch.device("meta")
    counts = {
        n: sum(p.numel() for p in build(s, meta, torch.bfloat16, 0).parameters())
        for n, s in ARCHS.items()
    }
    assert counts["qwen2.5-0.5b"] == 494_032_768 and counts["llama-2-7b"] == 6_738_415_616
    assert 1.54e9 < counts["qwen2.5-1.5b"] < 1.55e9 and 7.61e9 < counts["qwen2.5-7b"] < 7.62e9
    assert 67.9e6 < counts["llama-68m"] < 68.1e6
