"""orch ui without a browser: its command's bad inputs (one line, exit 2), the read-only
connections, the per-sweep cache, answers equal to orchestrator.results', and the trial
page's `orch generate` command reproducing the trial's tokens."""

from __future__ import annotations

import json
import shlex
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from orchestrator.cli import main
from tests.orchestrator.orch_helpers import fake_config, fake_result, record_sweep, tiny_trial


def test_port_in_use_is_one_line(sqlite_url):
    from orchestrator.store import Store

    record_sweep(Store(sqlite_url), "s", [(fake_config(1), fake_result(fake_config(1)))])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        url_file = Path(sqlite_url.removeprefix("sqlite:///")).with_suffix(".url")
        url_file.write_text(sqlite_url + "\n")  # --db-file: resolved as every command does
        r = CliRunner().invoke(main, ["ui", "--db-file", str(url_file), "--port", str(port)])
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in r.output


def test_unreachable_database_is_one_line_without_the_password():
    r = CliRunner().invoke(main, ["ui", "--db", "postgresql://u:Secret-9x@127.0.0.1:1/orch"])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot connect to database")
    assert "Secret-9x" not in r.output and "***" in r.output


def test_missing_sqlite_file_is_refused_and_not_created(tmp_path):
    path = tmp_path / "none.db"
    r = CliRunner().invoke(main, ["ui", "--db", f"sqlite:///{path}"])
    assert r.exit_code == 2 and "no database file" in r.output
    assert not path.exists()


def test_help_lists_ui_with_its_defaults():
    r = CliRunner().invoke(main, ["ui", "--help"])
    assert r.exit_code == 0
    assert "127.0.0.1" in r.output and "8300" in r.output and "--db-file" in r.output


def test_reader_refuses_writes_and_rebuilds_after_a_new_result(db_url):
    from orchestrator.results import compare, load_frame
    from orchestrator.results.output import to_records
    from orchestrator.store import Store, StoreError
    from orchestrator.ui.reader import Reader
    from orchestrator.ui.sweep_data import sweep_page

    store = Store(db_url)
    base, lin, more = fake_config(0, method="autoregressive"), fake_config(2), fake_config(3)
    sid = store.submit("s", {"name": "s"}, [base, lin, more], "v").sweep_id
    store.begin_run(sid)
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}

    def record(cfg, throughput):
        store.mark_running(ids[cfg.config_hash], "h", None)
        store.record_result(ids[cfg.config_hash], fake_result(cfg, throughput))

    record(base, 100.0)
    record(lin, 150.0)
    reader = Reader(db_url)
    with pytest.raises(StoreError, match="read"):
        reader.store.transact("w", lambda s: s.execute(text("DELETE FROM results")))
    first = sweep_page(reader, "s", (), None, "speedup")
    want = to_records(compare(load_frame(store, "s", per_prompt=True)))
    assert first["compare"] == json.loads(json.dumps(want))
    assert first["status"]["counts"]["pending"] == 1
    assert sweep_page(reader, "s", (), None, "speedup") is first  # cached
    record(more, 300.0)
    again = sweep_page(reader, "s", (), None, "speedup")  # the old answer, a rebuild started
    for _ in range(200):
        again = sweep_page(reader, "s", (), None, "speedup")
        if again["version"] != first["version"]:
            break
        threading.Event().wait(0.05)
    assert again["finished"] == 3 and len(again["trials"]) == 3
    assert max(r["speedup"] for r in again["compare"]) == pytest.approx(3.0)
    reader.close()
    store.close()


def test_the_trial_page_reruns_a_prompt_token_for_token(sqlite_url):
    from orchestrator.run.trial import run_trial
    from orchestrator.store import Store
    from orchestrator.ui.reader import Reader
    from orchestrator.ui.trial_data import trial_page

    cfg = tiny_trial()
    store = Store(sqlite_url)
    record_sweep(store, "t", [(cfg, run_trial(cfg))])
    reader = Reader(sqlite_url)
    (tid,) = [r["id"] for r in reader.trial_rows("t", [__import__("db.models").models.Trial.id])]
    page = trial_page(reader, tid)
    assert page["config_hash"] == cfg.config_hash and len(page["prompts"]) == 2
    import torch

    assert page["environment"]["versions"]["torch"] == torch.__version__  # stored per trial
    for p in page["prompts"]:
        args = shlex.split(p["generate"])
        assert args[:2] == ["orch", "generate"] and "--prompt-ids" in args
        r = CliRunner().invoke(main, [*args[1:], "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["tokens"] == p["tokens"]
        assert p["output"] is not None and p["prompt"]
    reader.close()


def test_predicted_against_measured_per_profiled_device(sqlite_url):
    from orchestrator.results import add_predictions, device_curves, load_frame
    from orchestrator.store import Store
    from orchestrator.ui.predicted import predicted
    from orchestrator.ui.reader import Reader
    from tests.orchestrator.profile_helpers import CPU, GPU, _measured

    _measured(sqlite_url)
    reader = Reader(sqlite_url)
    d = predicted(reader, "s")
    assert d["devices"] == sorted([CPU, GPU])
    store = Store(sqlite_url, mode="read")
    df = load_frame(store, "s", details=True, certificates=False)
    for device in (CPU, GPU):
        want = add_predictions(df, device_curves(store, device), device)
        lin = want[want["method"] == "linear"].iloc[0]
        (got,) = [p for p in d["points"] if p["device"] == device and "linear" in p["label"]]
        assert got["predicted"] == pytest.approx(lin["predicted_speedup"])
        assert got["measured"] == pytest.approx(1.5)
    reader.close()
    store.close()


def test_the_trial_page_reads_a_real_targets_tokenizer_without_its_weights():
    """Outputs as text and `orch generate` with the prompt's exact ids for a target whose
    tokenizer files are here (the fetched real pair; skipped where it is not), nothing for a
    model this machine does not have."""
    from engine.datasets import encode_prompt, load_prompts
    from engine.fetch import is_fetched
    from orchestrator.ui.trial_data import generate_command, tokenizer
    from tests.orchestrator.orch_helpers import tiny_trial

    assert tokenizer("no-org/no-such-model") is None
    assert tokenizer("tiny-llama").decode([104, 105]) == "hi"
    if not is_fetched("qwen2.5-coder-1.5b"):
        pytest.skip("real pair not fetched")
    tok = tokenizer("qwen2.5-coder-1.5b")
    ids = tok.encode("def add(a, b):")
    assert tok.decode(ids) == "def add(a, b):"
    cfg = tiny_trial(target="qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b", prompt_tokens=16)
    prompt = load_prompts("spec_bench", n=1)[0]
    command = generate_command(cfg, prompt, 0, tok)
    expected = encode_prompt(tok, prompt, prompt_tokens=16, chat=cfg.chat)
    assert f"--prompt-ids {','.join(map(str, expected))}" in command
