"""A lab's own prompt files (engine/prompt_files.py): JSONL, JSON, CSV and Parquet give the same
prompts; the bundled sets' stratified sampling, prompt length cut and chat template; a file's
chat messages through the template; each bad file one line."""

from __future__ import annotations

import csv
import json

import pytest

from engine.datasets import DatasetError, encode_prompt
from engine.prompt_files import read_prompt_file, select_prompts
from tests.hub_cache import byte_tokenizer

ROWS = [
    {"id": "a", "topic": "poetry", "q": "Write a haiku about rain."},
    {"id": "b", "topic": "math", "q": "What is 2+2?"},
    {"id": "c", "topic": "poetry", "q": "A limerick about cats."},
    {"id": "d", "topic": "code", "q": "Reverse a list in Python."},
    {"id": "e", "topic": "math", "q": "Is 91 prime?"},
]


def write(path, rows=ROWS):
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_every_format_gives_the_same_prompts_stratified(tmp_path, suffix):
    pf = read_prompt_file(write(tmp_path / f"p{suffix}"), "q", "topic", "id")
    assert pf.label == f"p@{pf.sha256[:12]}" and len(pf.sha256) == 64
    picked = select_prompts(pf, 4)  # round-robin over poetry, math, code in first-seen order
    assert [p.id for p in picked] == ["a", "b", "d", "c"]
    assert [p.id for p in select_prompts(pf, 2, "math")] == ["b", "e"]
    assert [p.text for p in select_prompts(pf, 1)] == ["Write a haiku about rain."]
    plain = read_prompt_file(tmp_path / f"p{suffix}", "q")  # no category: file order, ids 1..
    assert [p.id for p in select_prompts(plain, 3)] == ["1", "2", "3"]


def test_chat_messages_the_template_and_the_length_cut(tmp_path):
    rows = [
        {"m": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
        {"m": "plain text"},
    ]
    pf = read_prompt_file(write(tmp_path / "c.jsonl", rows), "m")
    conv, text = pf.prompts
    assert conv.text == "Hi" and conv.messages == (("system", "Be brief."), ("user", "Hi"))
    tok = _hf(byte_tokenizer())
    ids = encode_prompt(tok, conv)
    assert tok.decode(ids) == "<system>Be brief.\n<user>Hi\n<assistant>"  # the whole conversation
    assert encode_prompt(tok, conv, prompt_tokens=5) == ids[-5:]  # templated: keeps its end
    assert encode_prompt(tok, text, chat=False, prompt_tokens=3) == [256, *b"pl"]  # plain: start


def _hf(tok):
    from engine.models import HFTokenizer

    return HFTokenizer(tok)


BAD = [
    (
        "missing field",
        "p.jsonl",
        b'{"prompt": "x"}\n',
        "row 1 has no field 'q' (its fields: prompt)",
    ),
    ("empty", "p.jsonl", b"\n\n", "has no rows"),
    ("not utf-8", "p.jsonl", b'{"q": "ok"}\n{"q": "\xff"}\n', "is not UTF-8 text (line 2)"),
    (
        "not an object",
        "p.jsonl",
        b'{"q": "ok"}\n[1, 2]\n',
        "row 2: not an object with named fields",
    ),
    ("bad json line", "p.jsonl", b'{"q": "ok"}\n{"q": \n', "line 2: not a JSON object"),
    ("empty prompt", "p.csv", b"q\n\n   \n", "row 1: field 'q' is empty"),
    ("not text", "p.json", b'[{"q": 3}]', "field 'q' is neither text nor a list of chat messages"),
    ("bad messages", "p.json", b'[{"q": [{"role": "user"}]}]', "needs a role and a content"),
    ("not parquet", "p.parquet", b"PAR1 no", "not a readable Parquet file"),
    ("unknown format", "p.txt", b"q", "unknown format '.txt'"),
    ("duplicate ids", "p.csv", b"q,id\nx,1\ny,1\n", "id '1' appears more than once"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_files_are_one_line(tmp_path, case):
    _, name, raw, needle = case
    path = tmp_path / name
    path.write_bytes(raw)
    id_field = "id" if b"id" in raw.split(b"\n")[0] else None
    with pytest.raises(DatasetError) as e:
        read_prompt_file(path, "q", id_field=id_field)
    assert needle in str(e.value) and "\n" not in str(e.value) and str(path) in str(e.value)


def test_too_few_prompts_and_unknown_category(tmp_path):
    pf = read_prompt_file(write(tmp_path / "p.jsonl"), "q", "topic")
    with pytest.raises(DatasetError, match=r"asked for 6 prompts but prompt file .* has 5$"):
        select_prompts(pf, 6)
    with pytest.raises(DatasetError, match="has 2 in category 'math'"):
        select_prompts(pf, 3, "math")
    with pytest.raises(DatasetError, match="no category 'art' .categories: poetry, math, code"):
        select_prompts(pf, 1, "art")
    with pytest.raises(DatasetError, match="not found"):
        read_prompt_file(tmp_path / "absent.jsonl", "q")


def test_a_stored_sweeps_file_must_still_be_the_one_submitted(tmp_path):
    """The driver that resumes a sweep reads its prompt file again (load_file_prompts): the
    same bytes give the same prompts, an edited file is refused in one line."""
    from engine.prompt_files import load_file_prompts

    path = write(tmp_path / "p.jsonl")
    pf = read_prompt_file(path, "q", "topic", "id")
    again = load_file_prompts(path, pf.sha256, "q", "topic", "id", 3, None)
    assert again == select_prompts(pf, 3)
    path.write_text(path.read_text().replace("haiku", "sonnet"))
    with pytest.raises(DatasetError, match=r"changed since the sweep was submitted \(sha256 "):
        load_file_prompts(path, pf.sha256, "q", "topic", "id", 3, None)
