"""bench/gpu/sections.py: the CUDA-only tree-attention kernel section, run interpreted."""

import pytest
import torch

from bench.gpu import __main__ as gpu
from bench.gpu import sections
from bench.gpu.models import ARCHS, build


@pytest.mark.parametrize("shape", ["llama-2-7b", "qwen2.5-7b"])
def test_kernel_section_runs_interpreted(shape):
    """The CUDA-only kernel section's call into bench/tree_attention.py, at tiny head shapes
    under TRITON_INTERPRET=1 (the test suite's setting): a check that it runs, not timing."""
    pytest.importorskip("triton")
    model = build(ARCHS[shape].tiny(), torch.device("cpu"), torch.float32, 0)
    args = gpu.parse_args(["--tiny"])
    res = sections.kernel_section(model, args, cuda=False)
    (row,) = [r for r in res["results"] if not r["reorder"]]
    assert row["max_abs_diff_vs_sdpa"] < 1e-2
