"""Cost-model validation on this machine: profile the pair, run the methods, predict each
method's speedup from its own iterations and the profile, and compare with the measurement.

    python bench/cost_model.py --n-prompts 20 --max-new-tokens 48     # the issue's record
    python bench/cost_model.py --target tiny-llama --draft tiny-llama-draft --n-prompts 2
    python bench/cost_model.py --target synthetic:toy-target --draft synthetic:toy-draft \
        --aligns 0.6,0.8,0.95 --n-prompts 6 --hf-assisted              # aligned synthetic pairs
    python3 bench/cost_model.py --target synthetic:qwen2.5-7b --draft synthetic:qwen2.5-0.5b \
        --aligns 0.7,0.9 --dtype auto --engine graphs --hf-assisted   # on a GPU (gpu_lease.sh)

With --aligns (a synthetic target, engine/synthetic.py) the methods run once per alignment,
the target rebuilt at `@align=A` each time; the curves are measured once (a synthetic model's
cost does not depend on its alignment). --hf-assisted times Hugging Face assisted generation
beside ours on the same prompts (measured only: it has no per-iteration profile to predict
from). --time-limit-s stops starting prompts once an alignment's share of it is spent.

1. Forward-cost curves of target and draft (engine/curves.py, eager path, --dtype).
2. Every method (autoregressive first) on the same prompts, interleaved per prompt so load
   drift hits all alike (engine.decode.generate, greedy). Each draft forward's token count is
   recorded too (a wrapper on CachedModel.forward), to measure the error of the cost model's
   split of a stored iteration's draft tokens over its forwards.
3. Measured speedup = (method tokens / method seconds) / (AR tokens / AR seconds), generation
   wall time with prefill; predicted = engine/cost_model.py predict() over the method's
   iterations with h_i its own host time and h_AR the AR run's host time per iteration.
   Acceptance = drafted tokens accepted / drafted tokens the verifier reached.

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

from bench.common import command_line, load_prompts, markdown_table  # noqa: E402
from bench.engine_overhead import parse_method  # noqa: E402
from bench.hf_contenders import hf_generate  # noqa: E402
from engine import cost_model  # noqa: E402
from engine.curves import device_info, measure_curve  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.fetch import REAL_PAIR  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.model_names import parse_synthetic  # noqa: E402
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


def exact_draft_sizes(calls, draft_id: int, stats) -> list[list[int]] | None:
    """Per iteration, the token counts of its draft forwards (calls of one generation); None
    when the recorded calls do not add up (an engine path whose forwards are not recorded)."""
    sizes = [n for m, n in calls if m == draft_id]
    out, k = [], 0
    for it in stats.iterations:
        out.append(sizes[k : k + it.draft_forwards])
        k += it.draft_forwards
    return out if k == len(sizes) else None  # None: forwards that bypass CachedModel.forward


def acceptance(stats) -> float | None:
    """Drafted tokens accepted over drafted tokens the verifier reached (None: none drafted)."""
    tried = sum(it.tried for g in stats for it in g.iterations)
    return sum(it.accepted for g in stats for it in g.iterations) / tried if tried else None


def hf_row(hf: list[tuple[list[int], float]], ar_tps: float, ar_tokens: list) -> dict:
    """Hugging Face assisted generation's measured row: [(new tokens, seconds)] per prompt;
    outputs_differ counts the prompts whose tokens are not our autoregressive decoding's."""
    tokens, secs = sum(len(n) for n, _ in hf), sum(t for _, t in hf)
    return {
        "method": "hf_assisted",
        "new_tokens": tokens,
        "measured_s": secs,
        "measured_speedup": tokens / secs / ar_tps,
        "outputs_differ": sum(t != a for (t, _), a in zip(hf, ar_tokens)),
    }


def at_align(name: str, align: float | None) -> str:
    """Synthetic model `name` at alignment `align` (None: `name` itself)."""
    if align is None:
        return name
    syn = parse_synthetic(name)
    if syn is None:
        raise SystemExit(f"error: --aligns needs a synthetic target (synthetic:ARCH), not {name}")
    return str(type(syn)(syn.arch, align, syn.seed))


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
        exact = None
        if None not in r["sizes"]:
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
                "predicted_speedup_exact_draft_sizes": exact and exact.speedup,
                "split_error": exact and pred.speedup / exact.speedup - 1,
                "predicted_ar_s": pred.ar_seconds,
                "predicted_draft_s": pred.draft_s,
                "predicted_target_s": pred.target_s,
                "prefill_s": pred.prefill_s,
                "host_s": pred.host_s,
                "tokens_per_iteration": tokens / sum(len(g.iterations) for g in gens),
                "acceptance": acceptance([g for _, g in r["gens"]]),
                "outputs_differ": sum(t != a for t, a in zip(r["tokens"], ar["tokens"])),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=REAL_PAIR[0])
    ap.add_argument("--draft", default=REAL_PAIR[1])
    ap.add_argument("--dtype", default="float32", help="float32, bfloat16, auto (bf16 on CUDA)")
    ap.add_argument("--engine", default="eager", help="how the models run (engine/config.py)")
    ap.add_argument("--dataset", default="spec_bench")
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--methods", nargs="*", default=DEFAULT_METHODS)
    ap.add_argument("--aligns", default="", help="synthetic target: e.g. 0.6,0.8,0.95")
    ap.add_argument("--hf-assisted", action="store_true", help="time HF assisted generation too")
    ap.add_argument("--sizes", default=SIZES)
    ap.add_argument("--contexts", default=CONTEXTS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit-s", type=float, default=0.0, help="0: no limit")
    ap.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: its own)")
    ap.add_argument("--out", default="bench/results/cost_model.json")
    args = ap.parse_args(argv)
    if args.threads:  # one thread on a core of its own: steadier timings on a shared CPU
        torch.set_num_threads(args.threads)
    if args.methods[0] != "autoregressive":
        sys.exit("error: --methods must start with autoregressive (the baseline)")
    methods = {t: resolve_method(*parse_method(t)) for t in args.methods}
    sizes = [int(x) for x in args.sizes.split(",")]
    contexts = [int(x) for x in args.contexts.split(",")]
    aligns = [float(a) for a in args.aligns.split(",") if a] or [None]
    targets = [at_align(args.target, a) for a in aligns]  # refused before anything loads
    started = time.time()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "bench": "cost_model",
        "command": command_line("bench/cost_model.py", argv),
        "target": args.target,
        "draft": args.draft,
        "dtype": args.dtype,
        "engine": args.engine,
        "threads": torch.get_num_threads(),
        "dataset": args.dataset,
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "aligns": aligns,
        "rows": [],
        "per_prompt": {},
    }
    curves: dict = {}
    for a, target in zip(aligns, targets):
        pair = load_pair(target, args.draft, dtype=args.dtype)
        ids = load_prompts(pair, args.n_prompts, args.prompt_tokens, args.dataset)
        for m in methods.values():  # warm-up: each method's first generation pays for more
            generate(pair, ids[0][:8], m, 4, engine=args.engine)
        if not curves:  # once: a synthetic model's cost does not depend on its alignment
            t0 = time.time()
            for role, m in (("target", pair.target), ("draft", pair.draft)):
                curves[role] = measure_curve(
                    m.model,
                    m.name,
                    sizes,
                    contexts,
                    repeats=args.repeats,
                    engine=args.engine,
                    log=_log,
                )
            record.update(
                device=device_info(pair.target.device),
                profile_s=time.time() - t0,
                curves={role: c.to_dict() for role, c in curves.items()},
            )
        budget = None
        if args.time_limit_s:
            left = args.time_limit_s - (time.time() - started)
            budget = time.time() + left / (len(aligns) - aligns.index(a))
        runs = {t: {"gens": [], "sizes": [], "tokens": []} for t in methods}
        hf: list[tuple[list[int], float]] = []
        CachedModel.forward = _recording_forward
        try:
            for i, x in enumerate(ids):
                if budget is not None and time.time() > budget and i:
                    print(f"align {a}: time limit, {i} prompts", file=sys.stderr, flush=True)
                    break
                for t, m in methods.items():
                    _CALLS.clear()
                    g = generate(pair, x, m, args.max_new_tokens, engine=args.engine)
                    runs[t]["gens"].append((len(x), g.stats))
                    runs[t]["tokens"].append(g.tokens)
                    runs[t]["sizes"].append(
                        exact_draft_sizes(_CALLS, id(pair.draft.model), g.stats)
                    )
                if args.hf_assisted:
                    toks, secs = hf_generate(pair, x, args.max_new_tokens, assisted=True)
                    hf.append((toks, secs))
                rows = rows_of(runs, curves)
                if hf:
                    ar = runs["autoregressive"]["gens"]
                    ar_tps = sum(g.new_tokens for _, g in ar) / sum(g.total_s for _, g in ar)
                    rows.append(hf_row(hf, ar_tps, runs["autoregressive"]["tokens"]))
                for r in rows:
                    r.update(align=a, n_prompts=i + 1)
                record["rows"] = [r for r in record["rows"] if r["align"] != a] + rows
                per_prompt = {
                    t: [{"prompt_tokens": p, **g.to_dict()} for p, g in r["gens"]]
                    for t, r in runs.items()
                }
                if a is None:  # {method: [...]}, the format bench.gpu predicts from
                    record["per_prompt"] = per_prompt
                else:  # {align: {method: [...]}}
                    record["per_prompt"][str(a)] = per_prompt
                record["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
                out.write_text(json.dumps(record, indent=1))
                print(f"align {a}: prompt {i + 1}/{len(ids)} done", file=sys.stderr, flush=True)
        finally:
            CachedModel.forward = _forward
        del pair
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    columns = [
        "align",
        "method",
        "outputs_differ",
        "tokens_per_iteration",
        "acceptance",
        "measured_speedup",
        "predicted_speedup",
        "relative_error",
        "split_error",
    ]
    print(markdown_table(record["rows"], columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
