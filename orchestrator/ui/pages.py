"""The dashboard's HTML: one small shell per page that loads the vendored script and style
(static/) and names what to show; the script fills it from the JSON API and keeps it live.
Every text put into a page is escaped; the database is named by its redacted URL only."""

from __future__ import annotations

import html
import json
from http import HTTPStatus
from urllib.parse import quote

NAV = '<a href="/">sweeps</a> · <a href="/compare">compare two sweeps</a>'


def _shell(title: str, db: str, page: str, data: dict, body: str = "") -> str:
    state = html.escape(json.dumps({"page": page, **data}), quote=True)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · orch ui</title>
<link rel="stylesheet" href="/static/style.css">
</head><body>
<header><b>orch ui</b> <nav>{NAV}</nav>
<span class="db" title="read-only">{html.escape(db)} · read-only</span>
<span id="live" class="live"></span></header>
<main id="app" data-state="{state}">{body}<p class="loading">loading…</p></main>
<script src="/static/charts.js"></script>
<script src="/static/core.js"></script>
<script src="/static/sweep.js"></script>
<script src="/static/pages.js"></script>
</body></html>
"""


def sweeps_page(db: str) -> str:
    return _shell("sweeps", db, "sweeps", {})


def sweep_page(db: str, name: str) -> str:
    return _shell(f"sweep {name}", db, "sweep", {"name": name})


def trial_page(db: str, trial_id: int) -> str:
    return _shell(f"trial {trial_id}", db, "trial", {"id": trial_id})


def compare_page(db: str) -> str:
    return _shell("compare two sweeps", db, "compare", {})


def report_page(report: str, name: str) -> str:
    """The paper report's HTML, its figures fetched from /sweep/NAME/report/img/."""
    back = f'<p><a href="/sweep/{quote(name, safe="")}">← sweep {html.escape(name)}</a></p>'
    return report.replace('src="img/', 'src="report/img/').replace("<body>", "<body>" + back, 1)


def error_page(status: int, message: str) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{status} {phrase} · orch ui</title>
<link rel="stylesheet" href="/static/style.css"></head><body>
<header><b>orch ui</b> <nav>{NAV}</nav></header>
<main><h1>{status} {phrase}</h1><p class="error" id="error">{html.escape(message)}</p></main>
</body></html>
"""
