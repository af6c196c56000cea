"""A Hugging Face hub cache built offline, laid out as `huggingface_hub` writes it
(`models--ORG--NAME/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>,
refs/<branch or tag>}`), from the built-in tiny models saved with `save_pretrained` and a real
`tokenizers` byte-level tokenizer (ids 0..255 the bytes, as engine.models.ByteTokenizer), and a
fake hub (a local HTTP server answering as the hub does for a gated or missing repository).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def byte_tokenizer(eos: str = "</s>", extra: tuple[str, ...] = ()):
    """A PreTrainedTokenizerFast over UTF-8 bytes: ids 0..255 the bytes, 256 BOS, 257 `eos`,
    258/259 padding tokens (the tiny models' 260), then `extra` added tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    table = _bytes_to_unicode()
    assert set(table.values()) == set(byte_chars)
    vocab = {table[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", eos, "<pad0>", "<pad1>", *extra]
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 256)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token=eos, pad_token="<pad0>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (what ByteLevel pre-tokenizes into)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def save_tiny(name: str, folder: Path, tokenizer=None, perturb: float = 0.0) -> Path:
    """Built-in tiny model `name` saved as a Hugging Face folder (safetensors, config,
    tokenizer); `perturb` adds that much to every weight (another revision's weights)."""
    import torch

    from engine.tiny_models import build_tiny

    model = build_tiny(name)
    if perturb:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(perturb)
    model.save_pretrained(folder)
    (tokenizer or byte_tokenizer()).save_pretrained(folder)
    return folder


def put_snapshot(cache: Path, repo_id: str, folder: Path, refs: tuple[str, ...] = ("main",)) -> str:
    """Lay `folder`'s files into `cache` as the hub's snapshot of `repo_id`, under refs
    `refs`; returns its commit (a sha1 of the files' hashes, 40 hex digits)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    hashes = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files
    }
    commit = hashlib.sha1(repr(sorted(hashes.items())).encode()).hexdigest()
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo / "snapshots" / commit
    for p in files:
        rel = p.relative_to(folder).as_posix()
        blob = repo / "blobs" / hashes[rel]
        if not blob.exists():
            blob.write_bytes(p.read_bytes())
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (repo / "refs" / ref).write_text(commit)
    return commit


def build_cache(home: Path) -> dict[str, str]:
    """`home`/hub with lab/tiny-llama (main, and tag v2: other weights), lab/tiny-llama-draft
    (main) and lab/other-draft (a tokenizer with another eos token); returns
    {"repo@ref": commit}."""
    cache = home / "hub"
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        out["lab/tiny-llama@main"] = put_snapshot(
            cache, "lab/tiny-llama", save_tiny("tiny-llama", t / "t")
        )
        out["lab/tiny-llama@v2"] = put_snapshot(
            cache, "lab/tiny-llama", save_tiny("tiny-llama", t / "t2", perturb=1e-3), ("v2",)
        )
        out["lab/tiny-llama-draft@main"] = put_snapshot(
            cache, "lab/tiny-llama-draft", save_tiny("tiny-llama-draft", t / "d")
        )
        other = byte_tokenizer(eos="<eos>")
        out["lab/other-draft@main"] = put_snapshot(
            cache, "lab/other-draft", save_tiny("tiny-llama-draft", t / "o", tokenizer=other)
        )
    return out


class _FakeHub(BaseHTTPRequestHandler):
    """The hub's answers for a gated repository (lab/gated) and any other (not found)."""

    def _answer(self) -> None:
        if self.path.startswith("/lab/gated/"):
            self.send_response(401)
            self.send_header("X-Error-Code", "GatedRepo")
            self.send_header("X-Error-Message", "Access to model lab/gated is restricted.")
        else:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("X-Error-Message", "Repository not found")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


def fake_hub() -> tuple[str, ThreadingHTTPServer]:
    """A fake hub on 127.0.0.1 (its URL for HF_ENDPOINT, and the server to shut down)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server
