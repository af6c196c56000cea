"""Greedy exactness of every method on every engine path, on the device at hand (issue 22):
the fast path's, the graphs path's and the compiled path's (both CUDA graphs on CUDA) output
against autoregressive decoding, and per iteration the host reads and the device ops launched
outside graph replays. The CPU tests (tests/engine/runtime/test_fast_path.py,
tests/engine/runtime/test_cuda_graphs.py) check the same on the CPU; this script runs the check
where the CUDA-only code runs: the static chain step (engine/iteration/chain.py) takes over on CUDA on the
fast path too, and the graphs and compiled paths capture CUDA graphs (on `graphs` also one per
setting of the static greedy trees' growth, engine/iteration/static_tree.py). Needs only torch and transformers (the tiny families are built locally), so the `device` tool's machine runs it:

    device run: PYTHONUNBUFFERED=1 python3 -m bench.gpu.exact --out $OUT/gpu_exact.json

    python -m bench.gpu.exact --device cpu --engines eager,fast --new-tokens 16   # here

fp32 by default: in bf16 a tree forward and a one-token forward round differently, so a
near-tie can flip an argmax; that is numerics, not a bug this check looks for. Every method
with its registered defaults (engine/drafters DRAFTERS; on the compiled engine those of
--compiled-methods), temperature 0, both tiny families, --prompts prompts of the greedy golden
test (tests/engine/test_golden.py); engines in turn, the cheap ones first. A case that raises
is recorded with its error and the run goes on; --time-limit-s stops starting new cases.
--learned adds, per family, `delayed` with the NDE selector and `ddtree` with the block drafter
(issue 19), each from a toy checkpoint trained here first (a few seconds, under a temporary
ORCH_HOME): on the padded engines their features come back from inside the graphs, which only
a GPU's replays check. Exit status 1 if any output differs or any case failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

from bench.common import markdown_table, write_record
from bench.gpu.device import allow_many_graphs, cuda_name
from bench.gpu.report import error_line
from bench.host_time import EagerOps, HostReads, Synchronisations
from engine.cost_model import CurvePoint, ForwardCurve
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.drafters.delayed.selector import Latency
from engine.methods import standalone
from engine.models import load_pair
from engine.train import block_drafter_train, nde
from engine.train.nde_data import CollectConfig, collect

PROMPTS = [  # from tests/engine/test_golden.py (repetitive text: drafts get accepted)
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Speculative decoding drafts tokens with a small model and verifies them with a large "
    "one in a single forward pass over the whole draft tree. " * 3,
]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu.exact", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--families", default="llama,neox")
    ap.add_argument("--methods", default=",".join(DRAFTERS))
    ap.add_argument("--engines", default="eager,fast,graphs,compiled")
    ap.add_argument(
        "--compiled-methods",
        default="autoregressive,linear,dynatree,ddtree",
        help="methods run on the compiled engine (one graph capture per model and size bucket)",
    )
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--time-limit-s", type=float, default=300.0)
    ap.add_argument("--learned", action="store_true", help="also NDE and the block drafter")
    return ap.parse_args(argv)


def learned_cases(pair, family: str) -> list[tuple[str, str, dict]]:
    """(label, method, params) of the learned components on `pair`, from toy checkpoints
    trained now (the tests' toy scales: tests/engine/train/test_nde.py, test_block_drafter.py)."""
    points = tuple(
        CurvePoint(c, n, 0.01 * (1 + c / 1000 + n / 64)) for c in (0, 1000) for n in (1, 64)
    )
    curve = ForwardCurve("toy", "any", "float32", "eager", points)
    small = CollectConfig(k_max=2, l1_max=2, l2_max=2, samples=2, stride=4, max_new_tokens=8)
    data = collect(pair, [[1, 2, 3, 4, 5], [7, 8, 9]], small, Latency(curve, curve))
    nde.train(f"nde-{family}", data, nde.TrainConfig(steps=3, batch_size=4), {})
    toy = dict(holdout=4, sequences=2, seq_len=24, batch=2, anchors=3, block_size=4, heads=2)
    cfg = block_drafter_train.TrainConfig(target=f"tiny-{family}", steps=3, **toy)
    block_drafter_train.train(f"bd-{family}", cfg, False, lambda *a: None)
    return [
        ("delayed+nde", "delayed", {"selector": "nde", "selector_checkpoint": f"nde-{family}"}),
        ("ddtree+block", "ddtree", {"drafter": "block", "checkpoint": f"bd-{family}", "B": 12, "L": 4}),
    ]  # fmt: skip


def host_work(pair, ids, method, n, engine, params=None) -> dict:
    """Per iteration: host reads (HostReads), explicit waits for the device
    (Synchronisations), device ops launched outside graph replays and the matrix products
    among them (EagerOps: on `graphs`, a model forward run uncaptured)."""
    with (
        HostReads(device=pair.target.device) as reads,
        EagerOps() as ops,
        Synchronisations() as syncs,
    ):
        g = generate(pair, ids, method, n, engine=engine, params=params)
    its = max(1, len(g.stats.iterations))
    return {
        "reads_per_iteration": sum(reads.counts.values()) / its,
        "synchronisations_per_iteration": syncs.calls / its,
        "ops_per_iteration": ops.ops() / its,
        "matmuls_per_iteration": ops.matmuls() / its,
    }


def run(args) -> dict:
    start = time.perf_counter()
    report = {"bench": "gpu_exact", "args": vars(args), "rows": [], "skipped": []}
    if "compiled" in args.engines:
        allow_many_graphs()
    pairs, prompts, want, learned = {}, {}, {}, {}
    if args.learned:  # the toy checkpoints go to a new home, never the user's
        os.environ["ORCH_HOME"] = tempfile.mkdtemp(prefix="orch_home_")
    for family in args.families.split(","):
        pair = pairs[family] = load_pair(
            f"tiny-{family}", f"tiny-{family}-draft", args.device, args.dtype
        )
        report["device"] = str(pair.target.device)
        report |= cuda_name(pair.target.device)
        prompts[family] = [pair.target.tokenizer.encode(p) for p in PROMPTS[: args.prompts]]
        want[family] = [
            generate(pair, x, "autoregressive", args.new_tokens).tokens for x in prompts[family]
        ]
        learned[family] = learned_cases(pair, family) if args.learned else []
    for engine in args.engines.split(","):  # the cheap engines first, for every method
        methods = args.compiled_methods if engine.startswith("compiled") else args.methods
        for family, pair in pairs.items():
            # alone: Sequoia on its fixed profile (engine/methods.py standalone)
            cases = [(m, m, standalone(m) or None) for m in methods.split(",")] + learned[family]
            for method, name, params in cases:
                case = f"{family} {method} {engine}"
                if time.perf_counter() - start > args.time_limit_s:
                    report["skipped"].append(case)
                    continue
                row = {"family": family, "method": method, "engine": engine}
                t0 = time.perf_counter()
                try:
                    got = [
                        generate(pair, x, name, args.new_tokens, engine=engine, params=params)
                        for x in prompts[family]
                    ]
                    row["equal"] = all(g.tokens == w for g, w in zip(got, want[family]))
                    its = [it for g in got for it in g.stats.iterations]
                    row["tokens_per_iteration"] = sum(it.accepted + 1 for it in its) / len(its)
                    # a TorchFunctionMode would break the compiled graphs
                    if not engine.startswith("compiled"):
                        ids = prompts[family][0]
                        row.update(host_work(pair, ids, name, args.new_tokens, engine, params))
                except Exception as e:  # noqa: BLE001 - one failed case must not end the run
                    traceback.print_exc()
                    row["error"] = error_line(e)
                row["seconds"] = round(time.perf_counter() - t0, 2)
                report["rows"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                if args.out:
                    write_record(args.out, report)
    report["elapsed_s"] = time.perf_counter() - start
    return report


def main(argv=None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.out:
        write_record(args.out, report)
    cols = ["family", "method", "engine", "equal", "tokens_per_iteration"]
    cols += [
        "reads_per_iteration",
        "synchronisations_per_iteration",
        "ops_per_iteration",
        "matmuls_per_iteration",
        "seconds",
        "error",
    ]
    print(markdown_table([{c: r.get(c, "") for c in cols} for r in report["rows"]], cols))
    bad = [r for r in report["rows"] if not r.get("equal")]
    print(f"\n{len(report['rows']) - len(bad)}/{len(report['rows'])} cases equal to autoregressive")
    if report["skipped"]:
        print(f"skipped (time limit): {', '.join(report['skipped'])}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
