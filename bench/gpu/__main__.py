"""GPU benchmark (issue 22, part 4): decoding against the bandwidth floor, verification cost per
tree size, host overhead per iteration, Hugging Face assisted generation, each method's
predicted speedup, and the Triton tree-attention kernel; writes the device's forward-cost
profile. Needs only torch, transformers and triton: no Ray, no database, no hub, no weights.

On a GPU box (the `device` tool's machine; one call, under its 10-minute limit; the
sections run in priority order and --time-limit-s stops starting new ones, see below):

    device run: PYTHONUNBUFFERED=1 python3 -m bench.gpu --out $OUT/gpu.json 2>&1 | tee $OUT/gpu.log
                (also writes $OUT/gpu_profile.json)

If the compiled sections do not fit, a second call can run them alone:
`python3 -m bench.gpu --engines compiled --pairs '' --out $OUT/gpu_compiled.json`. The graphs
engine (CUDA graphs recorded from the eager kernels, engine/runtime/cuda_graphs.py) costs a capture of
about two forwards per size bucket, not a compilation, so it runs with the first sections.

On a CPU at toy sizes (about a minute here; tests/bench/test_gpu.py runs a subset in seconds):

    python -m bench.gpu --tiny --out /tmp/gpu.json

What it measures (random weights with the published shapes, bench/gpu/models.py; bf16 on CUDA,
fp32 on CPU; greedy; one random prompt of --prompt-tokens tokens, --new-tokens new tokens):

1. copy bandwidth: a --copy-mib MiB device-to-device copy, median of --repeats (bytes read +
   written per second); the floor of autoregressive decoding = bytes a step reads / bandwidth
   (bench/gpu/models.py), at the mean context of the run.
2. per model: our autoregressive decoding (engine/decode.py generate, method autoregressive,
   for each of --engines) and HF `model.generate` greedy, time per token and its ratio to the
   floor (goal on a GPU: <= 1.25x). Ours: the generation's TPOT (wall time after the first
   token / tokens after the first), median of --repeats generations after a short warm-up.
   HF: (t(M) - t(1)) / (M - 1) for M = --new-tokens, the fastest of --repeats interleaved
   calls each, so the prefill cancels.
3. per model: the forward-cost curve (engine/curves.py measure_curve: one forward of n new
   tokens after C cached tokens, n = 1..256, C in --contexts; engines fast and graphs, and
   compiled at --compiled-sizes) - the verification cost per tree size, also reported as c(n) / c(1) at
   the prompt's context.
4. per pair (bench/gpu/models.py PAIRS): every method of the acceptance record (--record,
   default: the newest bench/cost_model.py record in bench/records/, else
   bench/records/methods_real_pair.json; with its parameters) run with our engine on the
   random pair, engine fast (--pair-engine graphs or compiled: CUDA graphs, and then that
   engine's curves and autoregressive host time in the prediction), --method-tokens new tokens:
   host time per iteration (iteration wall time minus time inside model forwards, from
   IterationStats) and its share of the iteration (goal on a GPU: <= 10%), pooled over
   --repeats runs, each beside the same run timed with a synchronisation at every stamp (the
   timing before 2026-11-27's session 8, engine/clock.py): what those waits cost. Random weights
   make the trees' shapes and acceptance meaningless (at tiny sizes a tied target and draft
   of different seeds agreed on every token: a random model whose LM head is its embedding
   tends to repeat its input); these runs measure cost only, at whatever acceptance the
   random pair gives (reported).
5. per pair: HF assisted generation (`generate(assistant_model=draft)`): (a) as HF ships it
   (adaptive draft length and confidence stop), time per token and tokens per iteration on
   the random pair; (b) with a constant draft length k = the record's linear k and no
   confidence stop: HF's time per iteration, (t(M) - t(M1)) / (iterations(M) -
   iterations(M1)), M1 = M / 4, target and draft forwards counted with forward hooks (the
   last, truncated iteration of each call makes this exact to within one iteration).
6. per pair, the method comparison by prediction: each method's time per token and speedup on
   this device from the CPU-measured acceptance record and this run's forward-cost curves and
   host times (engine/cost_model.py; "not available" when the record has no per-iteration
   profiles). HF assisted's predicted time per token = its measured time per
   iteration at constant k (5b) / the record's linear-k tokens per iteration: with greedy
   decoding, HF assisted at a constant k drafts and accepts exactly what our linear k does,
   so its tokens per iteration are the record's linear ones. Goal on a GPU: best tree method
   >= 1.8x HF assisted. (HF's default adaptive schedule has no CPU record to predict from.)
7. CUDA only: the Triton tree-attention kernel against SDPA with a dense mask
   (bench/tree_attention.py run) at each pair target's head shape; skipped with a note on CPU.

Profile file (--profile-out, default <out stem>_profile.json): {"bench": "gpu", "device":
engine.curves.device_info(...), "curves": [ForwardCurve.to_dict(), ...]}, one curve per model
and engine path in engine/curves.py's format ({"model", "device_name", "dtype", "engine",
"points": [[C, n, seconds], ...]}). Curves of the shapes of orch's real pair are named after
it (bench/gpu/models.py ORCH_TWINS: qwen2.5-coder-1.5b / -0.5b), so that once imported,
`orch compare --predict-on "<device_name>"` predicts the stored real-pair trials on this GPU.
Import it on a machine with the database (one transaction; a key's earlier curve is replaced):

    orch profile-import gpu_profile.json --db sqlite:///orch.db

A stored report's predictions can be computed again without the device, e.g. when the time
limit cut them or from a newer CPU record: `python -m bench.gpu --from-report gpu.json
--record bench/records/cost_model_real_pair.json`.

Order: bandwidth; per model autoregressive (eager, fast, graphs, HF greedy) and the fast and
graphs curves; per pair the methods' host times, HF assisted and the predictions; the kernel;
last the compiled path (autoregressive and curve, smallest model first: torch.compile captures one graph per
model, cache and size bucket, minutes for a 7B model). --time-limit-s (default 480, inside
the device tool's 10 minutes): a section that would start after the limit is skipped and
listed under "skipped"; the JSON is rewritten after every section, so what finished comes
back even if the command is killed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from bench.common import write_record
from bench.gpu.device import allow_many_graphs
from bench.gpu.models import (
    ARCHS,
    PAIRS,
    Models,
    floor_seconds,
    kv_bytes_per_token,
    weight_bytes_read,
)
from bench.gpu.predict import default_record, from_report, pair_prediction
from bench.gpu.report import error_line, markdown
from bench.gpu.sections import (
    ar_section,
    copy_bandwidth,
    curve,
    kernel_section,
    pair_section,
    record_methods,
    verification_table,
)
from engine.config import ENGINE_SPECS, PADDED, ConfigError, split_engine
from engine.curves import device_info
from engine.devices import pick_device, pick_dtype


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON report (default: none, table only)")
    ap.add_argument("--profile-out", default=None, help="default <out stem>_profile.json")
    ap.add_argument("--models", default=",".join(ARCHS), help=f"of {', '.join(ARCHS)}")
    ap.add_argument("--pairs", default=",".join(PAIRS), help=f"of {', '.join(PAIRS)}; '' none")
    ap.add_argument("--tiny", action="store_true", help="toy sizes of every config (CPU test)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="default bf16 on CUDA, fp32 on CPU")
    ap.add_argument(
        "--engines",
        default=None,
        help="AR engines (default eager,fast[,graphs,compiled]); ENGINE+lean: on our forward",
    )
    ap.add_argument("--prompt-tokens", type=int, default=None, help="default 128 (tiny 16)")
    ap.add_argument("--new-tokens", type=int, default=None, help="default 64 (tiny 8)")
    ap.add_argument("--method-tokens", type=int, default=None, help="per method run (32; tiny 8)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3 (tiny 2)")
    ap.add_argument("--copy-mib", type=int, default=None, help="default 1024 (CPU 64, tiny 8)")
    ap.add_argument("--sizes", default=None, help="curve sizes (default 1,2,4,...,256)")
    ap.add_argument("--contexts", default=None, help="curve contexts (default 128,512,1024)")
    ap.add_argument("--compiled-sizes", default="1,16,64", help="compiled curve sizes")
    ap.add_argument(
        "--pair-engine",
        choices=[e for e in ENGINE_SPECS if e != "eager"],
        default="fast",
        help="the engine the pairs' methods run on, and whose curves their predictions use",
    )
    ap.add_argument("--record", default=None, help="CPU acceptance record (see default_record)")
    ap.add_argument("--methods", default=None, help="methods to run (default: the record's)")
    ap.add_argument("--time-limit-s", type=float, default=480.0, help="see the docstring")
    ap.add_argument("--no-kernel", action="store_true", help="skip the tree-attention kernel")
    ap.add_argument(
        "--no-hf", action="store_true", help="skip HF greedy and assisted (measured before)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--from-report",
        default=None,
        metavar="JSON",
        help="no measurement: a stored report's predictions again from --record (from_report)",
    )
    ap.add_argument(
        "--curves-from",
        default=None,
        metavar="JSON",
        help="with --from-report: another report of the device whose curves fill missing ones",
    )
    args = ap.parse_args(argv)
    tiny = args.tiny
    args.prompt_tokens = args.prompt_tokens or (16 if tiny else 128)
    args.new_tokens = args.new_tokens or (8 if tiny else 64)
    args.method_tokens = args.method_tokens or (8 if tiny else 32)
    args.repeats = args.repeats or (2 if tiny else 3)
    args.sizes = ints(args.sizes or ("1,2,4,8,16" if tiny else "1,2,4,8,16,32,64,128,256"))
    args.contexts = ints(args.contexts or ("16,64" if tiny else "128,512,1024"))
    args.compiled_sizes = ints(args.compiled_sizes)
    args.record = args.record or str(default_record())
    args.models = [m for m in args.models.split(",") if m]
    args.pairs = [p for p in args.pairs.split(",") if p]
    bad = [m for m in args.models if m not in ARCHS] + [p for p in args.pairs if p not in PAIRS]
    if bad:
        ap.error(f"unknown model or pair {bad[0]!r}")
    if args.new_tokens < 4:
        ap.error("--new-tokens must be >= 4")
    if args.engines and (bad := [e for e in args.engines.split(",") if e not in ENGINE_SPECS]):
        ap.error(f"unknown engine {bad[0]!r} (known: {', '.join(ENGINE_SPECS)})")
    return args


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


class Budget:
    """Wall-clock limit and failure isolation: `run(name, fn)` runs one measurement unless the
    limit has passed (then it is listed under skipped); an exception is logged with its
    traceback and listed under errors, and the run goes on with the next measurement."""

    def __init__(self, limit_s: float, log) -> None:
        self.start, self.limit_s, self.log = time.perf_counter(), limit_s, log
        self.skipped: list[str] = []
        self.errors: list[str] = []

    def ok(self, name: str) -> bool:
        if time.perf_counter() - self.start < self.limit_s:
            return True
        self.skipped.append(f"{name}: time limit {self.limit_s:g} s reached")
        return False

    def run(self, name: str, fn):
        """fn() or None (skipped, or failed)."""
        if not self.ok(name):
            return None
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - one failed measurement must not end the run
            self.log(traceback.format_exc())
            self.errors.append(f"{name}: {error_line(e)}")
            return None


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_report:
        more = Path(args.curves_from) if args.curves_from else None
        report = from_report(Path(args.from_report), Path(args.record), more)
        if args.out:
            write_record(args.out, report)
        print(markdown(report))
        return 0
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    cuda = device.type == "cuda"
    engines = (args.engines or ("eager,fast,graphs,compiled" if cuda else "eager,fast")).split(",")
    args.engines = [e for e in engines if e]
    compiled = [e for e in args.engines if e.startswith("compiled")]
    if compiled:
        allow_many_graphs()
    record_path = Path(args.record)
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    try:  # unknown --methods or record parameters: one line, before any model is built
        record_methods(record, args.methods)
    except (ConfigError, KeyError) as e:
        sys.exit(f"error: --methods / {record_path}: {e}")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    budget = Budget(args.time_limit_s, log)
    report = {
        "bench": "gpu",
        "command": " ".join(["python -m bench.gpu", *(argv if argv is not None else sys.argv[1:])]),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": device_info(device),
        "dtype": str(dtype).removeprefix("torch."),
        "tiny": args.tiny,
        "settings": {
            k: getattr(args, k)
            for k in (
                "prompt_tokens",
                "new_tokens",
                "method_tokens",
                "repeats",
                "sizes",
                "contexts",
                "compiled_sizes",
                "engines",
                "seed",
            )
        },
        "record": str(record_path) if record else None,
        "models": {},
        "pairs": {},
        "skipped": budget.skipped,
        "errors": budget.errors,
    }
    out = Path(args.out) if args.out else None
    profile_out = Path(args.profile_out) if args.profile_out else None
    if out and not profile_out:
        profile_out = out.with_name(out.stem + "_profile.json")

    def save() -> None:
        if out:
            write_record(out, report)
        if profile_out:
            curves = [c for m in report["models"].values() for c in m.get("curves", {}).values()]
            profile = {"bench": "gpu", "device": report["device"], "curves": curves}
            write_record(profile_out, profile)

    mib = args.copy_mib or (8 if args.tiny else 1024 if cuda else 64)
    report["bandwidth"] = bw = copy_bandwidth(device, mib, max(args.repeats, 5))
    log(f"copy bandwidth {bw['bytes_per_s'] / 1e9:.1f} GB/s ({mib} MiB)")
    save()
    models = Models(args, device, dtype)
    first = [e for e in args.engines if e not in compiled]

    def model_entry(name: str, model) -> dict:
        key = models.key(name, model)
        if key not in report["models"]:
            wb, kvb = weight_bytes_read(model), kv_bytes_per_token(model.config, dtype)
            context = args.prompt_tokens + args.new_tokens / 2  # mean context of the decoding
            report["models"][key] = {
                "params": sum(p.numel() for p in model.parameters()),
                "weight_bytes_read": wb,
                "kv_bytes_per_token": kvb,
                "mean_context": context,
                "floor_ms_per_token": 1e3 * floor_seconds(wb, kvb, context, bw["bytes_per_s"]),
                "autoregressive": {},
                "curves": {},
            }
        return report["models"][key]

    def model_curve(name: str, model, engine: str) -> dict | None:
        entry = model_entry(name, model)
        if engine not in entry["curves"]:
            c = budget.run(
                f"{models.key(name, model)} {engine} curve",
                lambda: curve(model, models.profile_name(name, model), args, engine, log),
            )
            if c:
                entry["curves"][engine] = c
                entry.setdefault("verification", {})[engine] = verification_table(
                    c, args.prompt_tokens
                )
        return entry["curves"].get(engine)

    def padded_ar(name: str, model, engine: str) -> None:
        entry = model_entry(name, model)
        if f"ours_{engine}" not in entry["autoregressive"]:
            floor = entry["floor_ms_per_token"]
            entry["autoregressive"].update(
                ar_section(name, model, args, [engine], False, floor, budget, log)
            )

    # 1. per model: autoregressive against the floor (eager, fast, graphs, HF greedy); fast
    # and graphs curves
    for name in args.models if first else []:
        model = budget.run(f"building {name}", lambda n=name: models.get(n))
        if model is None:
            continue
        entry = model_entry(name, model)
        entry["autoregressive"].update(
            ar_section(
                name, model, args, first, not args.no_hf, entry["floor_ms_per_token"], budget, log
            )
        )
        for engine in ("fast", "graphs", "fast+lean", "graphs+lean"):
            if engine in args.engines:
                model_curve(name, model, engine)
        save()
    # 2. per pair: host overhead, HF assisted, predictions
    for pname in args.pairs:
        tname, dname = PAIRS[pname]
        target = budget.run(f"building {tname}", lambda t=tname: models.get(t))
        if target is None:
            continue
        draft = budget.run(
            f"building {dname}", lambda d=dname: models.get(d, target.config.vocab_size)
        )
        if draft is None:
            continue
        engine = args.pair_engine
        if split_engine(engine)[0] in PADDED:  # our autoregressive host time there, for h_AR
            padded_ar(tname, target, engine)
        res = pair_section(pname, target, draft, args, record, budget, log)
        tc, dc = model_curve(tname, target, engine), model_curve(dname, draft, engine)
        ar = model_entry(tname, target)["autoregressive"].get(f"ours_{engine}")
        if tc and dc:
            res["prediction"] = budget.run(
                f"{pname} prediction", lambda: pair_prediction(record, res, tc, dc, ar)
            )
        report["pairs"][pname] = res
        save()
    # 3. the tree-attention kernel (CUDA)
    if not cuda:
        report["kernel"] = {"skipped": "no CUDA device: the Triton kernel is timed on a GPU only"}
    elif args.no_kernel:
        report["kernel"] = {"skipped": "--no-kernel"}
    else:
        report["kernel"] = {}
        for t in dict.fromkeys([PAIRS[p][0] for p in args.pairs] or args.models):
            r = budget.run(
                f"{t} tree-attention kernel", lambda t=t: kernel_section(models.get(t), args, True)
            )
            if r:
                report["kernel"][t] = r
        save()
    # 4. compiled (CUDA graphs on CUDA): autoregressive and curve, smallest model first
    if compiled:
        for name in sorted(args.models, key=lambda n: ARCHS[n].hidden * ARCHS[n].layers):
            model = budget.run(f"building {name}", lambda n=name: models.get(n))
            if model is None:
                continue
            for engine in compiled:
                padded_ar(name, model, engine)
            if "compiled" in compiled:
                model_curve(name, model, "compiled")
            save()
    report["elapsed_s"] = time.perf_counter() - budget.start
    save()
    print(markdown(report))
    if out:
        print(f"\nwrote {out} and {profile_out}")
    return 1 if budget.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
