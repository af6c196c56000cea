"""bench/report_diff.py: two reports that differ only in measured times are identical after
masking; a difference in tokens per iteration is reported."""

from __future__ import annotations

from bench.report_diff import diff, is_time_header, main

_TABLE = """# Sweep s

| method | params | speedup | tokens/iter | tokens/s | trial s |
|---|---|---|---|---|---|
| autoregressive | - | 1.000 | 1.000 | {ar_tps} | 220 |
| linear | k=5 | {lin_speedup} | {lin_tpi} | {lin_tps} | {lin_s} |

### tokens/s

| method | all | average |
|---|---|---|
| {first} | {first_tps} | {first_tps} |
| {second} | 0.20 | 0.20 |
"""


def _write(path, **kw):
    v = dict(ar_tps="0.58", lin_speedup="1.023", lin_tpi="2.783", lin_tps="0.59", lin_s="215",
             first="linear", first_tps="0.59", second="autoregressive")  # fmt: skip
    v.update(kw)
    path.write_text(_TABLE.format(**v))
    return path


def test_time_headers():
    assert all(map(is_time_header, ["speedup", "tokens/s", "trial s", "wall s", "time (ms)"]))
    assert not any(map(is_time_header, ["tokens/iter", "accepted\\_per\\_drafted", "params"]))


def test_only_measured_times_differ_is_identical(tmp_path, capsys):
    a = _write(tmp_path / "a.md")
    b = _write(tmp_path / "b.md", ar_tps="0.48", lin_speedup="3.267", lin_tps="1.58",
               lin_s="96", first="autoregressive", first_tps="0.61", second="linear")  # fmt: skip
    assert diff(a, b) == []
    assert main([str(a), str(b)]) == 0
    assert "identical" in capsys.readouterr().out


def test_tokens_per_iteration_difference_is_reported(tmp_path, capsys):
    a = _write(tmp_path / "a.md")
    (tmp_path / "rep").mkdir()
    _write(tmp_path / "rep" / "report.md", lin_tpi="2.900", lin_tps="1.11")
    assert main([str(a), str(tmp_path / "rep")]) == 1
    out = capsys.readouterr().out
    assert "-| linear | k=5 | * | 2.783 | * | * |" in out
    assert "+| linear | k=5 | * | 2.900 | * | * |" in out


def test_extra_masked_column(tmp_path):
    a = _write(tmp_path / "a.md")
    b = tmp_path / "b.md"
    b.write_text(a.read_text().replace("| params |", "| measured on |"))
    assert diff(a, b) != []
    a.write_text(a.read_text().replace("| params |", "| measured on |").replace("k=5", "Xeon"))
    assert diff(a, b) != []
    assert diff(a, b, extra=["measured on"]) == []
