"""GPU benchmark: Triton tree attention vs PyTorch SDPA with a dense additive mask.

Llama-like shapes (H=32, Hkv=8, D=128, fp16, B=1), prefix 2k and 8k, random bushy trees
of 64 to 2048 nodes (BFS numbered, depth drawn in [8, 16]), each as drafted and after the
DySpec DFS reorder (App. C; Table 5 of the paper is the same experiment without a prefix).

    python bench/tree_attention.py [--out bench/results/tree_attention.json]
    python bench/tree_attention.py --cpu-smoke   # tiny run under TRITON_INTERPRET=1,
                                                 # writes bench/results/tree_attention_smoke.json

Timing: CUDA events around each call, after warmup; the median of --reps calls. Host-side
mask preparation (the kernel's block tables, SDPA's dense mask) runs once per tree in
the engine and is reported separately, not inside the attention time. SDPA gets K/V
already expanded to H heads (transformers does that expansion inside its attention call;
here it is excluded, which favours the baseline). Without CUDA the script says so and
exits 0 with no numbers unless --cpu-smoke is given; smoke numbers are interpreter-mode
wall clock, a check that the script runs end to end, not performance.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        default=None,
        help="JSON path (default bench/results/tree_attention.json, *_smoke.json with --cpu-smoke)",
    )
    ap.add_argument("--prefix", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="tiny interpreter-mode run on CPU (not performance)",
    )
    return ap.parse_args(argv)


def time_ms(fn, warmup: int, reps: int, cuda: bool) -> float:
    """Median milliseconds of ``fn()``: CUDA events per call on GPU, perf_counter on CPU."""
    import torch

    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def host_ms(fn, cuda: bool) -> float:
    """Wall clock of one host-side preparation call, synchronised on GPU."""
    import torch

    fn()  # first call pays allocator / lazy-init costs
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def run(args: argparse.Namespace, cuda: bool) -> dict:
    import torch
    import torch.nn.functional as F
    import triton

    from tests.trees import random_bushy_tree
    from tree_kernels.block_mask import block_visibility, tree_masks
    from tree_kernels.reference import tree_attention_mask
    from tree_kernels.reorder import dfs_order, inverse_permutation, permute_tree
    from tree_kernels.triton_tree_attention import tree_attention

    device = "cuda" if cuda else "cpu"
    dtype = torch.float16
    h, hkv, d = args.heads, args.kv_heads, args.head_dim
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for prefix in args.prefix:
        for n in args.nodes:
            depth = int(torch.randint(8, 17, (1,), generator=gen))
            parents = random_bushy_tree(n, depth, gen)
            q = torch.randn(1, h, n, d, generator=gen).to(device, dtype)  # [B, H, N, D]
            k = torch.randn(1, hkv, prefix + n, d, generator=gen).to(
                device, dtype
            )  # [B, Hkv, P + N, D]
            v = torch.randn(1, hkv, prefix + n, d, generator=gen).to(device, dtype)

            # Baseline: dense additive mask, K/V expanded to H heads beforehand.
            dense_prep = host_ms(
                lambda: tree_attention_mask(parents.to(device), prefix, dtype), cuda
            )
            mask = tree_attention_mask(parents.to(device), prefix, dtype)[
                None, None
            ]  # [1, 1, N, P + N]
            k_full = k.repeat_interleave(h // hkv, dim=1)  # [B, H, P + N, D]
            v_full = v.repeat_interleave(h // hkv, dim=1)
            sdpa = lambda: F.scaled_dot_product_attention(q, k_full, v_full, attn_mask=mask)  # noqa: E731
            expected = sdpa()
            sdpa_ms = time_ms(sdpa, args.warmup, args.reps, cuda)

            for reorder in (False, True):
                perm = dfs_order(parents) if reorder else torch.arange(n)
                tree = permute_tree(parents, perm)
                keys = torch.cat([torch.arange(prefix), prefix + perm]).to(device)
                qr, kr, vr = q[:, :, perm.to(device)], k[:, :, keys], v[:, :, keys]
                prep_ms = host_ms(lambda: tree_masks(tree, device), cuda)
                masks = tree_masks(tree, device)
                call = lambda: tree_attention(qr, kr, vr, tree, masks=masks)  # noqa: E731
                out = call()[:, :, inverse_permutation(perm).to(device)]
                kernel_ms = time_ms(call, args.warmup, args.reps, cuda)
                visible = block_visibility(tree)
                rows.append(
                    {
                        "prefix": prefix,
                        "nodes": n,
                        "depth": depth,
                        "reorder": reorder,
                        "visible_tree_blocks": int(visible.sum()),
                        "tree_blocks": visible.numel(),
                        "triton_ms": kernel_ms,
                        "sdpa_ms": sdpa_ms,
                        "speedup": sdpa_ms / kernel_ms,
                        "triton_mask_prep_ms": prep_ms,
                        "sdpa_mask_prep_ms": dense_prep,
                        "max_abs_diff_vs_sdpa": float((out.float() - expected.float()).abs().max()),
                    }
                )
                print(
                    f"  P={prefix} N={n} reorder={reorder}: {kernel_ms:.3f} ms vs sdpa {sdpa_ms:.3f} ms",
                    file=sys.stderr,
                )
    return {
        "mode": "cuda"
        if cuda
        else "interpreter-smoke (TRITON_INTERPRET=1, CPU wall clock, NOT performance)",
        "device": torch.cuda.get_device_name()
        if cuda
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "shape": {"batch": 1, "heads": h, "kv_heads": hkv, "head_dim": d, "dtype": "float16"},
        "timing": {
            "warmup": args.warmup,
            "reps": args.reps,
            "statistic": "median",
            "clock": "cuda events" if cuda else "perf_counter",
        },
        "seed": args.seed,
        "results": rows,
    }


def markdown(report: dict) -> str:
    lines = [
        f"Tree attention, {report['mode']}, {report['device']}: "
        f"H={report['shape']['heads']} Hkv={report['shape']['kv_heads']} D={report['shape']['head_dim']} fp16",
        "",
        "| prefix | nodes | reorder | visible / tree blocks | triton ms | sdpa ms | speedup | max abs diff |",
        "|---:|---:|:---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['prefix']} | {r['nodes']} | {'DFS' if r['reorder'] else 'BFS'} | "
            f"{r['visible_tree_blocks']} / {r['tree_blocks']} | {r['triton_ms']:.3f} | {r['sdpa_ms']:.3f} | "
            f"{r['speedup']:.2f}x | {r['max_abs_diff_vs_sdpa']:.1e} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cpu_smoke:
        # Must be set before triton is imported: it picks the interpreter at decoration time.
        os.environ["TRITON_INTERPRET"] = "1"
        args.prefix, args.nodes = [40], [130]
        args.heads, args.kv_heads, args.head_dim = 4, 1, 64
        args.warmup, args.reps = 1, 3
    sys.path.insert(0, str(ROOT))
    import torch

    cuda = torch.cuda.is_available() and not args.cpu_smoke
    if not cuda and not args.cpu_smoke:
        print(
            "no CUDA device: GPU timings not measured (still owed); --cpu-smoke runs an interpreter-mode check"
        )
        return 0
    report = run(args, cuda)
    default = "tree_attention_smoke.json" if args.cpu_smoke else "tree_attention.json"
    out = Path(args.out) if args.out else ROOT / "bench/results" / default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
