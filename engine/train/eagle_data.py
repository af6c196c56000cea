"""The EAGLE head's training data: a corpus of Python source shipped with the interpreter, and
the target's features over it, computed once and cached on disk (SALF & TALF paper Sec. 2.2,
"the target LLM produces a training sequence x_{1:L}, their corresponding features").

Corpus. The `.py` files of the running interpreter's standard library (`sysconfig`'s stdlib,
without site-packages and the test suites), in sorted path order. A file is held out when the
first 8 hex digits of the sha256 of its path, as an integer, are divisible by 10 (`held_out`):
a fixed split of about a tenth for evaluation that needs no list. The training files (or, with
`split="held-out"`, the held-out ones: engine/train/eagle_calibration.py's test set) are read
in order until the chunks are full; a file containing any prompt of a shipped evaluation prompt
set (engine/datasets.py, 40 characters or more) is dropped, so training never overlaps them.
The split is recorded: each used file's path and sha256, the dropped ones, and one sha256 over
that listing (`Corpus.sha256`), so a checkpoint says exactly which text trained it.

Features. One no-grad target forward per chunk gives its final hidden states [T, H] (after the
final norm: the LM head's input, whose products are the target's logits, so the target's
distributions need no storing). They are saved once under ORCH_HOME/eagle_features/ as a .pt
with a .json beside it recording its sha256, the target's fingerprint and the tokens' sha256;
a later run with the same target and tokens reads the file back, checked against its sha256.
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.datasets import DATASETS, DatasetError, load_prompts
from engine.drafters.ddtree.block import target_fingerprint
from engine.fetch import orch_home

Progress = Callable[[str, int, int], None]  # (phase, done, total)
MIN_PROMPT = 40  # characters: shorter prompts are too generic to count as an overlap
SPLITS = ("train", "held-out")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def held_out(relpath: str) -> bool:
    """The fixed evaluation split: about one file in ten, by the sha256 of its path."""
    return int(hashlib.sha256(relpath.encode()).hexdigest()[:8], 16) % 10 == 0


def source_files(root: Path | None = None) -> list[str]:
    """The corpus's files, relative to the stdlib, sorted (held-out ones included)."""
    root = root or stdlib_dir()
    skip = ("site-packages", "test", "tests", "idlelib", "lib2to3")
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if not set(p.relative_to(root).parts[:-1]) & set(skip)
    )


def evaluation_prompts() -> list[str]:
    """The shipped prompt sets' prompts (those on this machine), for the overlap check."""
    out = []
    for name in DATASETS:
        try:
            out += [p.text.strip() for p in load_prompts(name)]
        except DatasetError:  # a prompt set whose file this machine lacks
            continue
    return [p for p in out if len(p) >= MIN_PROMPT]


@dataclass(frozen=True)
class Corpus:
    tokens: torch.Tensor  # [S, T] token ids: the files joined with EOS, cut into chunks
    files: tuple[tuple[str, str], ...]  # (path, sha256 of its bytes) of each file used
    dropped: tuple[str, ...]  # training files left out: they contain an evaluation prompt
    python: str  # the interpreter whose stdlib it is
    sha256: str  # of the listing above: the split, recorded
    split: str = "train"  # which side of `held_out` the files are on (SPLITS)

    def record(self) -> dict:
        return {
            "source": "python stdlib",
            "split": self.split,
            "python": self.python,
            "files": len(self.files),
            "first": self.files[0][0] if self.files else None,
            "last": self.files[-1][0] if self.files else None,
            "dropped": list(self.dropped),
            "sha256": self.sha256,
        }


def build_corpus(
    tokenizer, sequences: int, seq_len: int, root: Path | None = None, split: str = "train"
) -> Corpus:
    """`sequences` chunks of `seq_len` tokens from the training files, or with
    split="held-out" from the held-out ones (module docstring)."""
    if split not in SPLITS:
        raise ConfigError(f"split {split!r}: one of {', '.join(SPLITS)}")
    root = root or stdlib_dir()
    need, stream = sequences * seq_len, []
    files, dropped = [], []
    prompts = evaluation_prompts()
    for rel in source_files(root):
        if held_out(rel) != (split == "held-out"):
            continue
        raw = (root / rel).read_bytes()
        text = raw.decode("utf-8", errors="replace")
        if any(p in text for p in prompts):
            dropped.append(rel)
            continue
        files.append((rel, hashlib.sha256(raw).hexdigest()))
        stream += tokenizer.encode(text) + [tokenizer.eos_token_id]
        if len(stream) >= need:
            break
    if len(stream) < need:
        raise ConfigError(
            f"the stdlib's {split} files hold {len(stream)} tokens; --sequences x --seq-len "
            f"needs {need}"
        )
    listing = json.dumps({"files": files, "dropped": dropped}).encode()
    return Corpus(
        tokens=torch.tensor(stream[:need]).view(sequences, seq_len),
        files=tuple(files),
        dropped=tuple(dropped),
        python=sys.version.split()[0],
        sha256=hashlib.sha256(listing).hexdigest(),
        split=split,
    )


def features_dir() -> Path:
    return orch_home() / "eagle_features"


@torch.inference_mode()
def _compute(model, tokens: torch.Tensor, progress: Progress) -> torch.Tensor:
    out = []
    base = model.get_decoder()  # the decoder's final hidden states: no LM head needed
    for i, seq in enumerate(tokens):
        hidden = base(input_ids=seq[None].to(model.device)).last_hidden_state
        out.append(hidden[0].float().cpu())  # [T, H] after the final norm
        progress("target features", i + 1, len(tokens))
    return torch.stack(out)  # [S, T, H]


def cached_features(model, tokens: torch.Tensor, progress: Progress) -> tuple[torch.Tensor, dict]:
    """The target's features over `tokens` [S, T] -> [S, T, H] float32, from the cache when
    this target's features of these tokens are there (checked against the recorded sha256),
    else computed and saved; and the record of the file (path, sha256). The target's dtype is
    part of the key (bfloat16 features are stored as float32, not equal to float32's)."""
    fingerprint = target_fingerprint(model)
    tokens_sha = hashlib.sha256(tokens.numpy().astype("int64").tobytes()).hexdigest()
    dtype = str(model.dtype).removeprefix("torch.")
    suffix = "" if dtype == "float32" else f"/{dtype}"  # float32's keys as before
    key = hashlib.sha256(f"{fingerprint}/{tokens_sha}{suffix}".encode()).hexdigest()[:24]
    path = features_dir() / f"{key}.pt"
    meta_path = path.with_suffix(".json")
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if checkpoint.file_sha256(path) != meta["sha256"]:
            raise ConfigError(f"cached features {path} do not match their sha256: remove them")
        return torch.load(path, weights_only=True), meta
    feats = _compute(model, tokens, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.atomic_write(path, lambda f: torch.save(feats, f))
    meta = {
        "path": str(path),
        "sha256": checkpoint.file_sha256(path),
        "target_fingerprint": fingerprint,
        "tokens_sha256": tokens_sha,
        "dtype": dtype,
        "shape": list(feats.shape),
    }
    checkpoint.atomic_write(meta_path, lambda f: f.write(json.dumps(meta, indent=1).encode()))
    return feats, meta
