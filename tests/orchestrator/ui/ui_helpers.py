"""What orch ui's tests share: a database holding examples/quickstart_tiny.yaml's results
(run by `orch submit` in a fresh process), `orch ui` running over it in another, a headless
Chromium (Debian's, through playwright), and plain HTTP requests."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.orchestrator.orch_helpers import REPO, orch

CHROMIUM = os.environ.get("ORCH_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
QUICKSTART = REPO / "examples" / "quickstart_tiny.yaml"
SWEEP = "quickstart-tiny"
# a second, smaller sweep the live test runs in two halves while its page is open
LIVE_SWEEP = """\
name: live-tiny
pairs:
  - {target: tiny-llama, draft: tiny-llama-draft}
dataset: {name: spec_bench, prompts: 2, prompt_tokens: 32}
sampling: {temperature: 0.0}
max_new_tokens: 16
repeats: 1
warmup: 0
methods:
  - name: autoregressive
  - name: linear
    grid:
      k: [2, 3]
"""


def submit(url: str, path: Path, *extra: str) -> subprocess.CompletedProcess:
    r = orch("submit", str(path), "--executor", "local", "--db", url, *extra, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


class UIServer:
    """`orch ui --db URL --port 0` in a fresh process; `base` is where it listens."""

    def __init__(self, url: str, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.log_path = log
        self._log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "ui", "--db", url, "--port", "0"],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"at (http://\S+/)", log.read_text())
            if m:
                self.base = m.group(1).rstrip("/")
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"orch ui exited: {log.read_text()}")
            time.sleep(0.2)
        raise RuntimeError(f"orch ui did not start: {log.read_text()}")

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def request(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, bytes, dict]:
    """(status, body, headers) of one HTTP request; an error status is returned, not raised."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def file_digest(url: str) -> str | None:
    """sha256 of a SQLite database's files (main, -wal, -shm absent or not); None for others."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    h = hashlib.sha256()
    for p in (path, Path(f"{path}-wal")):
        h.update(p.read_bytes() if p.exists() else b"-")
    return h.hexdigest()


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
