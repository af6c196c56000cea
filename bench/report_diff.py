"""Do two `orch report` outputs agree once the measured times are masked?

Two runs of the same trials (for instance into SQLite and into Postgres) commit the same
tokens, so tokens per iteration, acceptance, tree sizes and certificates must match, while
every measured time (speedup, tokens/s, seconds) differs from run to run. This script masks
the table cells of those measured-time columns with `*` and prints a unified diff of the
rest.

A column is masked when its header names a measured time (speedup, tokens/s, throughput,
time, wall, latency, seconds, ms, s). A table under a heading that names one (the report's
"### tokens/s" and "### speedup" sections) has every cell but its first column masked. Rows
of each table are compared sorted (--keep-order: as written), since several tables list
their rows by a measured value.

    python -m bench.report_diff REPORT_A REPORT_B [--keep-order] [--mask REGEX ...]

REPORT_A and REPORT_B are report folders (holding report.md) or Markdown files. Exit 0 when
the masked reports are identical, 1 when they differ (the diff is printed).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

MASK = "*"
# a header cell (markdown escapes removed, lower case) that names a measured time
_TIME = re.compile(
    r"speedup|tokens/s\b|tok/s|throughput|time|wall|latency|seconds"
    r"|(^|\s)(s|ms)$|\((s|ms)\)|_s$|_ms$"
)
# a heading that names one (no bare unit: "# Sweep s" is a name)
_TIME_HEADING = re.compile(r"speedup|tokens/s\b|tok/s|throughput|time|wall|latency|seconds")


def is_time_header(cell: str) -> bool:
    return bool(_TIME.search(cell.replace("\\", "").strip().lower()))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", line.strip()))


def mask(text: str, keep_order: bool = False, extra: list[str] = ()) -> list[str]:
    """The report's lines with measured-time table cells (and those of the columns whose
    header matches one of the `extra` regular expressions) replaced by `*`."""
    extra_re = [re.compile(x, re.I) for x in extra]
    out: list[str] = []
    lines = text.splitlines()
    heading_is_time = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading_is_time = bool(_TIME_HEADING.search(line.replace("\\", "").lower()))
        if _is_row(line) and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            header = _cells(line)
            masked = [
                (heading_is_time and j > 0)
                or is_time_header(h)
                or any(x.search(h.replace("\\", "")) for x in extra_re)
                for j, h in enumerate(header)
            ]
            out += [line, lines[i + 1]]
            i += 2
            rows = []
            while i < len(lines) and _is_row(lines[i]):
                cells = _cells(lines[i])
                cells = [MASK if j < len(masked) and masked[j] else c for j, c in enumerate(cells)]
                rows.append("| " + " | ".join(cells) + " |")
                i += 1
            out += rows if keep_order else sorted(rows)
            continue
        out.append(line)
        i += 1
    return out


def _report(path: Path) -> Path:
    return path / "report.md" if path.is_dir() else path


def diff(a: Path, b: Path, keep_order: bool = False, extra: list[str] = ()) -> list[str]:
    """Unified diff lines of the two masked reports (empty when identical)."""
    a, b = _report(a), _report(b)
    ma = mask(a.read_text(), keep_order, extra)
    mb = mask(b.read_text(), keep_order, extra)
    return list(difflib.unified_diff(ma, mb, str(a), str(b), lineterm=""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="report folder (with report.md) or Markdown file")
    p.add_argument("b", type=Path, help="report folder (with report.md) or Markdown file")
    p.add_argument("--keep-order", action="store_true", help="compare table rows as written")
    p.add_argument(
        "--mask",
        action="append",
        default=[],
        metavar="REGEX",
        help="also mask the columns whose header matches REGEX (e.g. 'measured on' to compare "
        "runs on different hosts); repeatable",
    )
    args = p.parse_args(argv)
    lines = diff(args.a, args.b, args.keep_order, args.mask)
    if not lines:
        print("identical after masking measured-time cells")
        return 0
    try:
        print("\n".join(lines))
    except BrokenPipeError:  # piped into head
        pass
    changed = sum(1 for x in lines if x[:1] in "+-" and x[:3] not in ("+++", "---"))
    print(f"\n{changed} changed lines after masking", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
