"""Bad inputs in files and folders (tests/reliability/cases.py): sweep files that are not
UTF-8 text, repeat keys or are odd documents, dataset files, model folders, output paths."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.reliability.harness import BOTH, GEN, SUBMIT, Case, Ctx, sweep


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


CASES: list[Case] = [
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
]
