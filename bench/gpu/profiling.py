"""What bench.gpu.trace and bench.gpu.gaps share: their common options, and one generation run
under torch.profiler."""

from __future__ import annotations

import argparse

from torch.profiler import ProfilerActivity, profile

from bench.gpu.device import sync
from engine.decode import generate
from engine.models import Pair


def add_trace_options(ap: argparse.ArgumentParser, tokens: int) -> None:
    """The options both programs take: generated tokens, prompt length, rows shown, toy sizes,
    device, dtype, the weights' seed, the JSON report."""
    ap.add_argument("--tokens", type=int, default=tokens)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)


def profile_generation(pair: Pair, prompt: list[int], method, tokens: int, engine: str, **kw):
    """One generation under torch.profiler, CPU activity and on a GPU CUDA's, the device
    synchronised after it; `kw` goes to torch.profiler.profile (with_stack). Returns the
    profiler and the generation."""
    cuda = pair.target.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, **kw) as prof:
        got = generate(pair, prompt, method, tokens, engine=engine)
    sync(pair.target.device)
    return prof, got
