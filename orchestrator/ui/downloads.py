"""Downloads: a sweep's rows exactly as `orch export --format csv|json|parquet --sweep NAME
[--where ...]` writes them (the same frame, filters and writer: orchestrator.results), and
its paper report (orchestrator.results.paper write_report into a temporary folder)."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from orchestrator.extras import require
from orchestrator.results import QueryError, apply_where, export_frame, write_export
from orchestrator.results.certificates import COLUMNS as CERTIFICATE_COLUMNS
from orchestrator.ui.reader import Reader

TYPES = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "parquet": "application/vnd.apache.parquet",
}


class _Out:
    """What write_export writes to when it is given no file: text, or bytes on .buffer."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def write(self, text: str) -> None:
        self.buffer.write(text.encode("utf-8"))


def export_bytes(reader: Reader, name: str, fmt: str, where: tuple[str, ...]) -> bytes:
    """The bytes `orch export --format FMT --sweep NAME --where ...` prints to stdout."""
    if fmt not in TYPES:
        raise QueryError(f"unknown export format {fmt!r} (known: {', '.join(TYPES)})")
    if fmt == "parquet":
        require("pyarrow", "a Parquet download")
    # as orch export loads it: per-prompt data for the intervals, no certificate columns
    df = reader.frame(name)
    if df is None:
        raise QueryError(f"no finished trials of sweep {name!r} in {reader.display_url}")
    df = df.drop(columns=list(CERTIFICATE_COLUMNS), errors="ignore")
    out = _Out()
    write_export(export_frame(apply_where(df, where), False), fmt, None, out)
    return out.buffer.getvalue()


def report_html(reader: Reader, name: str) -> tuple[str, dict[str, bytes]]:
    """The paper report of sweep `name` (report.html) and its figures by file name, written
    into a temporary folder that is removed afterwards; cached until the sweep changes."""

    def build():
        require("matplotlib", "the paper report")
        from orchestrator.results.paper import write_report  # lazy: matplotlib, torch

        with tempfile.TemporaryDirectory(prefix="orch-ui-report-") as tmp:
            write_report(reader.store, name, tmp)
            root = Path(tmp)
            html = (root / "report.html").read_text(encoding="utf-8")
            images = {p.name: p.read_bytes() for p in (root / "img").glob("*.png")}
        return html, images

    return reader.cached(name, "report", build, hold=False)
