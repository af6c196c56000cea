"""GPU benchmark (issue 22, part 4): decoding against the bandwidth floor, verification cost per
tree size, host overhead per iteration, Hugging Face assisted generation, each method's
predicted speedup, and the Triton tree-attention kernel; writes the device's forward-cost
profile. Needs only torch, transformers and triton: no Ray, no database, no hub, no weights.

On a GPU box (the `device` tool's machine; one call, under its 10-minute limit; the
sections run in priority order and --time-limit-s stops starting new ones, see below):

    device run: PYTHONUNBUFFERED=1 python3 bench/gpu.py --out $OUT/gpu.json 2>&1 | tee $OUT/gpu.log
                (also writes $OUT/gpu_profile.json)

If the compiled sections do not fit, a second call can run them alone:
`python3 bench/gpu.py --engines compiled --pairs '' --out $OUT/gpu_compiled.json`. The graphs
engine (CUDA graphs recorded from the eager kernels, engine/cuda_graphs.py) costs a capture of
about two forwards per size bucket, not a compilation, so it runs with the first sections.

On a CPU at toy sizes (about a minute here; tests/bench/test_gpu.py runs a subset in seconds):

    python bench/gpu.py --tiny --out /tmp/gpu.json

What it measures (random weights with the published shapes, bench/gpu_models.py; bf16 on CUDA,
fp32 on CPU; greedy; one random prompt of --prompt-tokens tokens, --new-tokens new tokens):

1. copy bandwidth: a --copy-mib MiB device-to-device copy, median of --repeats (bytes read +
   written per second); the floor of autoregressive decoding = bytes a step reads / bandwidth
   (bench/gpu_models.py), at the mean context of the run.
2. per model: our autoregressive decoding (engine/decode.py generate, method autoregressive,
   for each of --engines) and HF `model.generate` greedy, time per token and its ratio to the
   floor (goal on a GPU: <= 1.25x). Ours: the generation's TPOT (wall time after the first
   token / tokens after the first), median of --repeats generations after a short warm-up.
   HF: (t(M) - t(1)) / (M - 1) for M = --new-tokens, the fastest of --repeats interleaved
   calls each, so the prefill cancels.
3. per model: the forward-cost curve (engine/profile.py measure_curve: one forward of n new
   tokens after C cached tokens, n = 1..256, C in --contexts; engines fast and graphs, and
   compiled at --compiled-sizes) - the verification cost per tree size, also reported as c(n) / c(1) at
   the prompt's context.
4. per pair (bench/gpu_models.py PAIRS): every method of the acceptance record (--record,
   default: the newest bench/cost_model.py record in bench/records/, else
   bench/records/methods_real_pair.json; with its parameters) run with our engine on the
   random pair, engine fast (--pair-engine graphs or compiled: CUDA graphs, and then that
   engine's curves and autoregressive host time in the prediction), --method-tokens new tokens:
   host time per iteration (iteration wall time minus time inside model forwards, from
   IterationStats) and its share of the iteration (goal on a GPU: <= 10%). Random weights
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
   host times (engine/cost_model.py; "not available" when that module or per-iteration
   profiles are missing). HF assisted's predicted time per token = its measured time per
   iteration at constant k (5b) / the record's linear-k tokens per iteration: with greedy
   decoding, HF assisted at a constant k drafts and accepts exactly what our linear k does,
   so its tokens per iteration are the record's linear ones. Goal on a GPU: best tree method
   >= 1.8x HF assisted. (HF's default adaptive schedule has no CPU record to predict from.)
7. CUDA only: the Triton tree-attention kernel against SDPA with a dense mask
   (bench/tree_attention.py run) at each pair target's head shape; skipped with a note on CPU.

Profile file (--profile-out, default <out stem>_profile.json): {"bench": "gpu", "device":
engine.profile.device_info(...), "curves": [ForwardCurve.to_dict(), ...]}, one curve per model
and engine path in engine/profile.py's format ({"model", "device_name", "dtype", "engine",
"points": [[C, n, seconds], ...]}). Curves of the shapes of orch's real pair are named after
it (bench/gpu_models.py ORCH_TWINS: qwen2.5-coder-1.5b / -0.5b), so that once imported,
`orch compare --predict-on "<device_name>"` predicts the stored real-pair trials on this GPU.
Import it on a machine with the database (one transaction; a key's earlier curve is replaced):

    orch profile-import gpu_profile.json --db sqlite:///orch.db

A stored report's predictions can be computed again without the device, e.g. when the time
limit cut them or from a newer CPU record: `python bench/gpu.py --from-report gpu.json
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
import statistics
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gpu_models import (  # noqa: E402
    ARCHS,
    ORCH_TWINS,
    PAIRS,
    NoTokenizer,
    build,
    floor_seconds,
    kv_bytes_per_token,
    weight_bytes_read,
)
from bench.gpu_predict import from_report, linear_tau, method_texts, pair_prediction  # noqa: E402
from bench.gpu_report import markdown, ms_cell  # noqa: E402
from bench.host_time import host_seconds  # noqa: E402
from bench.tree_attention import time_ms  # noqa: E402
from engine.config import ENGINES, PADDED, ConfigError  # noqa: E402
from engine.decode import generate  # noqa: E402
from engine.methods import resolve_method  # noqa: E402
from engine.models import LoadedModel, Pair, pick_device, pick_dtype  # noqa: E402
from engine.static_cache import cached_model  # noqa: E402

RECORD = ROOT / "bench/records/methods_real_pair.json"


def default_record(folder: Path = ROOT / "bench/records") -> Path:
    """The acceptance record to predict from: the newest per-iteration record in `folder`
    (bench/cost_model.py's JSON, "bench": "cost_model"), else bench/methods.py's record of
    per-prompt totals (RECORD; its linear row still predicts HF assisted)."""
    found = []
    for path in folder.glob("*.json"):
        try:
            head = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(head, dict) and head.get("bench") == "cost_model":
            found.append((str(head.get("time", "")), path.name, path))
    return max(found)[2] if found else RECORD


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON report (default: none, table only)")
    ap.add_argument("--profile-out", default=None, help="default <out stem>_profile.json")
    ap.add_argument("--models", default=",".join(ARCHS), help=f"of {', '.join(ARCHS)}")
    ap.add_argument("--pairs", default=",".join(PAIRS), help=f"of {', '.join(PAIRS)}; '' none")
    ap.add_argument("--tiny", action="store_true", help="toy sizes of every config (CPU test)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="default bf16 on CUDA, fp32 on CPU")
    ap.add_argument(
        "--engines", default=None, help="AR engines (default eager,fast[,graphs,compiled])"
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
        choices=["fast", "compiled", "graphs"],
        default="fast",
        help="the engine the pairs' methods run on, and whose curves their predictions use",
    )
    ap.add_argument("--record", default=None, help="CPU acceptance record (see default_record)")
    ap.add_argument("--methods", default=None, help="methods to run (default: the record's)")
    ap.add_argument("--time-limit-s", type=float, default=480.0, help="see the docstring")
    ap.add_argument("--no-kernel", action="store_true", help="skip the tree-attention kernel")
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
    if args.engines and (bad := [e for e in args.engines.split(",") if e not in ENGINES]):
        ap.error(f"unknown engine {bad[0]!r} (known: {', '.join(ENGINES)})")
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
            self.errors.append(
                f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            )
            return None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, mib: int, repeats: int) -> dict:
    """Bytes read + written per second of a `mib` MiB device-to-device copy, median of
    `repeats` (CUDA events on a GPU, perf_counter on a CPU; bench/tree_attention.time_ms)."""
    n = mib << 20
    src = torch.empty(n, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup=2, reps=repeats, cuda=device.type == "cuda")
    return {"bytes": n, "repeats": repeats, "median_ms": ms, "bytes_per_s": 2 * n / (ms / 1e3)}


def loaded(name: str, model) -> LoadedModel:
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=NoTokenizer(model.config.vocab_size),
        device=model.device,
        dtype=model.dtype,
    )


def ours(pair: Pair, prompt: list[int], method, new_tokens: int, engine: str, repeats: int):
    """Our engine's generations after a warm-up (allocations; on a padded engine the graphs of
    the prefill and of every size the iterations use: the warm-up is the whole generation,
    which greedy decoding repeats shape for shape, so no capture or compilation lands in a
    timed run): the GenerationStats of each of `repeats` runs."""
    generate(
        pair, prompt, method, new_tokens if engine in PADDED else min(new_tokens, 8), engine=engine
    )
    return [generate(pair, prompt, method, new_tokens, engine=engine).stats for _ in range(repeats)]


def iteration_split(stats) -> dict:
    """Host time per iteration (IterationStats: the iteration's wall time minus the time inside
    model forwards, bench/host_time.py) and its share of the iteration, pooled over runs."""
    its = [it for s in stats for it in s.iterations]
    wall = sum(it.draft_s + it.target_s + it.verify_s + it.bookkeeping_s for it in its)
    host = sum(host_seconds(s) for s in stats)
    n = len(its)
    return {
        "iterations": n,
        "iteration_ms": 1e3 * wall / n,
        "host_ms_per_iteration": 1e3 * host / n,
        "host_share": host / wall,
        "mean_tree_size": sum(it.tree_size for it in its) / n,
        "draft_forwards_per_iteration": sum(it.draft_forwards for it in its) / n,
        "tokens_per_iteration": sum(it.emitted for it in its) / n,
        "split_ms_per_iteration": {
            k: 1e3 * sum(getattr(it, k) for it in its) / n
            for k in asdict(its[0])
            if k.endswith("_s")
        },
    }


class ForwardCounter:
    """Counts top-level forward calls of a module (a target forward per HF assisted iteration)."""

    def __init__(self, model) -> None:
        self.calls = 0
        self.handle = model.register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        self.calls += 1


def hf_call(model, prompt: torch.Tensor, new_tokens: int, **kw) -> tuple[float, int, int]:
    """Wall seconds of one HF `generate` call, the target forwards and the assistant's (draft)
    forwards it ran."""
    counter = ForwardCounter(model)
    assistant = kw.get("assistant_model")
    drafts = ForwardCounter(assistant) if assistant is not None else None
    try:
        sync(model.device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                prompt,
                max_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
                **kw,
            )
        sync(model.device)
        seconds = time.perf_counter() - t0
    finally:
        counter.handle.remove()
        if drafts:
            drafts.handle.remove()
    assert out.shape[1] == prompt.shape[1] + new_tokens, "HF stopped early"
    return seconds, counter.calls, drafts.calls if drafts else 0


def hf_differential(model, prompt, m1: int, m2: int, repeats: int, **kw) -> dict:
    """HF decoding cost with the prefill cancelled: `repeats` calls each at m1 and m2 new
    tokens, interleaved; dt = the fastest m2 call - the fastest m1 call (load only adds
    time); per token = dt / (m2 - m1), per iteration = dt / (forwards(m2) - forwards(m1)).
    A dt <= 0 (noise larger than the difference) is reported as None with a note."""
    hf_call(model, prompt, m2, **kw)  # warm-up
    calls = [
        (hf_call(model, prompt, m1, **kw), hf_call(model, prompt, m2, **kw)) for _ in range(repeats)
    ]
    dt = min(b[0] for _, b in calls) - min(a[0] for a, _ in calls)
    forwards = [statistics.median(c[i][1] for c in calls) for i in (0, 1)]
    drafts = [statistics.median(c[i][2] for c in calls) for i in (0, 1)]
    its = forwards[1] - forwards[0]
    out = {"new_tokens": [m1, m2], "target_forwards": forwards, "ms_per_token": None}
    if "assistant_model" in kw and its > 0:
        out["draft_forwards_per_iteration"] = (drafts[1] - drafts[0]) / its
    if dt <= 0:
        out["note"] = f"t({m2}) - t({m1}) = {dt * 1e3:.3f} ms: noise exceeds the difference"
        return out
    out["ms_per_token"] = 1e3 * dt / (m2 - m1)
    if its > 0:
        out["ms_per_iteration"] = 1e3 * dt / its
        out["tokens_per_iteration"] = (m2 - m1) / its
    return out


def stub_draft(model, seed: int):
    """A toy model of `model`'s vocabulary for the draft slot of a Pair decoding
    autoregressively (that drafter never runs the draft; generate still gives it a cache)."""
    spec = ARCHS["llama-2-7b"].tiny()
    return build(spec, model.device, model.dtype, seed, vocab=model.config.vocab_size)


def random_prompt(model, n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(model.config.vocab_size, (n,), generator=gen).tolist()


def ar_section(name, model, args, engines: list[str], hf: bool, floor_ms: float, budget, log):
    """Our autoregressive decoding per engine path (and HF greedy): ms per token, x floor."""
    prompt = random_prompt(model, args.prompt_tokens, args.seed)
    pair = Pair(loaded(name, model), loaded("stub", stub_draft(model, args.seed)))
    out = {}

    def ours_ar(pair, prompt, engine):
        stats = ours(pair, prompt, "autoregressive", args.new_tokens, engine, args.repeats)
        split = iteration_split(stats)
        out = {
            "ms_per_token": 1e3 * statistics.median(s.summary()["tpot_s"] for s in stats),
            "host_ms_per_iteration": split["host_ms_per_iteration"],
            "host_share": split["host_share"],
        }
        if engine == "graphs" and model.device.type == "cuda":
            out["replay_ms"] = replay_ms(cached_model(model, engine), args.repeats)
        return out

    for engine in engines:
        r = budget.run(f"{name} autoregressive {engine}", lambda e=engine: ours_ar(pair, prompt, e))
        if r:
            out[f"ours_{engine}"] = r = {**r, "over_floor": r["ms_per_token"] / floor_ms}
            replay = f", graph replay alone {r['replay_ms']:.3f} ms" if r.get("replay_ms") else ""
            log(f"  {name}: ours {engine} {ms_cell(r)} ms/token{replay}")
    x = torch.tensor([prompt], device=model.device)
    r = (
        budget.run(
            f"{name} HF greedy", lambda: hf_differential(model, x, 1, args.new_tokens, args.repeats)
        )
        if hf
        else None
    )
    if r:
        ms = r["ms_per_token"]
        out["hf_greedy"] = r = {**r, "over_floor": ms / floor_ms if ms else None}
        log(f"  {name}: HF greedy {ms_cell(r)} ms/token")
    return out


def replay_ms(lm, repeats: int) -> float | None:
    """The GPU time of a one-token forward's CUDA graph replayed alone (CUDA events, median of
    10 x `repeats`): what an autoregressive step costs with no host work around it."""
    one = [g for k, (g, _, _) in lm._graph_call.graphs.items() if k[0][1] == (1, 1)]
    return time_ms(one[0].replay, warmup=3, reps=10 * repeats, cuda=True) if one else None


def curve(model, name: str, args, engine: str, log):
    """The forward-cost curve (engine/profile.py): fast at --sizes x --contexts, compiled at
    --compiled-sizes x the prompt's context (each size bucket is one compiled graph)."""
    from engine.profile import measure_curve

    compiled = engine == "compiled"  # graphs: every size and context (a capture is cheap)
    c = measure_curve(
        model,
        name,
        sizes=args.compiled_sizes if compiled else args.sizes,
        contexts=[args.prompt_tokens] if compiled else args.contexts,
        engine=engine,
        repeats=args.repeats,
        warmup=1,
        seed=args.seed,
    )
    log(f"  {name}: {engine} forward-cost curve ({len(c.points)} points)")
    return c.to_dict()


def verification_table(curve: dict, context: int) -> list[dict]:
    """Verification cost per tree size: the measured forward over n new tokens at the
    curve's context nearest to `context`, and its ratio to a single-token forward there."""
    contexts = sorted({c for c, _, _ in curve["points"]})
    at = min(contexts, key=lambda c: abs(c - context))
    pts = sorted((n, s) for c, n, s in curve["points"] if c == at)
    one = dict(pts).get(1)
    return [
        {"context": at, "n": n, "ms": 1e3 * s, "over_one": s / one if one else None} for n, s in pts
    ]


def record_methods(record: dict, wanted: str | None) -> dict:
    """Method text -> resolved Method: the record's methods with its parameters (or the
    --methods subset), autoregressive left out (the baseline)."""
    texts = method_texts(record)
    keep = wanted.split(",") if wanted else list(texts)
    if unknown := [t for t in keep if t not in texts]:
        raise ConfigError(f"method {unknown[0]!r} is not in the record ({', '.join(texts)})")
    return {
        t: resolve_method(*texts[t]) for t in keep if t in texts and texts[t][0] != "autoregressive"
    }


def pair_section(name, target, draft, args, record, budget, log) -> dict:
    """Host overhead of every record method on the random pair (--pair-engine), and HF
    assisted generation as shipped and at the record's constant linear k."""
    pair = Pair(loaded(PAIRS[name][0], target), loaded(PAIRS[name][1], draft))
    prompt = random_prompt(target, args.prompt_tokens, args.seed + 1)
    out = {"methods": {}, "hf_assisted": {}}
    for text, method in record_methods(record, args.methods).items():

        def host(method=method):
            stats = ours(pair, prompt, method, args.method_tokens, args.pair_engine, 1)
            return {"engine": args.pair_engine, **iteration_split(stats)}

        row = budget.run(f"{name} {text} host overhead", host)
        if row:
            out["methods"][text] = row
            ms, share = row["host_ms_per_iteration"], row["host_share"]
            log(f"  {name}: {text} host {ms:.3f} ms/iteration ({share:.1%})")
    x = torch.tensor([prompt], device=target.device)
    m1, m2 = max(2, args.new_tokens // 4), args.new_tokens
    hf = budget.run(
        f"{name} HF assisted (as shipped)",
        lambda: hf_differential(target, x, m1, m2, args.repeats, assistant_model=draft),
    )
    if hf:
        out["hf_assisted"]["as_shipped"] = hf
        log(f"  {name}: HF assisted as shipped {ms_cell(hf)} ms/token")
    lin = linear_tau(record)
    k = lin[1] if lin else 4

    def constant_k():
        cfg = draft.generation_config
        keys = ("num_assistant_tokens", "num_assistant_tokens_schedule")
        keys += ("assistant_confidence_threshold",)
        saved = {key: getattr(cfg, key) for key in keys}
        # k draft tokens every iteration: constant schedule, no confidence stop
        cfg.update(**dict(zip(keys, (k, "constant", 0.0))))
        try:
            return hf_differential(target, x, m1, m2, args.repeats, assistant_model=draft)
        finally:
            cfg.update(**saved)

    hf = budget.run(f"{name} HF assisted (constant k={k})", constant_k)
    if hf:
        out["hf_assisted"]["constant_k"] = {"k": k, **hf}
        log(f"  {name}: HF assisted k={k} {ms_cell(hf, 'ms_per_iteration')} ms/iteration")
    return out


def kernel_section(target, args, cuda: bool) -> dict:
    """bench/tree_attention.py's Triton kernel against SDPA with a dense mask, at the target's
    head shape, prefix = each --contexts, 64 to 256 nodes (tiny shapes when not on CUDA)."""
    from bench import tree_attention

    cfg = target.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    argv = ["--heads", str(cfg.num_attention_heads), "--kv-heads", str(cfg.num_key_value_heads)]
    argv += ["--head-dim", str(head_dim), "--seed", str(args.seed)]
    if cuda:
        argv += ["--prefix", *map(str, args.contexts), "--nodes", "64", "128", "256"]
    else:  # interpreter mode, the kernel's smallest head dim: a check that it runs
        argv += ["--prefix", "16", "--nodes", "20", "--warmup", "0", "--reps", "1"]
        argv += ["--head-dim", "64"]
    return tree_attention.run(tree_attention.parse_args(argv), cuda)


class Models:
    """Built models by (name, vocabulary), so a pair's draft with its target's vocabulary is
    its own model, and a model shared by sections is built once."""

    def __init__(self, args, device, dtype) -> None:
        self.args, self.device, self.dtype, self.built = args, device, dtype, {}

    def spec(self, name: str):
        return ARCHS[name].tiny() if self.args.tiny else ARCHS[name]

    def get(self, name: str, vocab: int | None = None):
        key = (name, vocab or self.spec(name).vocab)
        if key not in self.built:  # a seed per architecture: the tiny ones share their shapes
            seed = self.args.seed + list(ARCHS).index(name)
            self.built[key] = build(self.spec(name), self.device, self.dtype, seed, key[1])
        return self.built[key]

    def key(self, name: str, model) -> str:
        """A model's name in the report: a draft padded to its target's vocabulary says so."""
        v = model.config.vocab_size
        return name if v == self.spec(name).vocab else f"{name}@vocab{v}"

    def profile_name(self, name: str, model) -> str:
        """The name its curves are stored under: orch's model of the same shapes where there
        is one (ORCH_TWINS), "<name>-tiny" for toy sizes."""
        key = self.key(name, model)
        if self.args.tiny:
            return f"{key}-tiny"
        return ORCH_TWINS.get(key, key)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_report:
        more = Path(args.curves_from) if args.curves_from else None
        report = from_report(Path(args.from_report), Path(args.record), more)
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(markdown(report))
        return 0
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    cuda = device.type == "cuda"
    engines = (args.engines or ("eager,fast,graphs,compiled" if cuda else "eager,fast")).split(",")
    args.engines = [e for e in engines if e]
    if "compiled" in args.engines:  # one graph per model, size bucket and cache: many
        for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, key):
                setattr(torch._dynamo.config, key, 1024)
    record_path = Path(args.record)
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    try:  # unknown --methods or record parameters: one line, before any model is built
        record_methods(record, args.methods)
    except (ConfigError, KeyError) as e:
        sys.exit(f"error: --methods / {record_path}: {e}")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    budget = Budget(args.time_limit_s, log)
    from engine.profile import device_info

    report = {
        "bench": "gpu",
        "command": "python "
        + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
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
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1) + "\n")
        if profile_out:
            curves = [c for m in report["models"].values() for c in m.get("curves", {}).values()]
            profile = {"bench": "gpu", "device": report["device"], "curves": curves}
            profile_out.parent.mkdir(parents=True, exist_ok=True)
            profile_out.write_text(json.dumps(profile, indent=1) + "\n")

    mib = args.copy_mib or (8 if args.tiny else 1024 if cuda else 64)
    report["bandwidth"] = bw = copy_bandwidth(device, mib, max(args.repeats, 5))
    log(f"copy bandwidth {bw['bytes_per_s'] / 1e9:.1f} GB/s ({mib} MiB)")
    save()
    models = Models(args, device, dtype)
    first = [e for e in args.engines if e != "compiled"]

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
            ar_section(name, model, args, first, True, entry["floor_ms_per_token"], budget, log)
        )
        for engine in ("fast", "graphs"):
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
        if engine in PADDED:  # our autoregressive host time on that path, for h_AR
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
    if "compiled" in args.engines:
        for name in sorted(args.models, key=lambda n: ARCHS[n].hidden * ARCHS[n].layers):
            model = budget.run(f"building {name}", lambda n=name: models.get(n))
            if model is None:
                continue
            padded_ar(name, model, "compiled")
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
