"""bench.gpu's report as Markdown tables (the JSON report's structure is __main__.py's), and
the one-line form of an error its programs list.

The header line still reads "bench/gpu.py on <device>", as every stored run's log does."""

from __future__ import annotations

from bench.tree_attention import markdown as kernel_table


def error_line(e: Exception) -> str:
    """An exception as one line of a report: its type and its message's first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def ms_cell(r: dict | None, key: str = "ms_per_token") -> str:
    if not r or r.get(key) is None:
        return "-"
    x = f" ({r['over_floor']:.2f}x)" if r.get("over_floor") else ""
    return f"{r[key]:.3f}{x}"


def lean_table(report: dict) -> list[str]:
    """Autoregressive decoding on our own forward (ENGINE+lean) beside Hugging Face's, per
    model and engine, when the run measured it."""
    rows = []
    for name, m in report["models"].items():
        a = m["autoregressive"]
        for key in (k for k in a if k.endswith("+lean")):
            hf, ours = a.get(key.removesuffix("+lean")), a[key]
            ratio = f"{hf['ms_per_token'] / ours['ms_per_token']:.2f}x" if hf else "-"
            engine = key.removeprefix("ours_").removesuffix("+lean")
            rows.append(f"| {name} | {engine} | {ms_cell(hf)} | {ms_cell(ours)} | {ratio} |")
    if not rows:
        return []
    return [
        "",
        "Autoregressive decoding on our forward (engine/runtime/lean.py), ms per token (x floor):",
        "",
        "| model | engine | Hugging Face forward | lean forward | lean speedup |",
        "|---|---|---:|---:|---:|",
        *rows,
    ]


def markdown(report: dict) -> str:
    """The report as Markdown tables (ms; ratios in parentheses)."""
    d, bw = report["device"], report["bandwidth"]
    lines = [
        f"bench/gpu.py on {d['device_name']} ({d['driver'] or 'no driver'}), {report['dtype']}"
        f"{', TINY configs' if report['tiny'] else ''}; torch {d['torch']}, transformers "
        f"{d['transformers']}; copy bandwidth {bw['bytes_per_s'] / 1e9:.1f} GB/s",
        "",
        "Autoregressive decoding, ms per token (x bandwidth floor; goal on a GPU <= 1.25x):",
        "",
        "| model | params | floor | ours eager | ours fast | ours graphs | ours compiled "
        "| HF greedy | host share (fast) | graphs, synchronised timing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in report["models"].items():
        a = m["autoregressive"]
        share = a.get("ours_fast", {}).get("host_share")
        synced = ms_cell(a.get("ours_graphs"), "ms_per_token_synchronised")
        lines.append(
            f"| {name} | {m['params'] / 1e6:.1f} M | {m['floor_ms_per_token']:.3f} | "
            + " | ".join(
                ms_cell(a.get(f"ours_{k}" if k != "hf_greedy" else k))
                for k in ("eager", "fast", "graphs", "compiled", "hf_greedy")
            )
            + f" | {'-' if share is None else f'{share:.1%}'} | {synced} |"
        )
    lines += lean_table(report)
    lines += [
        "",
        "Verification: one target forward over n tree nodes, ms (x n=1), at the prompt's context:",
        "",
    ]
    for name, m in report["models"].items():
        for engine, rows in m.get("verification", {}).items():
            cells = [f"n={r['n']}: {r['ms']:.3f} ({r['over_one']:.2f}x)" for r in rows]
            lines.append(f"- {name} {engine} (C={rows[0]['context']}): " + ", ".join(cells))
    for pname, p in report["pairs"].items():
        engine = next((r["engine"] for r in p["methods"].values()), "fast")
        lines += [
            "",
            f"Pair {pname}, random weights, engine {engine}: host time per iteration (goal on a GPU <= 10%):",
            "",
            "| method | tree size | draft forwards | iteration ms | host ms | host share "
            "| iteration ms, synchronised timing |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for t, r in p["methods"].items():
            synced = ms_cell(r.get("synchronised"), "iteration_ms")
            lines.append(
                f"| {t} | {r['mean_tree_size']:.1f} | {r['draft_forwards_per_iteration']:.1f} "
                f"| {r['iteration_ms']:.3f} | {r['host_ms_per_iteration']:.3f} | {r['host_share']:.1%} "
                f"| {synced} |"
            )
        hf = p["hf_assisted"]
        shipped, const = hf.get("as_shipped"), hf.get("constant_k")
        lines += [
            "",
            f"HF assisted: as shipped {ms_cell(shipped)} ms/token "
            f"({(shipped or {}).get('tokens_per_iteration', 0):.2f} tokens/iteration on random weights); "
            + (
                f"constant k={const['k']}: {ms_cell(const, 'ms_per_iteration')} ms/iteration"
                if const
                else "constant k: -"
            ),
        ]
        pred = p.get("prediction")
        if not pred:
            continue
        if "hf_assisted" in pred:
            h = pred["hf_assisted"]
            lines.append(
                f"HF assisted predicted: {h['ms_per_iteration']:.3f} ms/iteration / "
                f"{h['tokens_per_iteration']:.2f} tokens/iteration ({h['record_method']} in the record) "
                f"= {h['ms_per_token']:.3f} ms/token"
            )
        if not pred.get("available"):
            lines.append(
                f"Method predictions not available: {pred.get('reason', 'nothing predicted')}"
            )
            continue
        lines += [
            "",
            f"Predicted on this device from the CPU record {report['record']} (goal: best tree method >= 1.8x HF assisted):",
            "",
            "| method | tokens/iter | ms/token | speedup vs our AR | vs HF assisted |",
            "|---|---:|---:|---:|---:|",
        ]
        for t, r in pred["methods"].items():
            if "ms_per_token" not in r:
                lines.append(f"| {t} | - | - | - | {r.get('note', '')} |")
                continue
            vs = r.get("vs_hf_assisted")
            lines.append(
                f"| {t} | {r['tokens_per_iteration']:.2f} | {r['ms_per_token']:.3f} "
                f"| {r['speedup_vs_ar']:.2f}x | {'-' if vs is None else f'{vs:.2f}x'} |"
            )
        if "best_tree" in pred:
            b = pred["best_tree"]
            vs = b.get("vs_hf_assisted")
            lines.append(
                f"\nBest tree method: {b['method']}, {'-' if vs is None else f'{vs:.2f}x'} HF assisted"
            )
    k = report.get("kernel")
    if k:
        lines += ["", "Tree attention (bench/tree_attention.py):", ""]
        if "skipped" in k:
            lines.append(k["skipped"])
        else:
            lines += [kernel_table(r) + "\n" for r in k.values()]
    if report["skipped"]:
        lines += ["", "Skipped:", *(f"- {s}" for s in report["skipped"])]
    if report["errors"]:
        lines += ["", "Errors (tracebacks on stderr):", *(f"- {s}" for s in report["errors"])]
    return "\n".join(lines)
