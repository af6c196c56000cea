"""``tree_kernels.tree_attention`` picks the reference where Triton cannot run, and the package
imports on a machine without triton. Each case runs in a fresh interpreter because the
choice depends on what was importable and on TRITON_INTERPRET at import time."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = """
import torch
import tree_kernels
from tree_kernels.reference import tree_attention_reference
parents = torch.tensor([-1, 0, 0, 1])
g = torch.Generator().manual_seed(0)
q = torch.randn(1, 2, 4, 64, generator=g)
k = torch.randn(1, 1, 9, 64, generator=g)
assert tree_kernels.HAS_TRITON is EXPECT_TRITON, tree_kernels.HAS_TRITON
assert not tree_kernels.uses_triton(q)
assert torch.equal(tree_kernels.tree_attention(q, k, k, parents), tree_attention_reference(q, k, k, parents))
"""


def run(code: str, env_drop: str) -> None:
    env = {key: val for key, val in os.environ.items() if key != env_drop}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_imports_and_falls_back_without_triton():
    # A None entry in sys.modules makes `import triton` raise ImportError.
    run(
        "import sys; sys.modules['triton'] = None\n" + CHECK.replace("EXPECT_TRITON", "False"),
        "TRITON_INTERPRET",
    )


def test_cpu_tensors_without_interpreter_use_reference():
    pytest.importorskip("triton")
    run(CHECK.replace("EXPECT_TRITON", "True"), "TRITON_INTERPRET")
