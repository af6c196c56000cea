"""bench/replay_record.py: a record of bench/methods.py replays to the same tokens, a stored
token changed is reported (exit 1), and bad input is one line before any model loads."""

import json

import pytest

from bench import methods, replay_record


def test_replay_finds_same_tokens_and_a_changed_one(tmp_path, capsys):
    out = tmp_path / "m.json"
    methods.main(
        [
            "--n-prompts",
            "2",
            "--max-new-tokens",
            "8",
            "--prompt-tokens",
            "24",
            "--methods",
            "linear,dynatree",
            "--out",
            str(out),
        ]
    )
    capsys.readouterr()  # the methods table
    with pytest.raises(SystemExit) as e:
        replay_record.main([str(out), "--prompts", "1,2"])
    assert e.value.code == 0
    assert capsys.readouterr().out.count("| True |") == 6  # 2 prompts x 3 methods

    record = json.loads(out.read_text())
    tokens = record["per_prompt"][1]["runs"]["linear"]["tokens"]
    tokens[0] = (tokens[0] + 1) % 256
    out.write_text(json.dumps(record))
    with pytest.raises(SystemExit) as e:
        replay_record.main([str(out), "--prompts", "2", "--methods", "linear"])
    assert e.value.code == 1
    assert "| 2 | linear | 8 | False |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--prompts", "3"], "prompts [3] are not in the record"),
        (["--prompts", "x"], "--prompts expects 1-based integers"),
        (["--prompts", "1", "--methods", "warp"], "methods ['warp'] are not in the record"),
    ],
)
def test_bad_input_is_one_line(tmp_path, monkeypatch, args, needle):
    monkeypatch.setattr(replay_record, "load_pair", lambda *a: pytest.fail("model loaded"))
    out = tmp_path / "m.json"
    out.write_text(
        json.dumps(
            {
                "methods": {"linear": {}},
                "per_prompt": [{"prompt": 0}],
                "dataset": "spec_bench",
                "n_prompts": 1,
            }
        )
    )
    with pytest.raises(SystemExit) as e:
        replay_record.main([str(out), *args])
    assert str(e.value.code).startswith("error: ") and needle in str(e.value.code)
