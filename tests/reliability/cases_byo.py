"""Bad inputs of a lab's own models, prompts and placement (tests/reliability/cases.py):
Hugging Face ids the cache lacks offline, revisions where none applies, two tokenizers in one
pair, prompt files that cannot be read as prompts, placements that cannot be had."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.reliability.harness import GEN, SUBMIT, Case, Ctx, sweep

OFFLINE = (("HF_HOME", "{work}/hf"), ("HF_HUB_OFFLINE", "1"))


def _pair_folders(target_eos: str, draft_eos: str) -> Callable[[Ctx], None]:
    """{work}/t and {work}/d: model folders whose tokenizer files name these eos tokens."""

    def prepare(ctx: Ctx) -> None:
        for name, eos in (("t", target_eos), ("d", draft_eos)):
            d = ctx.work / name
            d.mkdir()
            (d / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 260}))
            (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos}))
            (d / "model.safetensors").write_bytes(b"\0" * 8)

    return prepare


def _prompt_file(name: str, raw: bytes) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        (ctx.work / name).write_bytes(raw)

    return prepare


def _file_sweep(name: str = "p.jsonl", extra: str = "") -> str:
    return sweep(dataset="{path: %s, field: q, prompts: 2%s}" % (f"{{work}}/{name}", extra))


def _llama_head(ctx: Ctx) -> None:
    """{work}/head: a random EAGLE head for tiny-llama in the public format."""
    from engine.models import load_model
    from engine.runtime.eagle_format import save_folder
    from engine.runtime.eagle_head import EagleHead, head_config

    save_folder(EagleHead(head_config(load_model("tiny-llama").model.config)), ctx.work / "head")


ROWS = b'{"q": "one"}\n{"q": "two"}\n'
FOLDER = "{work}/t"
CASES: list[Case] = [
    # -- Hugging Face ids
    Case(
        "hub-id-offline-not-cached",
        SUBMIT,
        "pairs[0].target: model lab/absent is not in the Hugging Face cache",
        spec=sweep(target="lab/absent"),
        env=OFFLINE,
    ),
    Case(
        "hub-revision-offline-not-cached",
        SUBMIT,
        "model lab/absent@v2 is not in the Hugging Face cache",
        spec=sweep(target="{name: lab/absent, revision: v2}"),
        env=OFFLINE,
    ),
    Case(
        "generate-hub-id-offline-not-cached",
        (*GEN, "--target", "lab/absent", "--draft", "none", "--method", "autoregressive"),
        "model lab/absent is not in the Hugging Face cache",
        env=OFFLINE,
    ),
    Case(
        "revision-of-a-built-in-model",
        SUBMIT,
        "a revision applies to Hugging Face ids (ORG/NAME) only",
        spec=sweep(target="{name: tiny-llama, revision: main}"),
    ),
    Case(
        "revision-with-a-space",
        SUBMIT,
        "pairs[0].target.revision: no spaces in a revision",
        spec=sweep(target="{name: lab/x, revision: 'my branch'}"),
    ),
    Case(
        "model-entry-unknown-key",
        SUBMIT,
        "pairs[0].target.rev: unknown key (known: name, revision)",
        spec=sweep(target="{name: lab/x, rev: main}"),
    ),
    Case(
        "pair-with-two-tokenizers",
        SUBMIT,
        "do not share a tokenizer: eos token differs ('</s>' vs '<|im_end|>')",
        spec=sweep(target=FOLDER).replace("draft: tiny-llama-draft", "draft: {work}/d"),
        prepare=_pair_folders("</s>", "<|im_end|>"),
    ),
    # -- prompt files
    Case(
        "prompt-file-missing",
        SUBMIT,
        "dataset: prompt file {work}/p.jsonl not found",
        spec=_file_sweep(),
    ),
    Case(
        "prompt-file-field-missing",
        SUBMIT,
        "row 1 has no field 'q' (its fields: prompt)",
        spec=_file_sweep(),
        prepare=_prompt_file("p.jsonl", b'{"prompt": "x"}\n'),
    ),
    Case(
        "prompt-file-empty",
        SUBMIT,
        "prompt file {work}/p.jsonl has no rows",
        spec=_file_sweep(),
        prepare=_prompt_file("p.jsonl", b""),
    ),
    Case(
        "prompt-file-not-utf8",
        SUBMIT,
        "prompt file {work}/p.csv is not UTF-8 text (line 3)",
        spec=_file_sweep("p.csv"),
        prepare=_prompt_file("p.csv", b"q\none\nt\xffo\n"),
    ),
    Case(
        "prompt-file-too-few-prompts",
        SUBMIT,
        "asked for 5 prompts but prompt file {work}/p.jsonl has 2",
        spec=_file_sweep(extra=", prompts: 5").replace("prompts: 2, prompts: 5", "prompts: 5"),
        prepare=_prompt_file("p.jsonl", ROWS),
    ),
    Case(
        "prompt-file-not-parquet",
        SUBMIT,
        "prompt file {work}/p.parquet: not a readable Parquet file",
        spec=_file_sweep("p.parquet"),
        prepare=_prompt_file("p.parquet", b"PAR1 this is not one"),
    ),
    Case(
        "prompt-file-unknown-key",
        SUBMIT,
        "dataset.feild: unknown key",
        spec=sweep(dataset="{path: p.jsonl, feild: q}"),
    ),
    # -- placement
    Case(
        "placement-zero-gpus",
        SUBMIT,
        "placement.gpus_per_trial: must be >= 1, got 0",
        spec=sweep(extra="placement: {gpus_per_trial: 0}\n"),
    ),
    Case(
        "placement-offload-to-disk",
        SUBMIT,
        "placement.offload: 'disk' is not one of cpu",
        spec=sweep(extra="placement: {offload: disk}\n"),
    ),
    Case(
        "placement-memory-not-an-amount",
        SUBMIT,
        "placement.gpu_memory: 'lots' is not an amount of memory",
        spec=sweep(extra="placement: {gpus_per_trial: 2, gpu_memory: lots}\n"),
    ),
    Case(
        "placement-of-a-built-in-model",
        SUBMIT,
        "placement: applies to models loaded from files (a hub id or a folder), not pairs[0]",
        spec=sweep(extra="placement: {offload: cpu}\n"),
    ),
    Case(
        "placement-without-the-gpus",
        SUBMIT,
        "placement.gpus_per_trial 4: this machine has 0 GPUs for the local executor",
        spec=sweep(target=FOLDER, extra="placement: {gpus_per_trial: 4}\ndevice: cpu\n"),
        prepare=_pair_folders("</s>", "</s>"),
        needs="no-cuda",
    ),
    # -- EAGLE heads as drafts (docs/eagle.md)
    Case(
        "eagle-draft-without-a-name",
        (*GEN, "--target", "tiny-llama", "--draft", "eagle:", "--method", "beam"),
        "an EAGLE draft is eagle:CHECKPOINT or eagle:PATH, with a name",
    ),
    Case(
        "eagle-draft-checkpoint-absent",
        (*GEN, "--target", "tiny-llama", "--draft", "eagle:absent", "--method", "beam"),
        "no checkpoint 'absent'",
    ),
    Case(
        "eagle-draft-folder-without-config",
        SUBMIT,
        "pairs[0].draft: EAGLE head folder",
        spec=sweep().replace("tiny-llama-draft", "'eagle:{work}/nohead'"),
    ),
    Case(
        "eagle-head-of-another-family",
        (*GEN, "--target", "tiny-neox", "--draft", "eagle:{work}/head", "--method", "beam"),
        "an EAGLE head drafts for a llama or qwen2 target; this target is gpt_neox",
        prepare=_llama_head,
    ),
]
