"""The engine's small tokenizer protocol: the tiny models' byte-level tokenizer and an
adapter for Hugging Face tokenizers (engine/models.py loads them; engine/datasets.py encodes
prompts with them)."""

from __future__ import annotations

from typing import Any

BYTE_VOCAB = 256
BOS_ID, EOS_ID = 256, 257
TINY_VOCAB = 260  # 256 bytes + BOS + EOS, padded


class ByteTokenizer:
    """UTF-8 bytes as token ids 0..255, plus BOS and EOS; no chat template."""

    eos_token_id = EOS_ID
    bos_token_id = BOS_ID
    vocab_size = TINY_VOCAB

    def encode(self, text: str) -> list[int]:
        return [BOS_ID] + list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < BYTE_VOCAB).decode("utf-8", errors="replace")

    def chat_template_encode(self, text: str, messages=None) -> list[int] | None:
        return None


class HFTokenizer:
    """Adapter giving a Hugging Face tokenizer the engine's small tokenizer protocol."""

    def __init__(self, tok: Any):
        self.tok = tok
        self.eos_token_id = tok.eos_token_id
        self.bos_token_id = tok.bos_token_id
        self.vocab_size = len(tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)

    def chat_template_encode(self, text: str, messages=None) -> list[int] | None:
        """A user turn `text`, or a whole conversation `messages` ((role, content), ...),
        with the generation prompt; None without a chat template."""
        if not getattr(self.tok, "chat_template", None):
            return None
        turns = [{"role": r, "content": c} for r, c in messages or (("user", text),)]
        out = self.tok.apply_chat_template(turns, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)


class SyntheticTokenizer:
    """The tokenizer of random-weight and synthetic models (engine/synthetic.py): UTF-8 bytes
    as ids 0..255 of a `vocab_size` vocabulary, no BOS, no EOS (no token ends a generation
    early: a planted successor may be any id), other ids decoded as `<N>`; no chat template."""

    eos_token_id = None
    bos_token_id = None

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        out, run = [], bytearray()
        for i in ids:
            if i < BYTE_VOCAB:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace") + f"<{i}>")
            run = bytearray()
        return "".join(out) + run.decode("utf-8", errors="replace")

    def chat_template_encode(self, text: str, messages=None) -> list[int] | None:
        return None
