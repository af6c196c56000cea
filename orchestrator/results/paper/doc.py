"""The document `orch report` writes: a list of blocks rendered twice, as Markdown and as one
self-contained HTML page (inline style, figures by relative path), so both say the same.

Blocks are plain tuples: ("h1" | "h2" | "h3", text), ("p", text), ("pre", text),
("table", Table), ("img", relative path, caption). Text is plain (no markup): the renderers
escape it, so a parameter value or an error message cannot break either format.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

Block = tuple


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def table(columns, rows) -> Block:
    return ("table", Table(tuple(columns), tuple(tuple(r) for r in rows)))


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + _md(b[1]))
        elif kind == "p":
            out.append(_md(b[1]))
        elif kind == "pre":
            out.append("```text\n" + b[1].replace("```", "'''") + "\n```")
        elif kind == "table":
            t: Table = b[1]
            lines = ["| " + " | ".join(_cell(c) for c in t.columns) + " |"]
            lines.append("|" + "|".join("---" for _ in t.columns) + "|")
            lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in t.rows]
            out.append("\n".join(lines))
        elif kind == "img":
            out.append(f"![{_md(b[2])}]({b[1]})\n\n*{_md(b[2])}*")
        else:
            raise ValueError(f"unknown block {kind!r}")
    return "\n\n".join(out) + "\n"


def to_html(blocks: list[Block], title: str) -> str:
    body: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{html.escape(b[1])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{html.escape(b[1])}</p>")
        elif kind == "pre":
            body.append(f"<pre>{html.escape(b[1])}</pre>")
        elif kind == "table":
            t: Table = b[1]
            head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>\n"
                for r in t.rows
            )
            body.append(
                f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody>\n</table>"
            )
        elif kind == "img":
            src, cap = html.escape(b[1], quote=True), html.escape(b[2])
            body.append(
                f'<figure><img src="{src}" alt="{html.escape(b[2], quote=True)}">'
                f"<figcaption>{cap}</figcaption></figure>"
            )
        else:
            raise ValueError(f"unknown block {kind!r}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


_STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:0.85em}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    "th{background:#f0f0f0}pre{background:#f7f7f7;padding:0.6em;white-space:pre-wrap}"
    "img{max-width:100%}figcaption{font-size:0.85em;color:#555}"
)


def _md(text: str) -> str:
    """Plain text as Markdown: characters Markdown would read as markup are escaped."""
    for ch in ("\\", "`", "*", "_", "[", "]", "<", ">", "#", "|"):
        text = text.replace(ch, "\\" + ch)
    return text


def _cell(text: str) -> str:
    return _md(text).replace("\n", " ")
