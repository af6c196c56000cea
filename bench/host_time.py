"""Host time and host reads per iteration, fast path against eager, side by side (issue 22).

Host time of an iteration = its wall time (tree building, target forward, verification,
bookkeeping) minus the time inside model forwards: what a GPU cannot hide, since a forward of
a 1.5B target there takes a few milliseconds. Prompts are interleaved (for each prompt every
method runs once per engine, eager then fast), so load drift hits both alike; the ratio is
eager / fast in this one run. Outputs of both engines are checked to be equal.

Host reads are the places where Python reads a tensor's value (`item`, `tolist`, `int()`,
`bool()`, `float()`, indexing with a tensor, `.cpu()` of a device tensor) and the ops whose
output size depends on values (`nonzero`, indexing with a boolean mask, `unique`): on a GPU
each is a synchronisation. They are counted in a separate, untimed pass (every generation
again) with a TorchFunctionMode, model forwards included. The same pass times the vocabulary-sized ops done
outside model forwards (softmax, top-k, argmax over [n, V]): device work that a GPU runs
asynchronously but that on a CPU is part of the host time. The table splits the host time into
those and the rest (Python, small tensor ops, masks, bookkeeping), the part a GPU cannot hide.

    python bench/host_time.py                                   # tiny llama pair
    python bench/host_time.py --target qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \
        --dtype float32 --n-prompts 2 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load_prompts, markdown_table, write_record  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from engine import transfer  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402
from engine.runtime.cuda_graphs import GraphedForward  # noqa: E402
from engine.runtime.eager import CachedModel  # noqa: E402
from engine.runtime.static import StaticCachedModel  # noqa: E402

DEFAULT_METHODS = [
    "linear:k=4",
    "dynatree:N_max=64",
    "dyspec:budget=64",
    "salf:N=64",
    "ddtree:B=64",
]
ENGINES = ("eager", "fast")
READS = {"item", "tolist", "__int__", "__bool__", "__float__", "__index__", "numpy"}
# ops whose output size depends on the values: on a GPU the host waits for them too
SIZED_BY_VALUES = {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"}


# a model's layers (inference mode dispatches F.linear as `linear`): outside a replay, a
# forward ran eager
MATMULS = {"linear", "matmul", "mm", "addmm", "bmm", "baddbmm"}


class EagerOps(TorchDispatchMode):
    """Counts the device ops (aten ops that are not views) Python launches, outside CUDA-graph
    replays: on a GPU each is a kernel launch the host pays for (tens of microseconds each on
    the H100 VM of docs/gpu.md), while a replayed graph is one launch. `counts["replays"]`
    counts the replays; `matmuls()` the matrix products outside them, which on `engine:
    graphs` mean a model forward ran uncaptured. On a CPU the engine's stand-in of a replay
    (engine/runtime/cuda_graphs.py GraphedForward.replay) counts as the one launch it is on a GPU.
    `counts["captures"]` counts the captures, whose ops are not counted: a capture happens once
    per graph, and on a GPU it runs the function once uncaptured first (its warm-up), which the
    session-8 lease counted as 1.9-3.2 matrix products per iteration where a generation
    recaptured a prefill graph (docs/gpu.md)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self._off = 0

    def __enter__(self):
        self._saved = GraphedForward.replay, GraphedForward._capture
        mode = self

        def uncounted(kind, fn):  # a replay, or a capture (once per graph, not per iteration)
            def run(graphed, *args):
                mode.counts[kind] += 1
                mode._off += 1
                try:
                    return fn(graphed, *args)
                finally:
                    mode._off -= 1

            return run

        GraphedForward.replay = uncounted("replays", self._saved[0])
        GraphedForward._capture = uncounted("captures", self._saved[1])
        return super().__enter__()

    def __exit__(self, *exc):
        GraphedForward.replay, GraphedForward._capture = self._saved
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._off and not func.is_view:
            self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def ops(self) -> int:
        """Device ops launched outside replays."""
        return sum(v for k, v in self.counts.items() if k not in ("replays", "captures"))

    def matmuls(self) -> int:
        return sum(self.counts[k] for k in MATMULS)


class Synchronisations:
    """Counts the explicit waits for the device: `torch.cuda.synchronize` and CUDA events'
    `synchronize` (a read's wait, HostReads, comes on top). None happen on a CPU. Before
    2026-11-27's session 8 every forward on CUDA synchronised twice to time itself; now the
    generation's clock waits once, at its end (engine/clock.py)."""

    def __enter__(self):
        self.calls = 0
        self._saved = torch.cuda.synchronize, torch.cuda.Event.synchronize

        def counted(fn):
            def run(*args, **kwargs):
                self.calls += 1
                return fn(*args, **kwargs)

            return run

        torch.cuda.synchronize = counted(self._saved[0])
        torch.cuda.Event.synchronize = counted(self._saved[1])
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize, torch.cuda.Event.synchronize = self._saved


class HostReads(TorchFunctionMode):
    """Counts reads of tensor values by Python (each a host synchronisation on a GPU).

    vocab: also time, outside model forwards, every torch call on a tensor whose last
    dimension is `vocab` (softmax, top-k, argmax, sampling over the draft's or the target's
    distributions): work a GPU runs asynchronously, but which on a CPU sits in the host time.
    device: the run's; on a GPU, reads of tensors kept on the host on purpose (prompt lookup's
    n-gram match over the committed tokens) are no synchronisation and are not counted. On a
    CPU every tensor is a host tensor, so every read counts (an upper bound)."""

    def __init__(self, vocab: int = 0, device: torch.device | None = None) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self.vocab = vocab
        self.host_free = device is not None and device.type != "cpu"  # CPU tensor reads free
        self.vocab_s = 0.0
        self._quiet = False  # inside a CPU pair read, counted once already

    def __enter__(self):
        # engine/transfer.py read_pair reads a CPU pair in two plain reads: count it as the
        # one read it is on a GPU (this counter stands in for a GPU's synchronisations)
        self._read_host, transfer.read_host = transfer.read_host, self._one_read
        return super().__enter__()

    def __exit__(self, *exc):
        transfer.read_host = self._read_host
        return super().__exit__(*exc)

    def _one_read(self, values, tokens):
        self.counts["read_pair"] += 1
        self._quiet = True
        try:
            return self._read_host(values, tokens)
        finally:
            self._quiet = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        on_host = self.host_free and _host_tensor(args)
        if (
            not self._quiet
            and not on_host
            and (
                name in READS
                or name in SIZED_BY_VALUES
                or (name in ("cpu", "to") and _to_host(name, args, kwargs or {}))
                or (name == "__getitem__" and _bool_index(args))
            )
        ):
            self.counts[name] += 1
        if not self.vocab or _IN_FORWARD[0] or not any(_vocab_sized(a, self.vocab) for a in args):
            return func(*args, **(kwargs or {}))
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.vocab_s += time.perf_counter() - start
        return out


def _host_tensor(args) -> bool:
    """Whether the call's first argument is a tensor on the CPU."""
    return bool(args) and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu"


def _bool_index(args) -> bool:
    """x[mask] with a boolean tensor: its size is the mask's count, read by the host."""
    index = args[1] if len(args) > 1 else None
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _to_host(name: str, args, kwargs) -> bool:
    """Whether a `cpu()` or `to(...)` call copies a device tensor to the host: `to` counts
    only with the CPU as its target (a dtype cast on the device is no synchronisation)."""
    src = getattr(args[0], "device", None) if args else None
    if src is None or src.type == "cpu":
        return False
    if name == "cpu":
        return True
    for t in [*args[1:], kwargs.get("device")]:
        t = t.device if isinstance(t, torch.Tensor) else t  # to(other): other's device
        if isinstance(t, (str, torch.device)) and str(t).startswith("cpu"):
            return True
    return False


_IN_FORWARD = [False]  # set inside CachedModel.forward (see vocab_time)


def _vocab_sized(a, vocab: int) -> bool:
    if isinstance(a, (list, tuple)):
        return any(_vocab_sized(x, vocab) for x in a)
    return isinstance(a, torch.Tensor) and a.ndim > 0 and a.shape[-1] == vocab


@contextlib.contextmanager
def vocab_time(vocab: int):
    """Count host reads and time vocabulary-sized ops outside model forwards (HostReads).
    Model forwards: CachedModel.forward (the static cache's too) and StaticCachedModel.step."""
    forwards = [(CachedModel, "forward"), (StaticCachedModel, "step")]
    originals = [getattr(cls, name) for cls, name in forwards]

    def flagged(forward):
        def run(self, *args, **kwargs):
            _IN_FORWARD[0] = True
            try:
                return forward(self, *args, **kwargs)
            finally:
                _IN_FORWARD[0] = False

        return run

    for (cls, name), forward in zip(forwards, originals):
        setattr(cls, name, flagged(forward))
    try:
        with HostReads(vocab) as mode:
            yield mode
    finally:
        for (cls, name), forward in zip(forwards, originals):
            setattr(cls, name, forward)


def iteration_seconds(stats) -> float:
    """Wall time of the iterations: drafting, target forward, verification, bookkeeping."""
    return sum(s.draft_s + s.target_s + s.verify_s + s.bookkeeping_s for s in stats.iterations)


def host_seconds(stats) -> float:
    return iteration_seconds(stats) - sum(
        s.draft_forward_s + s.target_forward_s for s in stats.iterations
    )


def run(args: argparse.Namespace) -> dict:
    pair = load_pair(args.target, args.draft, device=args.device, dtype=args.dtype)
    ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
    methods = {t: resolve_method(*parse_method(t)) for t in args.methods}
    engines = ENGINES + (("compiled",) if args.compiled else ())
    for engine in engines:  # first-call allocations out of the numbers
        generate(pair, ids[0][:16], methods[args.methods[0]], 4, engine=engine)
    for m in methods.values() if args.compiled else ():  # every graph each method will replay
        for x in ids:
            generate(pair, x, m, args.max_new_tokens, engine="compiled")
    acc = {
        (t, e): {"host_s": 0.0, "iterations": 0, "iter_s": 0.0} for t in methods for e in engines
    }
    mismatches = Counter()
    for i, x in enumerate(ids):
        for t, m in methods.items():
            out = {}
            for e in engines:
                g = generate(pair, x, m, args.max_new_tokens, engine=e)
                a = acc[t, e]
                a["host_s"] += host_seconds(g.stats)
                a["iterations"] += len(g.stats.iterations)
                a["iter_s"] += iteration_seconds(g.stats)
                out[e] = g.tokens
            mismatches[t] += int(any(out[e] != out["eager"] for e in engines))
        print(f"prompt {i + 1}/{len(ids)} done", file=sys.stderr)
    reads, vocab_ms = {}, {}
    vocab = pair.target.model.get_output_embeddings().weight.shape[0]
    for t, m in methods.items():
        for e in engines:
            seconds = 0.0
            for i, x in enumerate(ids):  # the timed pass's generations again (greedy: the same)
                with vocab_time(vocab) as counter:
                    g = generate(pair, x, m, args.max_new_tokens, engine=e)
                seconds += counter.vocab_s
                if i == 0:
                    reads[t, e] = sum(counter.counts.values()) / len(g.stats.iterations)
            vocab_ms[t, e] = 1000 * seconds / acc[t, e]["iterations"]
    rows = []
    for t in methods:
        ms = {e: 1000 * acc[t, e]["host_s"] / acc[t, e]["iterations"] for e in engines}
        it_ms = {e: 1000 * acc[t, e]["iter_s"] / acc[t, e]["iterations"] for e in engines}
        compiled = (
            {
                "host_ms_compiled": ms["compiled"],
                "host_reads_compiled": reads[t, "compiled"],
                "iteration_ms_compiled": it_ms["compiled"],
            }
            if args.compiled
            else {}
        )
        rows.append(
            {
                "method": t,
                "host_ms_eager": ms["eager"],
                "host_ms_fast": ms["fast"],
                "eager_over_fast": ms["eager"] / ms["fast"],
                "vocab_ops_ms_eager": vocab_ms[t, "eager"],
                "vocab_ops_ms_fast": vocab_ms[t, "fast"],
                "other_host_ms_eager": ms["eager"] - vocab_ms[t, "eager"],
                "other_host_ms_fast": ms["fast"] - vocab_ms[t, "fast"],
                "host_reads_eager": reads[t, "eager"],
                "host_reads_fast": reads[t, "fast"],
                # the whole iteration, forwards included: the fast path's top-k and argmax run
                # inside the forwards, so this is where moving them there must not cost
                "iteration_ms_eager": it_ms["eager"],
                "iteration_ms_fast": it_ms["fast"],
                "iterations": acc[t, "fast"]["iterations"],
                "outputs_differing": mismatches[t],
                **compiled,
            }
        )
    return {
        "bench": "host_time",
        "target": args.target,
        "draft": args.draft,
        "dtype": str(pair.target.dtype),
        "device": str(pair.target.device),
        "threads": torch.get_num_threads(),
        "n_prompts": len(ids),
        "max_new_tokens": args.max_new_tokens,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--methods", nargs="*", default=DEFAULT_METHODS)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument(
        "--compiled",
        action="store_true",
        help="also engine compiled (torch.compile; the static DynaTree step): its columns",
    )
    ap.add_argument("--out", default="bench/results/host_time.json")
    args = ap.parse_args(argv)
    result = run(args)
    write_record(args.out, result)
    print(
        f"{args.target} / {args.draft} {result['dtype']} on {result['device']}, "
        f"{result['n_prompts']} prompts x {args.max_new_tokens} tokens, greedy"
    )
    cols = ["method", "host_ms_eager", "host_ms_fast", "eager_over_fast"]
    cols += ["vocab_ops_ms_fast", "other_host_ms_eager", "other_host_ms_fast"]
    cols += ["host_reads_eager", "host_reads_fast", "iteration_ms_eager", "iteration_ms_fast"]
    cols += ["outputs_differing"]
    if args.compiled:
        cols += ["host_ms_compiled", "host_reads_compiled", "iteration_ms_compiled"]
    print(markdown_table(result["rows"], cols))


if __name__ == "__main__":
    main()
