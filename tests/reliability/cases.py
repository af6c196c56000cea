"""The bad-input table: every input a careless or hostile user can give `orch`, what each must
answer, and how to run one case (in-process with CliRunner, in a real process, or in a real
process as an unprivileged user for the permission cases).

Every case must end with exactly one stderr line `error: ...` naming the problem, its exit
code (2 for bad input), no traceback, and the database exactly as it was (row counts of every
table; no database file where none was).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, inspect, select, text

from tests.orchestrator.orch_helpers import REPO, fake_config, fake_result

U64 = 2**64
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24

BASE = """\
name: {name}
pairs: [{{target: {target}, draft: tiny-llama-draft}}]
dataset: {dataset}
max_new_tokens: {mnt}
{extra}methods:
{methods}"""


def sweep(
    methods: str = "  - name: linear\n",
    extra: str = "",
    name: str = "bad-input",
    target: str = "tiny-llama",
    dataset: str = "{name: spec_bench, prompts: 1, prompt_tokens: 8}",
    mnt: str = "4",
) -> str:
    """A sweep file that is valid except for what the arguments put in."""
    return BASE.format(
        name=name, target=target, dataset=dataset, mnt=mnt, extra=extra, methods=methods
    )


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # `orch` arguments; {spec} {db} {work} are filled in
    needle: str  # what the one error line must say
    spec: str | bytes | None = None  # the sweep file {spec}
    code: int = 2
    # cli: CliRunner; proc: a real process; unprivileged: a real process that file permissions
    # apply to (as root: without the capabilities that bypass them)
    runner: str = "cli"
    backends: tuple[str, ...] = ("sqlite",)  # where {db} lives: sqlite and/or postgres
    db: str = "populated"  # populated | missing (a SQLite path that must stay absent) | empty
    prepare: Callable[[Any], None] | None = None  # ctx -> None: files, permissions, patches
    env: tuple[tuple[str, str], ...] = ()
    writes: bool = False  # the command legitimately writes (it ran trials)
    needs: str | None = None  # "no-cuda": only where CUDA is absent
    timeout: float = 240


@dataclass
class Ctx:
    work: Path  # a folder for this case's files
    db: str  # database URL
    db_file: Path | None  # the SQLite file behind `db`
    spec: Path
    monkeypatch: Any = None
    env: dict[str, str] = field(default_factory=dict)

    def fill(self, s: str) -> str:
        for key, value in (("{spec}", self.spec), ("{db}", self.db), ("{work}", self.work)):
            s = s.replace(key, str(value))
        return s


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: timed out
    stdout: str
    stderr: str
    traceback: bool
    seconds: float


# ----------------------------------------------------------------------------- preparations


def _data_dir(rows: bytes) -> Callable[[Ctx], None]:
    """ORCH_DATA_DIR pointing at a folder whose spec_bench.jsonl holds `rows`."""

    def prepare(ctx: Ctx) -> None:
        d = ctx.work / "data"
        d.mkdir()
        (d / "spec_bench.jsonl").write_bytes(rows)
        ctx.env["ORCH_DATA_DIR"] = str(d)

    return prepare


GOOD_ROW = json.dumps({"id": "a", "category": "qa", "prompt": "Hello"}).encode() + b"\n"


def _model_folder(config: bytes | None, weights: bool = True, mode: int | None = None):
    """A local model folder {work}/model with this config.json (None: valid tiny config)."""

    def prepare(ctx: Ctx) -> None:
        d = ctx.work / "model"
        d.mkdir()
        cfg = config
        if cfg is None:
            cfg = json.dumps({"model_type": "llama", "vocab_size": 260}).encode()
        (d / "config.json").write_bytes(cfg)
        (d / "tokenizer.json").write_text("{}")
        if weights:
            (d / "model.safetensors").write_bytes(b"\0" * 8)
        if mode is not None:
            d.chmod(mode)

    return prepare


def _long_model_folder(ctx: Ctx) -> None:
    d = ctx.work / ("m" * 120) / ("n" * 120)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 260}))
    (d / "tokenizer.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\0" * 8)
    ctx.spec.write_text(sweep(target=str(d)))


def _stamp_future_revision(ctx: Ctx) -> None:
    engine = create_engine(ctx.db)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0999_future'"))
    engine.dispose()


def _read_only_db_file(ctx: Ctx) -> None:
    ctx.db_file.chmod(0o444)  # the folder stays writable


def _read_only_db_folder(ctx: Ctx) -> None:
    (ctx.work / "home").mkdir()
    ctx.work.chmod(0o555)  # the file is writable, but no -wal or -shm can be made beside it


def _read_only_folder(name: str) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        d = ctx.work / name
        d.mkdir()
        d.chmod(0o555)

    return prepare


def _file(name: str) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        (ctx.work / name).write_text("not a folder")

    return prepare


def _every_trial_fails(ctx: Ctx) -> None:
    """A worker that runs out of memory on every trial (raised inside the trial)."""

    def oom(*a, **k):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    ctx.monkeypatch.setattr("orchestrator.executors.local.run_trial", oom)


def _db_url_file(content: str) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        (ctx.work / "db-url").write_text(content)

    return prepare


# ----------------------------------------------------------------------------- the table

SUBMIT = ("submit", "{spec}", "--db", "{db}", "--executor", "local")
BOTH = ("sqlite", "postgres")
GEN = ("generate", "--prompt", "Hi", "--max-new-tokens", "2")
READ_MISSING = {
    "status": ("status",),
    "query": ("query", "--best-by", "throughput"),
    "compare": ("compare",),
    "export": ("export",),
    "plot": ("plot", "-o", "{work}/plots"),
    "report": ("report", "-o", "{work}/report"),
    "cancel": ("cancel", "existing"),
    "resume": ("resume", "--executor", "local"),
    "db-current": ("db", "current"),
}

CASES: list[Case] = [
    # -- sampling values
    Case(
        "temperature-nan",
        SUBMIT,
        "sampling.temperature: must be a finite number, got nan",
        spec=sweep(extra="sampling: {temperature: .nan}\n"),
        backends=BOTH,
    ),
    Case(
        "temperature-inf",
        SUBMIT,
        "sampling.temperature: must be a finite number, got inf",
        spec=sweep(extra="sampling: {temperature: .inf}\n"),
    ),
    Case(
        "temperature-negative",
        SUBMIT,
        "sampling.temperature[1]: must be >= 0.0, got -0.5",
        spec=sweep(extra="sampling: {temperature: [0.0, -0.5]}\n"),
        backends=BOTH,
    ),
    Case(
        "top-p-zero",
        SUBMIT,
        "sampling.top_p: must be > 0.0, got 0",
        spec=sweep(extra="sampling: {top_p: 0}\n"),
    ),
    Case(
        "top-p-above-one",
        SUBMIT,
        "sampling.top_p: must be <= 1.0, got 1.5",
        spec=sweep(extra="sampling: {top_p: 1.5}\n"),
        backends=BOTH,
    ),
    Case(
        "sampling-point-top-p-above-one",
        SUBMIT,
        "sampling.points[1].top_p: must be <= 1.0, got 1.5",
        spec=sweep(
            extra="sampling: {points: [{temperature: 1.0, top_p: 0.9}, "
            "{temperature: 1.0, top_p: 1.5}]}\n"
        ),
        backends=BOTH,
    ),
    Case(
        "sampling-point-twice",
        SUBMIT,
        "sampling.points[0]: temperature 0, top_p 1 is given twice",
        spec=sweep(extra="sampling: {temperature: 0.0, points: [{temperature: 0.0}]}\n"),
    ),
    Case(
        "top-p-nan",
        SUBMIT,
        "sampling.top_p: must be a finite number, got nan",
        spec=sweep(extra="sampling: {top_p: .nan}\n"),
    ),
    Case(
        "generate-temperature-nan",
        (*GEN, "--temperature", "nan"),
        "'--temperature': nan is not a finite number",
    ),
    Case(
        "generate-temperature-negative",
        (*GEN, "--temperature", "-1"),
        "--temperature': -1.0 is not in the range x>=0",
    ),
    Case("generate-top-p-nan", (*GEN, "--top-p", "nan"), "'--top-p': nan is not a finite number"),
    Case("generate-top-p-zero", (*GEN, "--top-p", "0"), "--top-p': 0.0 is not in the range"),
    Case(
        "method-param-nan",
        (*GEN, "--method", "dynatree", "--param", "adjust_step=nan"),
        "parameter 'adjust_step': expected a finite number, got 'nan'",
    ),
    # -- files that are not UTF-8 text, duplicate keys, odd documents
    Case(
        "sweep-not-utf8",
        SUBMIT,
        "is not UTF-8 text (byte 0xff at offset 8)",
        spec=b"name: b-\xff\xfe\nmethods: []\n",
    ),
    Case(
        "dataset-not-utf8",
        SUBMIT,
        "spec_bench.jsonl is not UTF-8 text (line 2)",
        spec=sweep(),
        prepare=_data_dir(GOOD_ROW + b'{"id": "b", "category": "qa", "prompt": "\xff"}\n'),
    ),
    Case(
        "dataset-bad-json",
        SUBMIT,
        "spec_bench.jsonl line 2: not a JSON object",
        spec=sweep(),
        prepare=_data_dir(GOOD_ROW + b"{oops\n"),
    ),
    Case(
        "dataset-row-missing-prompt",
        SUBMIT,
        "spec_bench.jsonl line 1: missing key 'prompt'",
        spec=sweep(),
        prepare=_data_dir(b'{"id": "a", "category": "qa"}\n'),
    ),
    Case(
        "duplicate-top-level-key",
        SUBMIT,
        "duplicate key 'name' at line 2",
        spec="name: a\nname: b\n" + sweep().split("\n", 1)[1],
        backends=BOTH,
    ),
    Case(
        "duplicate-grid-key",
        SUBMIT,
        "duplicate key 'k' at line 9, column 7",
        spec=sweep(methods="  - name: linear\n    grid:\n      k: [1, 2]\n      k: [3]\n"),
    ),
    Case(
        "datasets-list-broken-file",
        ("datasets", "list"),
        "spec_bench.jsonl is not UTF-8 text (line 1)",
        prepare=_data_dir(b'{"id": "\xff"}\n'),
        db="missing",
    ),
    Case(
        "datasets-show-broken-file",
        ("datasets", "show", "spec_bench"),
        "spec_bench.jsonl line 2: not a JSON object",
        prepare=_data_dir(GOOD_ROW + b"[1, 2]\n"),
        db="missing",
    ),
    Case("empty-sweep-file", SUBMIT, "expected a mapping, got None", spec=""),
    Case("sweep-is-a-list", SUBMIT, "expected a mapping, got ['a', 'b']", spec="- a\n- b\n"),
    Case("sweep-file-missing", ("submit", "{work}/none.yaml"), "cannot read sweep file"),
    Case(
        "unknown-dataset-category",
        SUBMIT,
        "has no category 'astrology'",
        spec=sweep(dataset="{name: spec_bench, prompts: 1, category: astrology}"),
    ),
    # -- prompt ids, devices, seeds
    Case(
        "prompt-ids-out-of-range",
        ("generate", "--prompt-ids", "1,99999", "--max-new-tokens", "2"),
        "--prompt-ids: 99999 is not a token id of tiny-llama (vocabulary 0..259)",
    ),
    Case(
        "prompt-ids-negative",
        ("generate", "--prompt-ids", "5,-3", "--max-new-tokens", "2"),
        "--prompt-ids: -3 is not a token id of tiny-llama (vocabulary 0..259)",
    ),
    Case(
        "prompt-ids-not-integers",
        ("generate", "--prompt-ids", "1,x", "--max-new-tokens", "2"),
        "--prompt-ids expects comma-separated integers",
    ),
    Case(
        "generate-device-bogus",
        (*GEN, "--device", "bogus"),
        "device 'bogus' is not one of auto, cpu, cuda, cuda:N, mps",
    ),
    Case(
        "generate-device-cuda-without-cuda",
        (*GEN, "--device", "cuda"),
        "device 'cuda': CUDA is not available on this machine",
        needs="no-cuda",
    ),
    Case(
        "sweep-device-cuda-without-cuda",
        SUBMIT,
        "device 'cuda': CUDA is not available on this machine",
        spec=sweep(extra="device: cuda\n"),
        needs="no-cuda",
        backends=BOTH,
    ),
    Case(
        "sweep-device-bogus",
        SUBMIT,
        "device: 'bogus' is not one of auto, cpu, cuda, cuda:N, mps",
        spec=sweep(extra="device: bogus\n"),
    ),
    Case(
        "seed-above-64-bit",
        SUBMIT,
        f"seed: must be <= {U64 - 1}, got {U64}",
        spec=sweep(extra=f"seed: {U64}\n"),
        backends=BOTH,
    ),
    Case(
        "seed-plus-repeats-above-64-bit",
        SUBMIT,
        f"seed + repeats - 1 must be <= {U64 - 1}",
        spec=sweep(extra=f"seed: {U64 - 1}\nrepeats: 2\n"),
    ),
    Case("seed-negative", SUBMIT, "seed: must be >= 0, got -1", spec=sweep(extra="seed: -1\n")),
    Case(
        "generate-seed-above-64-bit",
        (*GEN, "--seed", str(U64)),
        f"--seed': {U64} is not in the range 0<=x<={U64 - 1}",
    ),
    # -- the vocabulary
    Case(
        "branch-above-vocabulary",
        SUBMIT,
        "branch=300 gives a node 300 children but the vocabulary of tiny-llama has 260 tokens",
        spec=sweep(methods="  - name: fixed_tree\n    grid: {branch: [2, 300], budget: [400]}\n"),
        backends=BOTH,
    ),
    Case(
        "top-k-above-vocabulary",
        SUBMIT,
        "top_k=1000 gives a node 1000 children but the vocabulary of tiny-llama has 260 tokens",
        spec=sweep(methods="  - name: beam\n    params: {top_k: 1000}\n"),
    ),
    Case(
        "generate-branch-above-vocabulary",
        (*GEN, "--method", "fixed_tree", "--param", "branch=261", "--param", "budget=300"),
        "branch=261 gives a node 261 children but the vocabulary of tiny-llama has 260 tokens",
    ),
    # -- model folders
    Case(
        "model-config-not-json",
        (*GEN, "--target", "{work}/model"),
        "model folder {work}/model: config.json is not valid JSON",
        prepare=_model_folder(b"{not json"),
    ),
    Case(
        "model-config-without-type",
        (*GEN, "--target", "{work}/model"),
        "model folder {work}/model: config.json has no model_type",
        prepare=_model_folder(b'{"vocab_size": 260}'),
    ),
    Case(
        "model-config-not-utf8",
        (*GEN, "--target", "{work}/model"),
        "model folder {work}/model: config.json is not UTF-8 text",
        prepare=_model_folder(b'{"model_type": "ll\xffama"}'),
    ),
    Case(
        "model-folder-without-weights",
        (*GEN, "--target", "{work}/model"),
        "model folder {work}/model has no weights",
        prepare=_model_folder(None, weights=False),
    ),
    Case(
        "model-folder-in-sweep-bad-config",
        SUBMIT,
        "pairs[0].target: model folder {work}/model: config.json is not valid JSON",
        spec=sweep(target="{work}/model"),
        prepare=_model_folder(b"[1, 2"),
    ),
    Case(
        "model-folder-unreadable",
        (*GEN, "--target", "{work}/model"),
        "cannot read model folder {work}/model: Permission denied",
        runner="unprivileged",
        prepare=_model_folder(None, mode=0o000),
    ),
    Case(
        "model-weights-corrupt",
        (*GEN, "--target", "{work}/model"),
        "cannot load model {work}/model: SafetensorError: ",
        prepare=_model_folder(None),
    ),
    # -- output paths
    Case(
        "export-missing-folder",
        ("export", "--db", "{db}", "-o", "{work}/nowhere/out.csv"),
        "cannot write {work}/nowhere/out.csv: folder {work}/nowhere does not exist",
    ),
    Case(
        "export-to-a-folder",
        ("export", "--db", "{db}", "-o", "{work}"),
        "cannot write {work}: it is a folder",
    ),
    Case(
        "export-unwritable-folder",
        ("export", "--db", "{db}", "-o", "{work}/ro/out.csv"),
        "cannot write {work}/ro/out.csv: folder {work}/ro is not writable",
        runner="unprivileged",
        prepare=_read_only_folder("ro"),
    ),
    Case(
        "plot-under-a-file",
        ("plot", "--db", "{db}", "-o", "{work}/afile/plots"),
        "cannot write plots to {work}/afile/plots: {work}/afile is not a folder",
        prepare=_file("afile"),
    ),
    Case(
        "plot-unwritable-folder",
        ("plot", "--db", "{db}", "-o", "{work}/ro/plots"),
        "cannot write plots to {work}/ro/plots: folder {work}/ro is not writable",
        runner="unprivileged",
        prepare=_read_only_folder("ro"),
    ),
    Case(
        "report-under-a-file",
        ("report", "--db", "{db}", "-o", "{work}/afile/report"),
        "cannot write the report to {work}/afile/report: {work}/afile is not a folder",
        prepare=_file("afile"),
    ),
    Case(
        "report-unwritable-folder",
        ("report", "--db", "{db}", "-o", "{work}/ro/report"),
        "cannot write the report to {work}/ro/report: folder {work}/ro is not writable",
        runner="unprivileged",
        prepare=_read_only_folder("ro"),
    ),
    Case(
        "report-unknown-sweep",
        ("report", "nope", "--db", "{db}", "-o", "{work}/report"),
        "no sweep named 'nope'",
    ),
    # -- databases
    Case(
        "schema-newer-than-code",
        ("status", "--db", "{db}"),
        "has schema revision 0999_future, newer than this code",
        prepare=_stamp_future_revision,
        backends=BOTH,
    ),
    Case(
        "db-upgrade-schema-newer-than-code",
        ("db", "upgrade", "--db", "{db}"),
        "has schema revision 0999_future, newer than this code",
        prepare=_stamp_future_revision,
    ),
    Case(
        "submit-schema-newer-than-code",
        SUBMIT,
        "has schema revision 0999_future, newer than this code",
        spec=sweep(),
        prepare=_stamp_future_revision,
        backends=BOTH,
    ),
    Case(
        "read-only-sqlite-file",
        SUBMIT,
        "database file {work}/lab.db is read-only",
        spec=sweep(),
        runner="unprivileged",
        prepare=_read_only_db_file,
    ),
    Case(
        "read-only-sqlite-folder",
        SUBMIT,
        "folder {work} of database file {work}/lab.db is read-only",
        spec=sweep(),
        runner="unprivileged",
        prepare=_read_only_db_folder,
    ),
    Case(
        "resume-read-only-sqlite-file",
        ("resume", "existing", "--db", "{db}", "--executor", "local"),
        "database file {work}/lab.db is read-only",
        runner="unprivileged",
        prepare=_read_only_db_file,
    ),
    Case(
        "cancel-read-only-sqlite-folder",
        ("cancel", "existing", "--db", "{db}"),
        "folder {work} of database file {work}/lab.db is read-only",
        runner="unprivileged",
        prepare=_read_only_db_folder,
    ),
    *[
        Case(
            f"{name}-missing-sqlite-file",
            (*args, "--db", "sqlite:///{work}/typo.db"),
            "no database file {work}/typo.db",
            db="missing",
        )
        for name, args in READ_MISSING.items()
    ],
    Case(
        "status-postgres-without-schema",
        ("status", "--db", "{db}"),
        "has no orch tables yet",
        backends=("postgres",),
        db="empty",
    ),
    Case(
        "db-url-unparseable",
        ("status", "--db", "not a url"),
        "invalid database URL",
        db="missing",
    ),
    # -- names
    Case(
        "sweep-name-too-long",
        SUBMIT,
        "name: longer than 200 characters (250)",
        spec=sweep(name="n" * 250),
        backends=BOTH,
    ),
    Case(
        "model-path-too-long",
        SUBMIT,
        "pairs[0].target: longer than 200 characters",
        spec=sweep(),
        prepare=_long_model_folder,
        backends=BOTH,
    ),
    Case(
        "sweep-name-escape-sequence",
        SUBMIT,
        "name: control character '\\x1b' at position 2",
        spec=sweep(name='"ok\\e[2Jgone"'),
        backends=BOTH,
    ),
    Case(
        "sweep-name-newline",
        SUBMIT,
        "name: control character '\\n' at position 1",
        spec=sweep(name='"a\\nb"'),
    ),
    Case(
        "sweep-name-bidi-override",
        SUBMIT,
        "name: control character '\\u202e' at position 3",
        spec=sweep(name='"abc\\u202Efdp.exe"'),
    ),
    Case("sweep-name-blank", SUBMIT, "name: must not be empty", spec=sweep(name='"  "')),
    # -- caps (defaults: sweep `limits:` block, README "Sweeps")
    Case(
        "grid-of-ten-million",
        ("submit", "{spec}", "--db", "{db}", "--executor", "local"),
        "the sweep expands to 10000000 trials before de-duplication, "
        "more than limits.max_trials (100000)",
        spec=sweep(
            extra="repeats: 1000\n",
            methods="  - name: fixed_tree\n    grid:\n"
            f"      depth: {list(range(1, 101))}\n      budget: {list(range(1, 101))}\n",
        ),
        runner="proc",
        timeout=120,
    ),
    Case(
        "dyspec-budget-1e8",
        SUBMIT,
        "draft trees of up to 100000000 nodes, more than limits.max_tree_nodes (4096)",
        spec=sweep(methods="  - name: dyspec\n    params: {budget: 100000000}\n"),
        runner="proc",
        timeout=120,
        backends=BOTH,
    ),
    Case(
        "linear-k-huge",
        SUBMIT,
        "draft trees of up to 100000000000000000000 nodes",
        spec=sweep(methods="  - name: linear\n    grid: {k: [100000000000000000000]}\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "max-new-tokens-huge",
        SUBMIT,
        "max_new_tokens: must be <= 8192 (limits.max_new_tokens), got 1000000000",
        spec=sweep(mnt="1000000000"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "method-max-new-tokens-huge",
        SUBMIT,
        "grid.max_new_tokens[1]: must be <= 8192 (limits.max_new_tokens), got 100000",
        spec=sweep(methods="  - name: linear\n    grid: {max_new_tokens: [8, 100000]}\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "generate-max-new-tokens-huge",
        ("generate", "--prompt", "Hi", "--max-new-tokens", "100000000"),
        "--max-new-tokens: 100000000 is more than the cap of 8192 new tokens",
        runner="proc",
        timeout=120,
    ),
    Case(
        "generate-node-budget-huge",
        (*GEN, "--method", "dyspec", "--param", "budget=100000000"),
        "draft trees of up to 100000000 nodes, more than the cap of 4096",
        runner="proc",
        timeout=120,
    ),
    Case(
        "max-new-tokens-negative",
        SUBMIT,
        "max_new_tokens: must be >= 1, got -5",
        spec=sweep(mnt="-5"),
    ),
    Case(
        "prompts-above-cap",
        SUBMIT,
        "dataset.prompts: must be <= 3 (limits.max_prompts), got 5",
        spec=sweep(
            extra="limits: {max_prompts: 3}\n",
            dataset="{name: spec_bench, prompts: 5, prompt_tokens: 8}",
        ),
    ),
    Case(
        "prompts-above-default-cap",
        SUBMIT,
        "dataset.prompts: must be <= 2000 (limits.max_prompts), got 1000000",
        spec=sweep(dataset="{name: spec_bench, prompts: 1000000}"),
    ),
    Case(
        "warmup-huge",
        SUBMIT,
        "warmup: must be <= 100 (limits.max_warmup), got 1000000000000",
        spec=sweep(extra="warmup: 1000000000000\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "limits-unknown-key",
        SUBMIT,
        "limits.max_gpus: unknown key",
        spec=sweep(extra="limits: {max_gpus: 2}\n"),
    ),
    Case(
        "limits-not-a-number",
        SUBMIT,
        "limits.max_trials: expected an integer, got 'lots'",
        spec=sweep(extra="limits: {max_trials: lots}\n"),
    ),
    # -- executors
    Case(
        "accelerator-gpu-without-gpus",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--accelerator", "gpu"),
        "--accelerator gpu: this machine has no GPU",
        spec=sweep(),
        needs="no-cuda",
        backends=BOTH,
    ),
    Case(
        "ray-address-refused",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--address", "127.0.0.1:9"),
        "cannot reach the Ray cluster at 127.0.0.1:9",
        spec=sweep(),
        runner="proc",
        timeout=120,
        backends=BOTH,
    ),
    Case(
        "ray-address-malformed",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--address", "head node"),
        "--address 'head node' is not auto, local, HOST:PORT or ray://HOST:PORT",
        spec=sweep(),
        runner="proc",
        timeout=120,
    ),
    Case(
        "every-trial-failed",
        SUBMIT,
        "1 of 1 trials failed",
        spec=sweep(),
        code=1,
        prepare=_every_trial_fails,
        writes=True,
        backends=BOTH,
    ),
    # -- where the database URL comes from
    Case(
        "db-file-missing",
        ("status", "--db-file", "{work}/no-such-file"),
        "cannot read --db-file {work}/no-such-file: No such file or directory",
        db="missing",
    ),
    Case(
        "db-file-empty",
        ("status", "--db-file", "{work}/db-url"),
        "--db-file {work}/db-url is empty",
        prepare=_db_url_file("\n"),
        db="missing",
    ),
    Case(
        "db-and-db-file",
        ("status", "--db", "{db}", "--db-file", "{work}/db-url"),
        "give --db or --db-file, not both",
        prepare=_db_url_file("sqlite:///x.db"),
    ),
    Case(
        "db-url-file-env-missing",
        ("status",),
        "cannot read ORCH_DB_URL_FILE {work}/gone: No such file or directory",
        env=(("ORCH_DB_URL_FILE", "{work}/gone"),),
        db="missing",
    ),
]


# ----------------------------------------------------------------------------- running


def populate(url: str) -> None:
    """One sweep with two trials, one of them finished (so export and plot have rows)."""
    from orchestrator.store import Store

    store = Store(url)
    a, b = fake_config(1), fake_config(2)
    info = store.submit("existing", {"name": "existing"}, [a, b], "v")
    first = min(t for t, _, _ in store.runnable(info.sweep_id))
    store.mark_running(first, "h", None)
    store.record_result(first, fake_result(a))
    store.close()


def counts(url: str) -> dict[str, int]:
    """Rows per table, every table the database has (alembic_version included)."""
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            names = inspect(c).get_table_names()
            return {n: c.scalar(select(func.count()).select_from(text(f'"{n}"'))) for n in names}
    finally:
        engine.dispose()


def _drop_file_capabilities() -> None:
    """In the child before exec: as root, give up the capabilities that bypass file
    permissions (from the bounding set, so the new program never gets them)."""
    import ctypes

    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run(case: Case, ctx: Ctx) -> Outcome:
    args = [ctx.fill(a) for a in case.args]
    env = {**{k: ctx.fill(v) for k, v in case.env}, **ctx.env}
    start = time.monotonic()
    if case.runner == "cli":
        from click.testing import CliRunner

        from orchestrator.cli import main

        r = CliRunner().invoke(main, args, env=env)
        tb = r.exception is not None and not isinstance(r.exception, SystemExit)
        return Outcome(r.exit_code, r.stdout, r.stderr, tb, time.monotonic() - start)
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **env}
    preexec = None
    if case.runner == "unprivileged":
        home = ctx.work / "home"
        home.mkdir(exist_ok=True)
        full_env.update(HOME=str(home), MPLCONFIGDIR=str(home / "mpl"))
        preexec = _drop_file_capabilities

    try:
        p = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", *args],
            cwd=ctx.work,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=case.timeout,
            preexec_fn=preexec,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(None, out, err, "Traceback" in err, time.monotonic() - start)
    tb = "Traceback" in p.stderr or "Traceback" in p.stdout
    return Outcome(p.returncode, p.stdout, p.stderr, tb, time.monotonic() - start)


def setup(case: Case, work: Path, url: str, monkeypatch: Any = None) -> Ctx:
    """Write the sweep file, prepare the database and the case's own files."""
    db_file = None
    if url.startswith("sqlite:///"):
        db_file = Path(url.removeprefix("sqlite:///"))
    ctx = Ctx(work=work, db=url, db_file=db_file, spec=work / "sweep.yaml", monkeypatch=monkeypatch)
    if case.db == "populated":
        populate(url)
    if isinstance(case.spec, bytes):
        ctx.spec.write_bytes(case.spec)
    elif case.spec is not None:
        ctx.spec.write_text(ctx.fill(case.spec))
    if case.prepare is not None:
        case.prepare(ctx)
    return ctx


def classify(case: Case, ctx: Ctx, out: Outcome, before: dict | None, after: dict | None) -> str:
    """'clean', or what went wrong: hang, traceback, accepted, half-write, unclear."""
    if out.code is None:
        return "hang"
    if out.code < 0:
        return f"crash (signal {-out.code})"
    if out.traceback:
        return "traceback"
    changed = before != after
    if case.db == "missing" and any((ctx.work / f).exists() for f in ("typo.db", "orch.db")):
        changed = True
    if out.code == 0:
        return "accepted" + (" (rows written)" if changed and not case.writes else "")
    if changed and not case.writes:
        return "half-write"
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]
    lines = out.stderr.strip().splitlines()
    one_line = len(errors) == 1 and (case.writes or len(lines) == 1) and lines[-1] == errors[0]
    if not one_line or ctx.fill(case.needle) not in errors[0] or out.code != case.code:
        return "unclear"
    return "clean"


def cleanup(work: Path) -> None:
    for p in [work, *work.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(work, ignore_errors=True)
