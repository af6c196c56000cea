"""DySpec's Algorithm 1 expanded node by node against in waves, on the real draft (issue 22).

On the padded graph engines DySpec's builder expands, with the node it must expand, every node
that may still be popped for its first child (engine/drafters/dyspec.py grow_greedy): the same
tree in fewer draft forwards of more rows. This bench builds both trees from the same contexts
with the draft model alone (the tree depends on the draft only): each prompt of a dataset
followed by the first j tokens of its greedy continuation (the draft's own, standing in for
the contexts a generation's iterations see), at each budget, drafting at DySpec's draft
temperature 0.6 (Sec. 5.1; the sweep's setting for targets at 0 and 0.6). Greedy drafts
(--draft-temperature 0) give the same trees both ways, which the bench checks; sampled ones the
same law from another random stream (a wave draws its rows together). It reports draft
forwards and rows per tree, and the draft time per tree both ways on a profiled device from a
forward-cost curve of the draft (default: the H100 `graphs` curve of Qwen2.5-0.5B in
bench/records/gpu_h100_graphs_pooled_profile.json): a prediction, not a GPU measurement.

    python bench/dyspec_waves.py --out bench/records/dyspec_waves_real_pair.json
    python bench/dyspec_waves.py --draft-temperature 0 --budgets 16,64,128 \
        --out bench/records/dyspec_waves_real_pair_greedy.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import markdown_table, write_record  # noqa: E402
from engine.cost_model import ForwardCurve
from engine.datasets import encode_prompt, load_prompts  # noqa: E402
from engine.draft import DecodeState, DraftModel  # noqa: E402
from engine.drafters import dyspec  # noqa: E402
from engine.fetch import REAL_PAIR  # noqa: E402
from engine.models import load_model  # noqa: E402
from engine.runtime import cached_model  # noqa: E402
from engine.runtime.static import bucket  # noqa: E402
from engine.sampling import Warp  # noqa: E402

CURVES = Path(__file__).resolve().parent / "records" / "gpu_h100_graphs_pooled_profile.json"


def build(draft: DraftModel, context: list[int], budget: int, wide: bool, seed: int) -> dict:
    """One DySpec tree below context[-1]: its nodes and the rows of each draft forward."""
    builder = draft.start(context, keep_q=False)
    builder.wide = wide
    state = DecodeState(len(context) - 1, context[-1], draft.warp, remaining=10**6)
    dyspec.grow_greedy(builder, state, budget, torch.Generator().manual_seed(seed))
    rows = [len(b.nodes) for b in builder._batches]
    return {"nodes": (builder.tokens, builder.parents), "rows": rows}


def draft_seconds(curve: ForwardCurve | None, rows: list[int], context: int) -> float | None:
    """Draft time of one tree's forwards on the curve's device, each padded to its bucket."""
    if curve is None:
        return None
    return sum(curve.cost(bucket(n), context) for n in rows)


def load_curve(path: Path, model: str) -> ForwardCurve | None:
    if not path.exists():
        return None
    for c in json.loads(path.read_text())["curves"]:
        if c["model"].startswith(model):
            return ForwardCurve.from_dict(c)
    return None


def table(rows: list[dict], curve: ForwardCurve | None) -> str:
    columns = ["budget", "trees", "same_trees", "node_forwards", "wave_forwards"]
    columns += ["forward_ratio", "node_rows", "wave_rows"]
    if curve is not None:
        columns += ["node_gpu_ms", "wave_gpu_ms", "gpu_ms_ratio"]
    return markdown_table(rows, columns)


def record(args, contexts: list, curve: ForwardCurve | None, rows: list[dict], start: float):
    return {
        "bench": "dyspec_waves",
        "command": " ".join(sys.argv),
        "draft": args.draft,
        "dtype": args.dtype,
        "draft_temperature": args.draft_temperature,
        "dataset": args.dataset,
        "contexts": len(contexts),
        "prompt_tokens": args.prompt_tokens,
        "cuts": [int(c) for c in args.cuts.split(",")],
        "curve": None
        if curve is None
        else {"model": curve.model, "device": curve.device_name, "engine": curve.engine},
        "rows": rows,
        "table": table(rows, curve),
        "elapsed_s": round(time.time() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", default=REAL_PAIR[1])
    ap.add_argument("--dataset", default="c4")
    ap.add_argument("--n-prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--cuts", default="8,16,24,32", help="continuation tokens in the contexts")
    ap.add_argument("--budgets", default="16,32,64,128")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--draft-temperature", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--curves", type=Path, default=CURVES)
    ap.add_argument("--curve-model", default="qwen2.5-0.5b")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    start = time.time()
    loaded = load_model(args.draft, "cpu", args.dtype)
    cuts = [int(c) for c in args.cuts.split(",")]
    contexts = []
    for p in load_prompts(args.dataset, n=args.n_prompts):
        ids = torch.tensor([encode_prompt(loaded.tokenizer, p, args.prompt_tokens)])
        with torch.no_grad():
            out = loaded.model.generate(ids, max_new_tokens=max(cuts), do_sample=False)
        contexts += [out[0, : ids.shape[1] + c].tolist() for c in cuts]
    curve = load_curve(args.curves, args.curve_model)
    warp = Warp(args.draft_temperature)
    rows = []
    for budget in (int(b) for b in args.budgets.split(",")):
        trees = {False: [], True: []}
        for i, context in enumerate(contexts):
            # a fresh cache per context, prefilled by a one-node tree: both trees below then
            # start from the same cache, their forwards feeding tree nodes only
            draft = DraftModel(loaded.model, warp, cached_model(loaded.model, "fast"))
            build(draft, context, 1, False, args.seed)
            for wide in (False, True):
                trees[wide].append(build(draft, context, budget, wide, args.seed + i))
        same = all(a["nodes"] == b["nodes"] for a, b in zip(trees[False], trees[True]))
        same = same if warp.greedy else None  # sampled: another stream, not the same tree
        row = {"budget": budget, "trees": len(contexts), "same_trees": same}
        for wide, key in ((False, "node"), (True, "wave")):
            forwards = [len(t["rows"]) for t in trees[wide]]
            fed = [sum(t["rows"]) for t in trees[wide]]
            row[f"{key}_forwards"] = statistics.mean(forwards)
            row[f"{key}_rows"] = statistics.mean(fed)
            secs = [draft_seconds(curve, t["rows"], 128) for t in trees[wide]]
            row[f"{key}_gpu_ms"] = None if curve is None else 1e3 * statistics.mean(secs)
        row["forward_ratio"] = row["node_forwards"] / row["wave_forwards"]
        if curve is not None:
            row["gpu_ms_ratio"] = row["node_gpu_ms"] / row["wave_gpu_ms"]
        rows.append(row)
        if args.out:  # after every budget: a long run killed late keeps what it measured
            write_record(args.out, record(args, contexts, curve, rows, start))
        print(
            f"budget {budget}: forwards {row['node_forwards']:.1f} -> {row['wave_forwards']:.1f}"
            f" (rows {row['node_rows']:.1f} -> {row['wave_rows']:.1f}), same trees: {same}",
            file=sys.stderr,
        )
    print(table(rows, curve))
    return 0


if __name__ == "__main__":
    sys.exit(main())
