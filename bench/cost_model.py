"""Cost-model validation on this machine: profile the pair, run the methods, predict each
method's speedup from its own iterations and the profile, and compare with the measurement.

    python bench/cost_model.py --n-prompts 20 --max-new-tokens 48     # the issue's record
    python bench/cost_model.py --target tiny-llama --draft tiny-llama-draft --n-prompts 2

1. Forward-cost curves of target and draft (engine/curves.py, eager path, --dtype).
2. Every method (autoregressive first) on the same prompts, interleaved per prompt so load
   drift hits all alike (engine.decode.generate, greedy). Each draft forward's token count is
   recorded too (a wrapper on CachedModel.forward), to measure the error of the cost model's
   split of a stored iteration's draft tokens over its forwards.
3. Measured speedup = (method tokens / method seconds) / (AR tokens / AR seconds), generation
   wall time with prefill; predicted = engine/cost_model.py predict() over the method's
   iterations with h_i its own host time and h_AR the AR run's host time per iteration.

Writes --out (JSON, rewritten after every prompt) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load_prompts, markdown_table  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from engine import cost_model  # noqa: E402
from engine.curves import device_info, measure_curve  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.fetch import REAL_PAIR  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.models import load_pair  # noqa: E402
from engine.runtime.eager import CachedModel  # noqa: E402

DEFAULT_METHODS = [
    "autoregressive",
    "linear:k=4",
    "fixed_tree:depth=4,branch=2,budget=16",
    "dynatree",
    "dyspec",
    "salf",
    "ddtree",
]
SIZES = "1,2,3,4,5,6,8,10,12,16,24,32,48,64,96,128"
CONTEXTS = "0,128,256"

_CALLS: list[tuple[int, int]] = []  # (id of the model, tokens fed) per forward, in order
_forward = CachedModel.forward


def _recording_forward(self, tokens, *args, **kwargs):
    _CALLS.append((id(self.model), int(tokens.shape[0])))
    return _forward(self, tokens, *args, **kwargs)


def _log(line: str) -> None:
    print(line, flush=True)


def exact_draft_sizes(calls, draft_id: int, stats) -> list[list[int]]:
    """Per iteration, the token counts of its draft forwards (calls of one generation)."""
    sizes = [n for m, n in calls if m == draft_id]
    out, k = [], 0
    for it in stats.iterations:
        out.append(sizes[k : k + it.draft_forwards])
        k += it.draft_forwards
    assert k == len(sizes), (k, len(sizes))
    return out


def profiles_of(gens) -> list[cost_model.GenerationProfile]:
    return [cost_model.from_per_iteration(p, g.to_dict()["per_iteration"]) for p, g in gens]


def rows_of(runs: dict, curves: dict) -> list[dict]:
    ar = runs["autoregressive"]
    ar_tps = sum(g.new_tokens for _, g in ar["gens"]) / sum(g.total_s for _, g in ar["gens"])
    h_ar = cost_model.mean_host_per_token(profiles_of(ar["gens"]))
    rows = []
    for name, r in runs.items():
        gens = profiles_of(r["gens"])
        tokens = sum(g.new_tokens for _, g in r["gens"])
        secs = sum(g.total_s for _, g in r["gens"])
        measured = tokens / secs / ar_tps
        pred = cost_model.predict(gens, curves["target"], curves["draft"], h_ar)
        exact = cost_model.predict(
            gens, curves["target"], curves["draft"], h_ar, draft_sizes=r["sizes"]
        )
        rows.append(
            {
                "method": name,
                "new_tokens": tokens,
                "measured_s": secs,
                "measured_speedup": measured,
                "predicted_s": pred.seconds,
                "predicted_speedup": pred.speedup,
                "relative_error": pred.speedup / measured - 1,
                "predicted_speedup_exact_draft_sizes": exact.speedup,
                "split_error": pred.speedup / exact.speedup - 1,
                "predicted_ar_s": pred.ar_seconds,
                "predicted_draft_s": pred.draft_s,
                "predicted_target_s": pred.target_s,
                "prefill_s": pred.prefill_s,
                "host_s": pred.host_s,
                "tokens_per_iteration": tokens / sum(len(g.iterations) for g in gens),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=REAL_PAIR[0])
    ap.add_argument("--draft", default=REAL_PAIR[1])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--methods", nargs="*", default=DEFAULT_METHODS)
    ap.add_argument("--sizes", default=SIZES)
    ap.add_argument("--contexts", default=CONTEXTS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench/results/cost_model.json")
    args = ap.parse_args()
    if args.methods[0] != "autoregressive":
        sys.exit("error: --methods must start with autoregressive (the baseline)")
    methods = {t: resolve_method(*parse_method(t)) for t in args.methods}
    sizes = [int(x) for x in args.sizes.split(",")]
    contexts = [int(x) for x in args.contexts.split(",")]

    pair = load_pair(args.target, args.draft, dtype=args.dtype)
    ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
    generate(pair, ids[0][:8], "autoregressive", 2)  # warm-up
    started = time.time()
    curves = {}
    for role, m in (("target", pair.target), ("draft", pair.draft)):
        curves[role] = measure_curve(
            m.model, m.name, sizes, contexts, repeats=args.repeats, log=_log
        )
    profile_s = time.time() - started

    CachedModel.forward = _recording_forward
    runs = {t: {"gens": [], "sizes": []} for t in methods}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for i, x in enumerate(ids):
        for t, m in methods.items():
            _CALLS.clear()
            g = generate(pair, x, m, args.max_new_tokens)
            runs[t]["gens"].append((len(x), g.stats))
            runs[t]["sizes"].append(exact_draft_sizes(_CALLS, id(pair.draft.model), g.stats))
        rows = rows_of(runs, curves)
        record = {
            "bench": "cost_model",
            "command": "python " + " ".join(sys.argv),
            "target": args.target,
            "draft": args.draft,
            "dtype": args.dtype,
            "engine": "eager",
            "threads": torch.get_num_threads(),
            "device": device_info(pair.target.device),
            "dataset": args.dataset,
            "prompt_tokens": args.prompt_tokens,
            "max_new_tokens": args.max_new_tokens,
            "n_prompts": i + 1,
            "profile_s": profile_s,
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "curves": {role: c.to_dict() for role, c in curves.items()},
            "rows": rows,
            "per_prompt": {
                t: [{"prompt_tokens": p, **g.to_dict()} for p, g in r["gens"]]
                for t, r in runs.items()
            },
        }
        out.write_text(json.dumps(record, indent=1))
        print(f"prompt {i + 1}/{len(ids)} done", file=sys.stderr, flush=True)
    print(
        markdown_table(
            rows,
            [
                "method",
                "tokens_per_iteration",
                "measured_speedup",
                "predicted_speedup",
                "relative_error",
                "split_error",
            ],
        )
    )


if __name__ == "__main__":
    main()
