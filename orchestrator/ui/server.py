"""`orch ui`'s HTTP server: the standard library's threading HTTP server over a read-only
Reader (reader.py). GET and HEAD only: every other method answers 405. Routes:

    /                          the sweeps page          /api/sweeps        its JSON
    /sweep/NAME                a sweep's page           /api/sweep/NAME    its JSON
                                                        /api/sweep/NAME/version  (polled)
                                                        /api/sweep/NAME/predicted (cost model)
    /sweep/NAME/export.FMT     orch export's bytes (csv, json, parquet), ?where=...
    /sweep/NAME/report         the paper report (its figures under report/img/)
    /trial/ID                  a trial's page           /api/trial/ID      its JSON
    /compare?a=A&b=B           two sweeps compared      /api/compare?a=A&b=B
    /static/FILE               the page's JS and CSS (vendored in the package)

Page state (filters, columns, metric, selection, zoom) is in the URL's query string. Bad input
(a bad --where, an unknown metric) is a 400 page naming it, an unknown sweep or trial 404, an
unreachable database 503; never a traceback, and never the database password (every line
shown or logged names the database by its redacted URL).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from db.session import scrub
from engine.config import ConfigError
from orchestrator.store import StoreError
from orchestrator.ui import pages
from orchestrator.ui.compare_data import compare_sweeps
from orchestrator.ui.downloads import TYPES, export_bytes, report_html
from orchestrator.ui.overview import sweeps
from orchestrator.ui.predicted import predicted
from orchestrator.ui.reader import Reader, version_of
from orchestrator.ui.sweep_data import paged, sweep_page
from orchestrator.ui.trial_data import NotFound, trial_page

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}
ALLOW = "GET, HEAD"
WARM_SWEEPS = 8  # the most recent sweeps whose pages are built at start


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Handler(BaseHTTPRequestHandler):
    server_version = "orch-ui"
    reader: Reader  # set on the subclass make_server builds
    log = sys.stderr

    # ---------------------------------------------------------------- methods
    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _refuse(self) -> None:
        body = pages.error_page(405, "read-only: this dashboard answers GET and HEAD only")
        self._send(405, body.encode(), "text/html; charset=utf-8", extra={"Allow": ALLOW})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    # ---------------------------------------------------------------- routing
    def _answer(self, head: bool) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        qs = parse_qs(url.query, keep_blank_values=False)
        api = bool(parts) and parts[0] == "api"
        try:
            status, body, ctype, extra = self._route(parts, qs)
        except HTTPError as e:
            status, body, ctype, extra = self._error(e.status, str(e), api)
        except NotFound as e:
            status, body, ctype, extra = self._error(404, str(e), api)
        except StoreError as e:
            text = str(e)
            code = 404 if text.startswith("no sweep named") else 503
            status, body, ctype, extra = self._error(code, text, api)
        except ConfigError as e:  # QueryError: a bad filter, metric or column
            status, body, ctype, extra = self._error(400, str(e), api)
        except Exception as e:  # noqa: BLE001 - one line, never a traceback, to the browser
            line = f"{type(e).__name__}: {e}".splitlines()[0]
            self.log_message("error on %s: %s", url.path, self._scrub(line))
            status, body, ctype, extra = self._error(500, "internal error: " + line, api)
        self._send(status, body, ctype, extra, head)

    def _route(self, parts: list[str], qs: dict[str, list[str]]):
        r = self.reader
        where = tuple(w for w in qs.get("where", []) if w.strip())
        one = {k: v[-1] for k, v in qs.items()}
        match parts:
            case []:
                return self._html(pages.sweeps_page(r.display_url))
            case ["api", "sweeps"]:
                return self._json(sweeps(r))
            case ["sweep", name]:
                r.store.sweep(name)  # 404 for an unknown sweep
                if where or "columns" in one or "best_by" in one:  # a bad filter: a 400 page
                    sweep_page(r, name, where, one.get("columns"), one.get("best_by", "speedup"))
                return self._html(pages.sweep_page(r.display_url, name))
            case ["api", "sweep", name]:
                best_by = one.get("best_by", "speedup")
                answer = sweep_page(r, name, where, one.get("columns"), best_by)
                answer = paged(answer, _int(one.get("tp")), _int(one.get("cp")))
                info = r.store.sweep(name)  # annotations change no signature: read each time
                answer.update(tags=info.get("tags") or [], sweep_note=info.get("note") or "")
                return self._json(answer)
            case ["api", "sweep", name, "predicted"]:
                return self._json(predicted(r, name))
            case ["api", "sweep", name, "version"]:
                return self._json({"version": version_of(r.signature(name))})
            case ["sweep", name, file] if file.startswith("export."):
                fmt = file.removeprefix("export.")
                data = export_bytes(r, name, fmt, where)
                disposition = f'attachment; filename="{_safe(name)}.{fmt}"'
                return 200, data, TYPES[fmt], {"Content-Disposition": disposition}
            case ["sweep", name, "report"]:
                r.store.sweep(name)
                html, _ = report_html(r, name)
                return self._html(pages.report_page(html, name))
            case ["sweep", name, "report", "img", file]:
                _, images = report_html(r, name)
                if file not in images:
                    raise HTTPError(404, f"no figure {file!r} in the report of {name!r}")
                return 200, images[file], "image/png", {}
            case ["trial", tid]:
                trial_page(r, _trial_id(tid))  # 404 for an unknown trial
                return self._html(pages.trial_page(r.display_url, _trial_id(tid)))
            case ["api", "trial", tid]:
                return self._json(trial_page(r, _trial_id(tid)))
            case ["compare"]:
                return self._html(pages.compare_page(r.display_url))
            case ["api", "compare"]:
                a, b = one.get("a"), one.get("b")
                if not a or not b:
                    raise HTTPError(400, "name two sweeps: /compare?a=SWEEP&b=SWEEP")
                return self._json(compare_sweeps(r, a, b, where))
            case ["static", file] if (STATIC / file).is_file() and "/" not in file:
                path = STATIC / file
                ctype = STATIC_TYPES.get(path.suffix, "application/octet-stream")
                return 200, path.read_bytes(), ctype, {"Cache-Control": "max-age=300"}
        raise HTTPError(404, f"no page {'/' + '/'.join(parts)}")

    # ---------------------------------------------------------------- answers
    def _html(self, text: str):
        return 200, text.encode("utf-8"), "text/html; charset=utf-8", {}

    def _json(self, data: Any):
        text = json.dumps(data, default=str, allow_nan=False)
        return 200, text.encode("utf-8"), "application/json", {"Cache-Control": "no-store"}

    def _error(self, status: int, message: str, api: bool):
        message = self._scrub(message)
        if api:
            body = json.dumps({"error": message, "status": status}).encode()
            return status, body, "application/json", {}
        return status, pages.error_page(status, message).encode(), "text/html; charset=utf-8", {}

    def _send(self, status, body: bytes, ctype: str, extra=None, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _scrub(self, text: str) -> str:
        return scrub(text, self.reader.store.url)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's name
        line = self._scrub(format % args)
        self.log.write(f"{self.address_string()} - {line}\n")
        self.log.flush()


def _trial_id(text: str) -> int:
    if not text.isdigit():
        raise HTTPError(404, f"no trial {text!r} (trial ids are numbers)")
    return int(text)


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def make_server(reader: Reader, host: str, port: int, log=None) -> ThreadingHTTPServer:
    """A server bound to host:port (ConfigError, one line, when the port is taken)."""
    handler = type("BoundHandler", (Handler,), {"reader": reader, "log": log or sys.stderr})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    server.daemon_threads = True
    return server


def warm(reader: Reader, say=print) -> None:
    """Build the sweeps page's and the recent sweeps' default answers once, so that the first
    visitor does not wait for the results frames (their bootstrap intervals take seconds on a
    sweep of thousands of trials)."""
    try:
        listed = sweeps(reader)["sweeps"]
        for s in listed[:WARM_SWEEPS]:
            sweep_page(reader, s["name"], (), None, "speedup")
    except Exception as e:  # noqa: BLE001 - a page that fails says why when it is asked for
        say(reader_line(reader, f"orch ui: warming the cache stopped: {e}"))


def reader_line(reader: Reader, text: str) -> str:
    return scrub(text.splitlines()[0] if text else text, reader.store.url)


def serve(url: str | None, host: str, port: int, say=print, ready: threading.Event | None = None):
    """Run the dashboard over database `url` until interrupted."""
    reader = Reader(url)
    server = make_server(reader, host, port)
    shown = f"[{host}]" if ":" in host else host
    say(f"orch ui: {reader.display_url} (read-only) at http://{shown}:{server.server_port}/")
    threading.Thread(target=warm, args=(reader, say), daemon=True).start()
    if ready is not None:
        ready.set()
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        say("orch ui: stopped")
    finally:
        server.server_close()
        reader.close()
