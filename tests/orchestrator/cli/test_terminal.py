"""Issue 20, part B: a quiet terminal with a run log, threads of the local executor, `orch
--version`, shell completion, the ETA of `orch status`, missing optional installs, help text a
shell reads as meant (database URLs: test_db_urls.py; failed sweeps: test_failed_sweeps.py)."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import REPO, tiny_sweep

# ---- a quiet terminal: library warnings and logs go to the run log -------------------------

LIB_WARNING = "deprecated-knob is deprecated and will be removed"
LIB_LOG = "transformers says: generation flags are not valid"


@pytest.fixture
def noisy_library(monkeypatch):
    """Trials that warn (a FutureWarning, as transformers does) and log through the
    transformers logger, whose default handler prints on stderr."""
    import logging
    import warnings

    from orchestrator.run.executors import local

    real = local.run_trial

    def run_trial(*a, **kw):
        warnings.warn(LIB_WARNING, FutureWarning, stacklevel=1)
        logging.getLogger("transformers.generation").warning(LIB_LOG)
        return real(*a, **kw)

    monkeypatch.setattr(local, "run_trial", run_trial)
    monkeypatch.setattr(warnings, "filters", [("always", None, Warning, None, 0)])


def _run_log(output: str) -> str:
    from pathlib import Path

    lines = [ln for ln in output.splitlines() if ln.startswith("run log: ")]
    assert len(lines) == 1, output
    return Path(lines[0].removeprefix("run log: ")).read_text()


def test_library_warnings_go_to_the_run_log_not_the_terminal(
    tmp_path, monkeypatch, capfd, noisy_library
):
    import logging

    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("transformers")  # transformers configures its logger on first use
    hf_logger = logging.getLogger("transformers")
    handlers_before = list(hf_logger.handlers)  # what this process had (pytest adds its own)
    propagate_before = hf_logger.propagate  # other tests in this worker may have changed it
    r = CliRunner().invoke(
        main, ["submit", str(tiny_sweep(tmp_path)), "--db", db, "--executor", "local", "--progress"]
    )
    assert r.exit_code == 0, r.output
    fd = capfd.readouterr()
    terminal = r.output + fd.out + fd.err
    assert LIB_WARNING not in terminal and LIB_LOG not in terminal and "Warning" not in terminal
    log = _run_log(r.stderr)
    assert f"FutureWarning: {LIB_WARNING}" in log and LIB_LOG in log
    assert list((tmp_path / "home" / "logs").glob("quiet-*.log"))
    # and the process is as it was: warnings print again, the transformers logger too
    import warnings

    default = hf_logging._default_handler  # installed by transformers on first use

    def others(handlers):
        return [h for h in handlers if h is not default]

    assert default in hf_logger.handlers and others(hf_logger.handlers) == others(handlers_before)
    assert hf_logger.propagate == propagate_before
    assert warnings.showwarning is warnings._showwarning_orig or "pytest" in repr(
        warnings.showwarning
    )


def test_verbose_shows_library_warnings_on_the_terminal_too(tmp_path, monkeypatch, noisy_library):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    r = CliRunner().invoke(
        main, ["submit", str(tiny_sweep(tmp_path)), "--db", db, "--executor", "local", "-v"]
    )
    assert r.exit_code == 0, r.output
    assert LIB_WARNING in r.stderr
    assert LIB_WARNING in _run_log(r.stderr)


def test_a_real_local_sweep_prints_only_our_lines(tmp_path):
    """transformers warns from inside the trials (e.g. a FutureWarning of `past_key_values`):
    in a fresh process nothing but orch's own lines reaches the terminal."""
    from tests.orchestrator.orch_helpers import orch

    db = f"sqlite:///{tmp_path / 'o.db'}"
    p = orch(
        "submit", str(tiny_sweep(tmp_path)), "--db", db, "--executor", "local",
        env={"ORCH_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert [ln.split(":")[0].split(" ")[0] for ln in p.stderr.splitlines()] == [
        "sweep", "run", "2",
    ], p.stderr  # fmt: skip
    assert "Warning" not in p.stderr + p.stdout
    _run_log(p.stderr)  # written, path printed once


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray")
def test_ray_start_up_lines_go_to_the_run_log(tmp_path):
    from tests.orchestrator.orch_helpers import orch

    db = f"sqlite:///{tmp_path / 'o.db'}"
    p = orch(
        "submit", str(tiny_sweep(tmp_path, "rayquiet")), "--db", db, "--actors", "1",
        env={"ORCH_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "Started a local Ray instance" not in p.stderr + p.stdout
    assert "authentication" not in p.stderr + p.stdout
    assert " -- " not in p.stderr  # Ray's log format
    assert "Started a local Ray instance" in _run_log(p.stderr)


def test_run_log_paths_are_per_run_and_safe(tmp_path, monkeypatch):
    from orchestrator.run.runlog import log_path

    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    p = log_path("../etc/my sweep", now=0)
    assert p.parent == tmp_path / "logs"
    assert p.name.startswith("etc_my_sweep-19700101-000000-") and p.suffix == ".log"
    assert log_path("s", now=0) != log_path("s", now=1)


# ---- threads of the local executor ---------------------------------------------------------


def test_threads_per_worker_split_the_cpus():
    from orchestrator.run.executors import worker_threads

    assert [worker_threads(n, cpus=16) for n in (1, 2, 4, 5, 16, 32)] == [16, 8, 4, 3, 1, 1]


def test_local_executor_sets_torch_threads_per_trial_and_puts_them_back(monkeypatch):
    import torch

    from orchestrator.run import executors
    from orchestrator.run.executors import Job, base, local
    from tests.orchestrator.orch_helpers import fake_config, fake_result

    seen = {}

    def run_trial(config, prompts=None, warmup=0, acceptance=None):
        seen[config.target] = torch.get_num_threads()
        return fake_result(config)

    class Sink:
        done_n = 0

        def start(self, job, worker):
            return True

        def done(self, job, result):
            self.done_n += 1

        def failed(self, job, failure):
            raise AssertionError(failure.error)

        def stop_requested(self):
            return False

    monkeypatch.setattr(local, "run_trial", run_trial)
    monkeypatch.setattr(base, "available_cpus", lambda: 3)
    ex = executors.make_executor("local")
    assert ex.threads == 3  # one worker: every CPU, as a Ray actor alone on the machine
    jobs = [
        Job(1, fake_config(1, target="qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b")),
        Job(2, fake_config(2)),  # the tiny pair: one thread
    ]
    torch.set_num_threads(1)
    try:
        torch.set_num_threads(2)
        ex.run(jobs, sink := Sink())
        assert torch.get_num_threads() == 2  # the driver's own count is back
    finally:
        torch.set_num_threads(1)
    assert sink.done_n == 2
    assert seen == {"qwen2.5-coder-1.5b": 3, "tiny-llama": 1}


def test_submit_help_says_which_executor_to_use_when():
    r = CliRunner().invoke(main, ["submit", "--help"])
    text = " ".join(r.output.split())
    assert "Which executor:" in text
    assert "`local`" in text and "`ray`" in text and "Ray is not installed" in text


# ---- orch --version, shell completion, the ETA of orch status ------------------------------


def test_version_names_the_package_and_the_code_version_trials_record(tmp_path, monkeypatch):
    from importlib.metadata import version

    from orchestrator.run.version import code_version

    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0
    assert r.output.startswith(f"orch {version('treespec-orch')}")
    if not code_version().startswith("treespec-orch "):  # a git checkout: its commit
        assert f"code version {code_version()}" in r.output
    # every trial stores that code version
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    r = CliRunner().invoke(
        main, ["submit", str(tiny_sweep(tmp_path)), "--db", db, "--executor", "local"]
    )
    assert r.exit_code == 0, r.output
    import json

    rows = json.loads(CliRunner().invoke(main, ["export", "--db", db, "--format", "json"]).stdout)
    assert len(rows) == 2 and {row["code_version"] for row in rows} == {code_version()}


def test_shell_completion_script_and_completions():
    from tests.orchestrator.orch_helpers import orch

    p = orch(env={"_ORCH_COMPLETE": "bash_source"})
    assert p.returncode == 0, p.stderr
    assert "_orch_completion()" in p.stdout and "_ORCH_COMPLETE=bash_complete" in p.stdout
    p = orch(env={"_ORCH_COMPLETE": "bash_complete", "COMP_WORDS": "orch sub", "COMP_CWORD": "1"})
    assert p.stdout.split() == ["plain,submit"]
    help_text = CliRunner().invoke(main, ["--help"]).output
    assert "_ORCH_COMPLETE=bash_source orch" in help_text


def test_eta_from_finished_trials():
    from orchestrator.run.eta import eta_s, format_eta

    assert eta_s([], 5) is None and eta_s([(0.0, 10.0)], 0) is None
    assert eta_s([(0.0, 10.0)], 6) == 60.0  # one worker, 10 s a trial
    two_workers = [(0.0, 10.0), (0.0, 10.0), (10.0, 20.0), (10.0, 20.0)]
    assert eta_s(two_workers, 6) == 30.0  # 5 s a trial
    # a pause longer than a trial (Ctrl-C, resumed a day later): only the current run counts
    assert eta_s([(0.0, 10.0), (86400.0, 86420.0), (86420.0, 86440.0)], 3) == 60.0
    assert [format_eta(x) for x in (None, 42.4, 200, 3900)] == ["-", "42s", "3m 20s", "1h 05m"]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_status_shows_the_eta_of_a_running_sweep(sqlite_url, fmt):
    import dataclasses
    import json
    import time

    from tests.orchestrator.orch_helpers import fake_config, fake_result

    store = Store(sqlite_url)
    cfgs = [fake_config(i) for i in range(10)]
    sid = store.submit("eta", {"name": "eta"}, cfgs, "v").sweep_id
    store.begin_run(sid)
    now = time.time()
    for i, cfg in enumerate(cfgs[:4]):  # 4 trials, one after another, 30 s each
        (tid,) = [t for t, c, _ in store.runnable(sid) if c.config_hash == cfg.config_hash]
        assert store.mark_running(tid, "h", None)
        r = fake_result(cfg)
        start = now - 120 + 30 * i
        store.record_result(tid, dataclasses.replace(r, started_at=start, finished_at=start + 30))
    store.close()
    r = CliRunner().invoke(main, ["status", "--db", sqlite_url, "--format", fmt])
    assert r.exit_code == 0, r.output
    if fmt == "json":
        (row,) = json.loads(r.stdout)
        assert (row["status"], row["pending"], row["eta_s"]) == ("running", 6, 180.0)
    else:
        assert "eta" in r.output.splitlines()[0] and "3m 00s" in r.output


def test_status_eta_counts_only_the_cut_of_a_run_with_only(db_url):
    """A run with --only takes the trials of its cut: the ETA and the cut line count those
    (and the running ones), not every pending trial of the grid."""
    import dataclasses
    import json
    import time

    from orchestrator.only import parse_only
    from tests.orchestrator.orch_helpers import fake_config, fake_result

    store = Store(db_url)
    cfgs = [fake_config(i) for i in range(1, 11)]  # linear k=1..10
    sid = store.submit("cut", {"name": "cut"}, cfgs, "v").sweep_id
    store.begin_run(sid, parse_only(["k=1,2,3,4,5,6"]))
    now = time.time()
    for i, cfg in enumerate(cfgs[:4]):  # k=1..4 done, 30 s each, one after another
        (tid,) = [t for t, c, _ in store.runnable(sid) if c.config_hash == cfg.config_hash]
        assert store.mark_running(tid, "h", None)
        start = now - 120 + 30 * i
        r = dataclasses.replace(fake_result(cfg), started_at=start, finished_at=start + 30)
        store.record_result(tid, r)
    only, left = store.cut(sid)
    assert [o.shown() for o in only] == ["k=1,2,3,4,5,6"] and left == 2  # k=5, 6
    store.close()
    out = CliRunner().invoke(main, ["status", "--db", db_url, "--format", "json"]).stdout
    (row,) = json.loads(out)
    assert (row["pending"], row["eta_s"]) == (6, 60.0)  # 2 trials of the cut, not 6
    out = CliRunner().invoke(main, ["status", "cut", "--db", db_url]).stdout
    assert "its latest run took a cut (--only k=1,2,3,4,5,6): 2 of its trials left" in out
    store = Store(db_url)
    store.begin_run(sid)  # a run over the whole grid: no cut
    assert store.cut(sid) is None
    store.close()


# ---- optional installs: checked before anything is written, one pip line -----------------


def _missing(monkeypatch, module):
    """`import module` fails, as where it is not installed."""
    import sys

    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def test_submit_without_ray_writes_nothing_and_says_how_to_install(tmp_path, monkeypatch):
    _missing(monkeypatch, "ray")
    db = tmp_path / "o.db"
    for extra in ([], ["--address", "http://127.0.0.1:1"]):
        r = CliRunner().invoke(
            main, ["submit", str(tiny_sweep(tmp_path)), "--db", f"sqlite:///{db}", *extra]
        )
        assert r.exit_code == 2, r.output
        (line,) = r.stderr.splitlines()
        assert line.startswith("error: ") and "pip install 'treespec-orch[ray]'" in line, line
        assert not db.exists()  # nothing written, no sweep left interrupted
    assert "or --executor local" in line or "Jobs API" in line


def test_a_broken_ray_install_is_one_line_too(tmp_path, monkeypatch):
    """Ray present but one of its own dependencies missing: find_spec says yes, import no."""
    _missing(monkeypatch, "ray")
    monkeypatch.delitem(__import__("sys").modules, "ray")
    fake = tmp_path / "site" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import grpc_is_not_installed_here\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    db = tmp_path / "o.db"
    r = CliRunner().invoke(main, ["submit", str(tiny_sweep(tmp_path)), "--db", f"sqlite:///{db}"])
    assert r.exit_code == 2
    assert "ray does not import: no module 'grpc_is_not_installed_here'" in r.stderr
    assert "pip install 'treespec-orch[ray]'" in r.stderr and not db.exists()


def test_plot_and_parquet_without_their_packages(tmp_path, monkeypatch):
    _missing(monkeypatch, "matplotlib")
    _missing(monkeypatch, "pyarrow")
    out = tmp_path / "figs"
    r = CliRunner().invoke(main, ["plot", "-o", str(out), "--db", f"sqlite:///{tmp_path}/none.db"])
    assert r.exit_code == 2 and not out.exists()
    assert r.stderr.splitlines() == [
        "error: orch plot needs matplotlib, which is not installed: "
        "pip install 'treespec-orch[plots]'"
    ]
    r = CliRunner().invoke(
        main, ["export", "--format", "parquet", "-o", str(tmp_path / "x.parquet")]
    )
    assert r.exit_code == 2 and "pip install 'treespec-orch[plots]'" in r.stderr
    assert not (tmp_path / "x.parquet").exists()


# ---- help text that shells read as meant --------------------------------------------------


def test_where_examples_are_quoted_for_the_shell():
    import re

    texts = [CliRunner().invoke(main, [c, "--help"]).output for c in ("query", "export", "plot")]
    texts.append(CliRunner().invoke(main, ["--help"]).output)
    texts.append(REPO.joinpath("README.md").read_text())
    for text in texts:
        text = " ".join(text.split())
        # a comparison with < > or ! outside quotes is a redirection or history expansion
        for arg in re.findall(r"--where[ =](\S+)", text):
            if any(c in arg for c in "<>!"):
                assert arg[0] in "'\"", f"unquoted --where {arg} in help or README"
    assert "--where 'depth>=4'" in " ".join(texts[0].split())


def test_run_log_falls_back_to_the_temp_folder(tmp_path, monkeypatch):
    import logging
    import tempfile

    from orchestrator.run.runlog import run_log

    (tmp_path / "home").write_text("a file, not a folder")
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    with run_log("s") as path:
        logging.getLogger("transformers").warning("noted")
    assert path.parent == tmp_path / "tmp" / "orch-logs"
    assert "noted" in path.read_text()
