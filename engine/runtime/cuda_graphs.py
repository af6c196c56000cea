"""CUDA graphs of the static cache's padded forwards, captured from the eager kernels
(`engine: graphs`), without torch.compile.

`engine: compiled` hands the padded forward (engine/runtime/static.py: every forward of up to
GRAPH_MAX new tokens padded to a size bucket, attending to every cache slot) to
torch.compile, whose inductor compiles one graph per bucket: on the first H100 lease one model's
compilation took most of three minutes (docs/gpu.md). This path records the same padded
forward's own kernels (cuBLAS, SDPA, the elementwise ops of the Hugging Face model) into one
`torch.cuda.CUDAGraph` per input shape and head (top-k / argmax) the first time it is used, and
replays it afterwards: a capture costs about two forwards, and a replay launches the whole
forward at once, which is what removes the per-kernel launch cost that bounds an uncompiled
forward on a GPU (docs/gpu.md: 20-40 ms per token whatever the model's size). This is the
decoding-graph scheme of vLLM and gpt-fast, without kernel fusion.

Static memory. A graph reads its inputs from buffers allocated once per key (a call copies its
arguments into them) and writes its output into the graphs' shared memory pool, which the next
replay of any graph may overwrite: the caller copies the output out
(StaticCachedModel._run_model). The KV buffer's address is baked into every graph: a grown
cache drops them all (`clear`). The pool is the first graph's own (`graph.pool()`), shared by
the later captures while that graph lives, and a new one after `clear`: a pool id from
`torch.cuda.graph_pool_handle()` failed on the H100 (torch 2.11) with the caching allocator's
`it->second->use_count > 0` assertion at a capture (an id whose graphs are all gone cannot be
captured into again), and a failed capture leaves CUDA's generator state broken for the rest
of the process.

On a CPU there are no CUDA graphs: a "replay" calls the function again on the same static
buffers, the data flow of a replay, so the CPU tests check the buffer handling, the keys and the
padded shapes; the capture itself is checked on a GPU (bench/gpu_exact.py --engines graphs).
With `TRACE_ON_CPU` set (the tests' `traced_graphs` fixture) a CPU "capture" records the
function's aten ops with `make_fx` instead and a replay runs that record: like a CUDA graph it
keeps every value the function read on the host at capture time (a cache length, a Python
float), so a graphed function that depends on anything but its tensor inputs and settings
decodes wrongly on the CPU too, and a host read inside it (`.item()`, `.tolist()`, `if t:`)
is refused, as a CUDA capture refuses it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch
from torch.fx.experimental.proxy_tensor import make_fx

TRACE_ON_CPU = False  # CPU captures recorded with make_fx (see the module docstring)


class GraphedForward:
    """`fn(**inputs)` replayed from a CUDA graph per key: the tensor inputs' names, shapes and
    dtypes (copied into the graph's static buffers at each call), and the other inputs'
    values (hashable settings the graph is recorded for, passed as they are: the static
    cache's head, top-k / argmax, and extra outputs, engine/runtime/eager.py; a block drafter's
    width, engine/drafters/ddtree/block_context.py)."""

    def __init__(self, fn: Callable, device: torch.device) -> None:
        self.fn, self.device = fn, device
        # key -> (graph, or None on a CPU; static tensor inputs; the graph's output)
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph | None, dict, object]] = {}
        self.pool = None  # the first graph's memory pool, shared by the later ones (vLLM's scheme)
        self.captures = 0
        self.traced = TRACE_ON_CPU  # the mode the graphs were made in (on a CPU, see above)

    def clear(self) -> None:
        """Drop every graph (a buffer they read or write was reallocated), and their pool."""
        self.graphs.clear()
        self.pool = None

    def __call__(self, **inputs):
        tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        settings = {k: v for k, v in inputs.items() if k not in tensors}
        key = tuple(
            (k, tuple(v.shape), v.dtype) if k in tensors else (k, v) for k, v in inputs.items()
        )
        if self.traced != TRACE_ON_CPU:  # the CPU stand-ins made in the other mode
            self.clear()
            self.traced = TRACE_ON_CPU
        if key not in self.graphs:
            self.graphs[key] = self._capture(tensors, settings)
            self.captures += 1
        graph, static, out = self.graphs[key]
        for name, value in tensors.items():
            static[name].copy_(value)
        return self.replay(graph, static, out, settings)

    def replay(self, graph, static: dict, out, settings: dict):
        """The graph's replay; on a CPU its stand-in, the function run on the static buffers
        (bench/host_time.py EagerOps counts either as the one launch a replay is on a GPU)."""
        if graph is None:
            return self.fn(**static, **settings)
        if isinstance(graph, torch.fx.GraphModule):  # TRACE_ON_CPU's record
            return graph(*static.values())
        graph.replay()
        return out

    def _capture(self, inputs: dict, settings: dict):
        static = {k: v.clone() for k, v in inputs.items()}
        if self.device.type != "cuda":
            return (_trace(self.fn, static, settings) if TRACE_ON_CPU else None), static, None
        # one eager run on a side stream first (torch.cuda.graphs' recipe): lazy initialisation
        # (cuBLAS handles and workspaces) must not happen inside the capture. It writes the
        # keys/values of these inputs, which the replay that follows writes again.
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self.fn(**static, **settings)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # torch.cuda.graph collects garbage before it starts; no collection may run during the
        # capture either: unreachable cycles can hold CUDA events (a dropped model's cached
        # model and its clock, engine/clock.py), and destroying one invalidates the capture
        # (cudaErrorStreamCaptureInvalidated, seen on the H100 of docs/gpu.md, session 8)
        collecting = gc.isenabled()
        gc.disable()
        try:
            with torch.cuda.graph(graph, pool=self.pool):  # None: a new pool, this graph's
                out = self.fn(**static, **settings)
        finally:
            if collecting:
                gc.enable()
        if self.pool is None:
            self.pool = graph.pool()
        return graph, static, out


class OneOwner:
    """What a process keeps for one owner at a time (a trained drafter or selector): values made
    once per key (an engine path, a device) with their buffers and graphs, dropped when another
    owner comes. A weak mapping keyed by the owner would keep every owner alive, since the
    values hold it."""

    def __init__(self) -> None:
        self.owner, self.values = None, {}

    def get(self, owner, key, make: Callable):
        if self.owner is not owner:
            self.owner, self.values = owner, {}
        if key not in self.values:
            self.values[key] = make()
        return self.values[key]


def _trace(fn: Callable, static: dict, settings: dict) -> torch.fx.GraphModule:
    """fn's aten ops on the static inputs, as a CUDA capture records its kernels: the CPU
    stand-in of a capture under TRACE_ON_CPU. make_fx refuses a host read ("trying to get
    value out of a tracing tensor"), as a capture does."""
    names = list(static)
    return make_fx(lambda *args: fn(**dict(zip(names, args)), **settings))(*static.values())
