"""The kernel lowers to a CUDA binary for sm_90 (H100) with Triton's bundled ptxas, no GPU
needed. The interpreter tests check numerics; this checks that the GPU compiler accepts
the kernel (dynamic tree-block loop, int32 bit tests, dot shapes) for each dtype, with
the autotuning configs that use the most and the least shared memory, and that the largest
fits an H100 (227 KB per block) in the worst case, fp32 at head dim 128.

Runs in a fresh interpreter without TRITON_INTERPRET (which swaps the kernel for the
interpreter at import) and with an empty cache directory, so the compile is real.
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.triton_tree_attention import GPU_CONFIGS, _tree_attention_fwd as fn

def footprint(config):
    return config.kwargs["PREFIX_BLOCK"] * config.num_stages, config.num_warps

largest, smallest = max(GPU_CONFIGS, key=footprint), min(GPU_CONFIGS, key=footprint)
for dtype, head_dim, config in [("fp16", 128, largest), ("bf16", 64, smallest), ("fp32", 128, largest)]:
    consts = {"HEAD_DIM": head_dim, "BLOCK_M": 32, "BLOCK_N": 32, **config.kwargs,
              "PRECISION": "ieee" if dtype == "fp32" else "tf32", "UPCAST": False}
    sig = {}
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"
        elif name in ("Q", "K", "V", "O"):
            sig[name] = "*" + dtype
        elif name in ("BITS", "COUNTS", "BLOCKS"):
            sig[name] = "*i32"
        else:
            sig[name] = "fp32" if name == "qk_scale" else "i32"
    src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(c),): v for c, v in consts.items()})
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    assert len(kernel.asm["cubin"]) > 0
    assert kernel.metadata.shared <= 227 * 1024, (config, kernel.metadata.shared)
    assert (".entry _tree_attention_fwd" in kernel.asm["ptx"]), "no kernel entry in PTX"
    if dtype != "fp32":
        assert "mma.sync" in kernel.asm["ptx"], "fp16/bf16 dots should use tensor cores"
    print(dtype, head_dim, "shared bytes", kernel.metadata.shared)
"""


def test_kernel_compiles_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=ROOT, TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.run(
        [sys.executable, "-c", COMPILE], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode and ("ptxas" in proc.stderr and "not found" in proc.stderr.lower()):
        pytest.skip("Triton's CUDA toolchain (ptxas) is not available here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("shared bytes") == 3
