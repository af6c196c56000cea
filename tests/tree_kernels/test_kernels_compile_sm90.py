"""Every Triton kernel lowers to a CUDA binary for sm_90 (H100 / H200) with Triton's bundled
ptxas, no GPU needed. The interpreter tests check numerics; these check that the GPU compiler
accepts what the interpreter runs, which it does not check (types, constexpr branches, block
shapes, register and shared-memory budgets):

- the tree-attention kernel (dynamic tree-block loop, int32 bit tests, dot shapes) for each
  dtype, with the autotuning configs that use the most and the least shared memory, the
  largest fitting an H100 (227 KB per block) in the worst case, fp32 at head dim 128;
- the lean forward's kernels (engine/runtime/lean.py: RMSNorm with and without the residual
  add, rotary embedding with the cache append, SiLU times up) at the shapes of the models
  bench.gpu times (Qwen2.5 7B, 1.5B, 0.5B, Llama-2-7B), in bf16, fp16 and fp32, with
  the launch's 4 warps, and none spilling registers (ptxas's own report).

Each runs in a fresh interpreter without TRITON_INTERPRET (which swaps the kernels for the
interpreter at import) and with an empty cache directory, so the compile is real.
"""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("triton")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tree_kernels.triton_tree_attention import GPU_CONFIGS, _tree_attention_fwd as fn

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


LEAN = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tree_kernels.rms_norm import _rms_norm_kernel
from tree_kernels.rope_append import _rope_append_kernel
from tree_kernels.silu_mul import BLOCK, _silu_mul_kernel

SHAPES = [(3584, 28, 4, 128), (1536, 12, 2, 128), (896, 14, 2, 64), (4096, 32, 32, 128)]

def build(fn, sig, consts):
    sig = {a: "constexpr" if a in consts else sig[a] for a in fn.arg_names}
    src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(c),): v for c, v in consts.items()})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert len(kernel.asm["cubin"]) > 0 and f".entry {fn.__name__}" in kernel.asm["ptx"]
    print("compiled", fn.__name__, consts, flush=True)

for p in ("*bf16", "*fp16", "*fp32"):
    for hidden, heads, kv_heads, d in SHAPES:  # (hidden, query heads, kv heads, head dim)
        for res in (False, True):
            args = dict(h_ptr=p, res_ptr=p, w_ptr=p, out_ptr=p, x_ptr=p, d="i32", eps="fp32")
            build(_rms_norm_kernel, args, {"HAS_RES": res, "BLOCK": triton.next_power_of_2(hidden)})
        args = dict(qkv_ptr=p, cos_ptr=p, sin_ptr=p, q_ptr=p, kv_ptr=p, slots_ptr="*i64",
                    n="i32", stride_kind="i32", stride_head="i32", stride_slot="i32")
        build(_rope_append_kernel, args, {"HEADS": heads, "KV_HEADS": kv_heads, "D": d})
    build(_silu_mul_kernel, dict(gu_ptr=p, out_ptr=p, width="i32"), {"BLOCK": BLOCK})
"""


def _compile(script: str, cache: str, **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=ROOT, TRITON_CACHE_DIR=cache, **env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode and ("ptxas" in proc.stderr and "not found" in proc.stderr.lower()):
        pytest.skip("Triton's CUDA toolchain (ptxas) is not available here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_tree_attention_kernel_compiles_for_sm90(tmp_path):
    proc = _compile(COMPILE, str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    assert proc.stdout.count("shared bytes") == 3


def test_lean_kernels_compile_for_sm90_without_spills(tmp_path):
    proc = _compile(LEAN, str(tmp_path), TRITON_DUMP_PTXAS_LOG="1")
    assert proc.stdout.count("compiled _") == 3 * (2 * 4 + 4 + 1)
    # one ptxas report per distinct binary (the 7B's and Llama's norms share a block of 4096)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", proc.stdout)
    assert len(spills) >= 3 * (2 * 3 + 4 + 1), proc.stdout[-2000:]
    assert all(s == ("0", "0") for s in spills), proc.stdout[-3000:]
