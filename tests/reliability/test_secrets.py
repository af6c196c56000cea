"""The database password stays out of every command line `orch` starts, out of Ray's processes,
environments and logs, and out of everything `orch` prints; the URL can come from a file."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from orchestrator.cli import main
from tests.orchestrator.orch_helpers import REPO, orch
from tests.reliability.harness import populate

SWEEP = """\
name: secret-run
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 1, prompt_tokens: 8}
max_new_tokens: 2
methods:
  - {name: linear, params: {k: 1}}
"""


def test_hide_in_cmdline_rewrites_what_ps_shows():
    code = (
        "import sys; from orchestrator.secrets import hide_in_cmdline;"
        "ok = hide_in_cmdline({'s3cr3t-pw'});"
        "print(ok, open('/proc/self/cmdline', 'rb').read().count(b's3cr3t-pw'), sys.argv[-1])"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "--db", "postgresql://u:s3cr3t-pw@h/d"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.stdout.split() == ["True", "0", "postgresql://u:*********@h/d"], p.stderr


def _watch(proc: subprocess.Popen, password: str, ray_tmp: Path, seen: list, stop) -> None:
    """Every process on the machine, sampled until `stop`: (pid, where, text) of any whose
    command line (or, below the driver, environment) holds the password. The driver's own
    command line counts once Ray runs (it is rewritten when `orch` starts)."""
    ray_seen = False
    while not stop.is_set():
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if str(ray_tmp) in cmd:
                ray_seen = True
            if password in cmd and (p.pid != proc.pid or ray_seen):
                seen.append((p.pid, "argv", cmd))
            if p.pid != proc.pid and str(ray_tmp) in cmd:
                try:
                    env = p.environ()
                except (psutil.Error, OSError):
                    continue
                if any(password in v for v in env.values()):
                    seen.append((p.pid, "environ", cmd))
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["argv", "env", "file"])
def test_password_never_reaches_a_command_line_or_ray(how, pg_url, tmp_path):
    password = "pw-" + secrets.token_hex(8)
    url = make_url(pg_url).set(password=password).render_as_string(hide_password=False)
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP)
    ray_tmp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_TMPDIR": str(ray_tmp)}
    env.pop("ORCH_DB_URL", None)
    args = [sys.executable, "-m", "orchestrator.cli", "submit", str(spec), "--executor", "ray"]
    args += ["--actors", "1"]
    if how == "argv":
        args += ["--db", url]
    elif how == "env":
        env["ORCH_DB_URL"] = url
    else:
        (tmp_path / "db-url").write_text(url + "\n")
        args += ["--db-file", str(tmp_path / "db-url")]
    seen: list = []
    stop = threading.Event()
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watcher = threading.Thread(target=_watch, args=(proc, password, ray_tmp, seen, stop))
    watcher.start()
    try:
        out, err = proc.communicate(timeout=400)
    finally:
        stop.set()
        watcher.join()
        if proc.poll() is None:
            proc.kill()
    try:
        text = (out + err).decode()
        assert proc.returncode == 0, text
        assert "1 trials; ran 1 (1 done" in text
        assert password not in text
        assert not seen, seen[:3]
        logs = [f for f in ray_tmp.rglob("*") if f.is_file() and not f.is_socket()]
        assert logs, "Ray left no files under RAY_TMPDIR"
        leaked = [str(f) for f in logs if password.encode() in f.read_bytes()]
        assert not leaked, leaked[:5]
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_db_file_and_env_file_are_used_and_redacted(tmp_path, monkeypatch):
    monkeypatch.delenv("ORCH_DB_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    populate(url)
    (tmp_path / "good").write_text(f"  {url}\n")
    r = CliRunner().invoke(main, ["status", "--db-file", str(tmp_path / "good")])
    assert r.exit_code == 0 and "existing" in r.stdout, r.output
    monkeypatch.setenv("ORCH_DB_URL_FILE", str(tmp_path / "good"))
    r = CliRunner().invoke(main, ["status"])
    assert r.exit_code == 0 and "existing" in r.stdout, r.output
    # --db wins over the environment, --db-file too
    r = CliRunner().invoke(main, ["status", "--db", f"sqlite:///{tmp_path / 'other.db'}"])
    assert r.exit_code == 2 and "no database file" in r.stderr
    password = "pw-" + secrets.token_hex(6)
    (tmp_path / "bad").write_text(f"postgresql+psycopg://alice:{password}@127.0.0.1:1/lab\n")
    for args, env in [
        (["status", "--db-file", str(tmp_path / "bad")], {}),
        (["query", "--best-by", "throughput"], {"ORCH_DB_URL_FILE": str(tmp_path / "bad")}),
    ]:
        p = orch(*args, env=env, timeout=120)
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.startswith(
            "error: cannot connect to database postgresql+psycopg://alice:***@"
        )
        assert p.stderr.count("\n") == 1 and password not in p.stderr
