"""Every `orch` command's output on examples/quickstart_tiny.yaml, written to a folder, so that a
refactor can be checked byte for byte: run it before and after, then `diff -r BEFORE AFTER`.

    python -m bench.cli_snapshot --out /tmp/before            # at the old commit
    python -m bench.cli_snapshot --out /tmp/after --db /tmp/before/sweep.db
    diff -r /tmp/before/read /tmp/after/read                  # must print nothing

The first run submits the sweep (local executor) into OUT/sweep.db and stores a profile of the
tiny llama pair; with `--db` a later run reads a copy of that database instead, so the
read-only commands (status, query, compare, export, plot, report, certify, ...) see the very
same trials and their output must be identical. Outputs whose numbers are timings (submit's
progress, generate's stats, `--version`'s commit) have their digits masked; generate's tokens
are kept (every method at temperature 0 on the eager and fast engines, and at temperature 1).
Commands run in one process through the `orch` console script's Click group (CliRunner).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
from importlib.metadata import entry_points
from pathlib import Path

from click.testing import CliRunner

SWEEP = "examples/quickstart_tiny.yaml"
METHODS = (
    "autoregressive linear fixed_tree iid delayed dynatree dyspec salf beam ddtree specinfer "
    "sequoia lookup lookup_tree lookup_hybrid"
).split()
HELP = [
    [],
    *[[c] for c in "cancel certify compare datasets db delete export generate models plot".split()],
    *[[c] for c in "profile profile-import query report resume status submit train".split()],
    ["datasets", "list"],
    ["datasets", "show"],
    ["db", "current"],
    ["db", "upgrade"],
    ["models", "fetch"],
    ["models", "list"],
    ["train", "block-drafter"],
    ["train", "list"],
    ["train", "nde"],
    ["train", "talf"],
]
READS = [
    ["status"],
    ["status", "--format", "json"],
    ["query", "--best-by", "throughput"],
    ["query", "--best-by", "throughput", "--format", "json"],
    ["query", "--best-by", "throughput", "--format", "csv"],
    ["query", "--best-by", "tokens_per_iteration", "--where", "depth>=4"],
    ["query", "--best-by", "speedup", "--columns", "+lossless,ar_equal", "--top", "0"],
    ["query", "--best-by", "throughput", "--global", "--top", "3"],
    ["query", "--best-by", "throughput", "--all-sweeps"],
    ["query", "--predict-on", "{device}", "--best-by", "predicted_speedup"],
    ["compare"],
    ["compare", "--format", "json"],
    ["compare", "--format", "csv"],
    ["compare", "--predict-on", "{device}"],
    ["export", "--format", "csv"],
    ["export", "--format", "json"],
    ["certify"],
    ["db", "current"],
    ["datasets", "list"],
    ["datasets", "show", "spec_bench", "-n", "2"],
    ["models", "list"],
    ["train", "list"],
    ["query", "--best-by", "nosuch"],
    ["query", "--best-by", "throughput", "--where", "nosuch=1"],
    ["compare", "--sweep", "nosuch"],
]


def masked(text: str) -> str:
    return re.sub(r"\d", "#", text)


def run(cli, args: list[str], env: dict) -> str:
    out = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    tail = (
        ""
        if out.exception is None or isinstance(out.exception, SystemExit)
        else repr(out.exception)
    )
    return f"$ orch {' '.join(args)}\nexit {out.exit_code}\n{out.output}{tail}\n"


def copy(source: Path, dest: Path) -> None:
    """A SQLite database with its write-ahead log folded in (a plain copy would miss it)."""
    with sqlite3.connect(source) as a, sqlite3.connect(dest) as b:
        a.backup(b)


def digest(folder: Path) -> str:
    lines = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            kind = p.suffix
            shown = data.decode() if kind in (".md", ".csv", ".json", ".txt") else ""
            lines.append(f"{p.relative_to(folder)} {len(data)} {hashlib.sha256(data).hexdigest()}")
            if shown:
                lines.append(shown)
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--db", type=Path, help="a database an earlier run made (default: submit)")
    args = ap.parse_args()
    cli = entry_points(group="console_scripts")["orch"].load()
    out = args.out
    (out / "read").mkdir(parents=True, exist_ok=True)
    (out / "timed").mkdir(exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="orch-snap-"))
    work = Path("/tmp/orch-cli-snapshot")  # one fixed path: it appears in some outputs
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    db = work / "sweep.db"
    env = {"ORCH_HOME": str(home), "ORCH_DB_URL": f"sqlite:///{db}", "COLUMNS": "120"}
    os.environ.update(env)
    if args.db is None:
        sub = run(cli, ["submit", SWEEP, "--executor", "local"], env)
        prof = run(
            cli,
            ["profile", "--target", "tiny-llama", "--draft", "tiny-llama-draft"]
            + ["--sizes", "1,4,16", "--contexts", "64", "--repeats", "1"],
            env,
        )
        (out / "timed" / "submit.txt").write_text(masked(sub + prof))
        copy(db, out / "sweep.db")
    else:
        copy(args.db, db)
    with sqlite3.connect(db) as c:  # the profiled CPU's name, for --predict-on
        (device,) = c.execute("select device_name from profiles").fetchone()
    read = out / "read"
    (read / "help.txt").write_text("".join(run(cli, a + ["--help"], env) for a in HELP))
    reads = [[x.format(device=device) for x in a] for a in READS]
    (read / "reads.txt").write_text("".join(run(cli, a, env) for a in reads))
    for cmd in ("plot", "report"):
        folder = work / cmd
        text = run(cli, [cmd, "-o", str(folder)], env)
        (read / f"{cmd}.txt").write_text(text + digest(folder))
    gens = []
    for method in METHODS:
        draft = "none" if method in ("autoregressive", "lookup", "lookup_tree") else None
        for engine, temperature in (("eager", 0.0), ("fast", 0.0), ("eager", 1.0)):
            a = ["generate", "--method", method, "--engine", engine, "--json"]
            a += ["--prompt", "def fib(n): return n if n < 2 else", "--max-new-tokens", "24"]
            a += ["--temperature", str(temperature), "--seed", "3"]
            a += ["--draft", draft] if draft else []
            text = run(cli, a, env)
            body = [line for line in text.splitlines() if line.startswith("{")]
            if body:
                body = json.loads(body[0])
                text = f"{a}\n{body['tokens']}\n{sorted(body['stats'])}\n"
            else:
                text = masked(text)
            gens.append(text)
    (read / "generate.txt").write_text("".join(gens))
    (out / "timed" / "version.txt").write_text(masked(run(cli, ["--version"], env)))
    for cmd in (["cancel", "--sweep", "quickstart-tiny"], ["resume", "--executor", "local"]):
        (out / "timed" / f"{cmd[0]}.txt").write_text(masked(run(cli, cmd, env)))
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
