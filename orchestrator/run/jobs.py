"""`orch submit SWEEP --address http://head:8265`: run the driver on a cluster's head node
through the Ray Jobs API, from a laptop that has neither the models nor the cluster's network.

The sweep file is validated here first (by name: models and datasets as the registries know
them, model folders left to the workers), so bad input fails before anything reaches the
cluster. Then a Ray job runs `orch submit <file> --address auto ...` on the head, with the
sweep file as its working directory. The database URL is not put on that command line: the
job uses the head's own ORCH_DB_URL (cluster.yaml sets it; the password lives in the head's
~/.pgpass), or, when --db / ORCH_DB_URL is given here, it travels in the job's runtime
environment, which anyone who can list the cluster's jobs can read: so a URL that holds a
password is refused here, never sent.
The job's log is followed until it ends; the exit code is the driver's (0 when it succeeded).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import yaml
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from engine.config import ConfigError
from orchestrator.only import check_only, parse_only
from orchestrator.spec import load_sweep
from orchestrator.spec.yaml_file import read_yaml

POLL_S = 2.0
AGENT_WAIT_S = 120.0  # how long a cluster may say it has no job agent yet


def _has_password(url: str) -> bool:
    try:
        return make_url(url).password is not None
    except ArgumentError:
        return False  # not a URL the store would accept either: it says so on the head


def is_jobs_address(address: str | None) -> bool:
    return bool(address) and address.startswith(("http://", "https://"))


def driver_command(sweep_file: str, options: dict[str, object]) -> str:
    """The `orch submit` command line the job runs on the head (no database URL in it)."""
    args = ["orch", "submit", sweep_file, "--address", "auto", "--no-progress"]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (tuple, list)):  # a repeatable option (--only)
            for v in value:
                args += [flag, str(v)]
        elif value not in (None, False):
            args += [flag, str(value)]
    return shlex.join(args)


def _submit(client, wait_s: float = AGENT_WAIT_S, **job) -> str:
    """client.submit_job, retried for up to `wait_s` seconds while the cluster says no job
    agent is available yet (a head that just started, a node that just died and is still
    listed)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise ConfigError(f"the Ray Jobs API refused the job: {e}") from None
        time.sleep(3.0)


def submit_job(
    path: str,
    address: str,
    db_url: str | None,
    options: dict[str, object],
    log: Callable[[str], None] = print,
    follow: bool = True,
) -> int:
    """Submit the sweep's driver as a Ray job at `address`; returns the exit code."""
    sweep, trials = load_sweep(path, local_models=False, scaled=bool(options.get("scale")))
    if options.get("only"):
        check_only(parse_only(options["only"]), trials, sweep.name)
    url = db_url or os.environ.get("ORCH_DB_URL")
    if url and _has_password(url):
        raise ConfigError(
            "a database URL with a password is not sent to the cluster (a job's environment "
            "is readable from its job list): set ORCH_DB_URL on the head, password in its "
            "~/.pgpass, and submit without --db"
        )
    from ray.job_submission import JobStatus, JobSubmissionClient  # lazy: Ray

    try:
        client = JobSubmissionClient(address)
    except Exception as e:  # noqa: BLE001 - unreachable dashboard, wrong address, ...
        raise ConfigError(f"cannot reach the Ray Jobs API at {address}: {e}") from None
    workdir = Path(tempfile.mkdtemp(prefix="orch-job-"))
    try:
        stage_sweep(path, sweep, workdir)  # with its prompt files: the head has none of ours
        env = {"ORCH_DB_URL": url} if url else {}
        job = _submit(
            client,
            entrypoint=driver_command(Path(path).name, options),
            runtime_env={"working_dir": str(workdir), "env_vars": env},
            metadata={"sweep": sweep.name, "trials": str(len(trials))},
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"sweep {sweep.name!r} ({len(trials)} trials) submitted as Ray job {job} at {address}")
    if not follow:
        log(f"follow it with: ray job logs -f {job} --address {address}")
        return 0
    shown = 0
    while True:
        status = client.get_job_status(job)
        text = client.get_job_logs(job)
        if len(text) > shown:
            log(text[shown:].rstrip("\n"))
            shown = len(text)
        if status.is_terminal():
            log(f"Ray job {job}: {status.value}")
            return 0 if status == JobStatus.SUCCEEDED else 1
        time.sleep(POLL_S)


PROMPTS_DIR = "prompts"


def stage_sweep(path: str | Path, sweep, workdir: Path) -> Path:
    """The sweep file in the job's working directory, and each user prompt file it names
    (engine/prompt_files.py) beside it under prompts/K/, its `path:` rewritten to that copy (the
    head reads the file again; its sha256 is checked there against the one validated here)."""
    path = Path(path)
    target = workdir / path.name
    files = [d for d in sweep.datasets if d.sha256 is not None]
    if not files:
        shutil.copy(path, target)
        return target
    data = read_yaml(path)
    entries = data["dataset"] if isinstance(data["dataset"], list) else [data["dataset"]]
    for k, (entry, d) in enumerate(zip(entries, sweep.datasets)):
        if d.sha256 is None:
            continue
        copy = f"{PROMPTS_DIR}/{k}/{Path(d.path).name}"  # its name: part of the dataset's
        (workdir / copy).parent.mkdir(parents=True)
        shutil.copy(d.path, workdir / copy)
        entry["path"] = copy
    target.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return target
