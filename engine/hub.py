"""Models by Hugging Face id (`meta-llama/Llama-2-7b-hf`), resolved as the Hugging Face
libraries resolve them, on whichever machine asks (docs/models.md).

- Where: the hub cache `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`
  (the layout `huggingface_hub` writes: `models--ORG--NAME/{blobs,refs,snapshots/<commit>}`),
  read at call time (not at import, as huggingface_hub's constants are), so one process may
  point at another cache. `HF_HUB_OFFLINE=1`: the cache only. `HF_ENDPOINT`: another hub.
- Tokens: huggingface_hub reads the machine's own (`HF_TOKEN`, or `hf auth login`'s file);
  nothing here takes, stores or prints one, and no job carries one.
- The driver (`check`) never downloads: a cached revision gives its commit; offline and not
  cached is refused where the trials run on this machine; online, one metadata request for
  the revision's config.json answers found / not found / gated / no such revision and gives
  the commit; where the hub cannot be reached the id's form is accepted and the worker
  decides (`download`, which names the id and why in one line).
- A pinned `revision` (branch, tag or commit) resolves to a commit; a trial stores the commit
  where the driver could resolve it, so a new revision is a new trial, and every loaded model
  records the commit it loaded (orchestrator/run/trial.py model_info).
- `check_tokenizers`: a target and a draft must share one tokenizer, compared from their
  config and tokenizer files before any weights load.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ConfigError

# ORG/NAME as the hub spells repository ids (one slash; letters, digits, -, _, .)
HUB_ID = re.compile(r"[A-Za-z0-9][\w\-.]{0,95}/[\w\-.]{1,96}")
COMMIT = re.compile(r"[0-9a-f]{40}")
HUB_TIMEOUT_S = 10.0
# what a trial downloads of a repository: configs, tokenizer, weights (one format)
META_FILES = ["*.json", "*.model", "*.txt", "*.tiktoken", "*.jinja", "*.py"]
WEIGHTS = (["*.safetensors"], ["*.bin"], ["*.pt"])


def is_hub_id(name: str) -> bool:
    """`name` has the form of a hub id (ORG/NAME); a folder that exists wins (as in
    transformers), so callers ask this only of names that are not folders here."""
    return (
        isinstance(name, str)
        and bool(HUB_ID.fullmatch(name))
        and ".." not in name
        and not name.endswith((".git", "."))
    )


def cache_dir() -> Path:
    """The hub cache this process reads (module doc), from the environment now."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return xdg / "huggingface" / "hub"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def label(repo_id: str, revision: str | None) -> str:
    return repo_id if revision in (None, "main") else f"{repo_id}@{revision}"


@dataclass(frozen=True)
class Snapshot:
    """One revision of a repository as it lies in the cache."""

    repo_id: str
    commit: str
    folder: Path  # snapshots/<commit>


def cached(repo_id: str, revision: str | None = None) -> Snapshot | None:
    """The cached snapshot of `repo_id` at `revision` (None: main) holding a config.json,
    or None. A branch or tag resolves through refs/, a commit directly."""
    repo = cache_dir() / ("models--" + repo_id.replace("/", "--"))
    rev = revision or "main"
    commit: str | None = rev if COMMIT.fullmatch(rev) else None
    if commit is None:
        try:
            commit = (repo / "refs" / rev).read_text().strip() or None
        except (OSError, UnicodeDecodeError):
            return None
    folder = repo / "snapshots" / str(commit)
    if commit is None or not (folder / "config.json").is_file():
        return None
    return Snapshot(repo_id, commit, folder)


def why(repo_id: str, revision: str | None, e: BaseException) -> str:
    """One line: what the hub (or the cache) said about `repo_id` at `revision`."""
    from huggingface_hub import errors  # lazy: huggingface_hub

    name = label(repo_id, revision)
    if isinstance(e, errors.GatedRepoError):
        return (
            f"model {name} is gated on the Hugging Face hub: accept its license there and give "
            f"the workers a token with access (HF_TOKEN)"
        )
    if isinstance(e, errors.RevisionNotFoundError):
        return f"model {repo_id} has no revision {revision!r} on the Hugging Face hub"
    if isinstance(e, errors.RepositoryNotFoundError):
        return (
            f"model {name} not found on the Hugging Face hub (a private model needs a token "
            f"with access: HF_TOKEN)"
        )
    if isinstance(e, errors.LocalEntryNotFoundError):
        where = "HF_HUB_OFFLINE is set" if offline() else "the hub cannot be reached"
        return f"model {name} is not in the Hugging Face cache {cache_dir()} and {where}"
    if isinstance(e, errors.EntryNotFoundError):
        return f"model {name} has no config.json: not a transformers model"
    if isinstance(e, errors.HfHubHTTPError):
        status = getattr(e.response, "status_code", "?") if e.response is not None else "?"
        return f"model {name}: the Hugging Face hub answered HTTP {status}"
    first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
    return f"model {name}: cannot reach the Hugging Face hub: {first}"[:300]


def check(repo_id: str, revision: str | None, here: bool) -> str | None:
    """The driver's check of a hub id, without downloading (module doc): the commit of
    `revision` where the cache or the hub says it, None where this machine cannot know (the
    worker decides). `here`: the trials run on this machine, so its cache is theirs.
    ConfigError, one line, for a model that is not there, gated, or without that revision."""
    snap = cached(repo_id, revision)
    if snap is not None:
        return snap.commit
    if offline():
        if here:
            raise ConfigError(
                f"model {label(repo_id, revision)} is not in the Hugging Face cache "
                f"{cache_dir()} and HF_HUB_OFFLINE is set (download it where the hub is "
                f"reachable, or point HF_HOME at a cache that has it)"
            )
        return None
    from huggingface_hub import errors, get_hf_file_metadata, hf_hub_url  # lazy: huggingface_hub

    url = hf_hub_url(repo_id, "config.json", revision=revision, endpoint=endpoint())
    try:
        meta = get_hf_file_metadata(url, timeout=HUB_TIMEOUT_S, endpoint=endpoint())
    except errors.HfHubHTTPError as e:
        status = getattr(e.response, "status_code", 500) if e.response is not None else 500
        if status >= 500:
            return None  # the hub is having trouble: the worker tries again
        raise ConfigError(why(repo_id, revision, e)) from None
    except Exception:  # noqa: BLE001 - no network here (DNS, proxy, timeout): the worker decides
        return None
    return meta.commit_hash


def download(repo_id: str, revision: str | None) -> Snapshot:
    """The worker's copy of `repo_id` at `revision`: the cache's, downloaded first where the
    worker is online and lacks it (configs, tokenizer and one weight format). ConfigError
    naming the id and why otherwise."""
    snap = cached(repo_id, revision)
    if snap is not None and _has_weights(snap.folder):
        return snap
    if offline():
        raise ConfigError(
            f"model {label(repo_id, revision)} is not in the Hugging Face cache {cache_dir()} "
            f"(with its weights) and HF_HUB_OFFLINE is set"
        )
    from huggingface_hub import HfApi, snapshot_download  # lazy: huggingface_hub

    try:
        info = HfApi(endpoint=endpoint()).model_info(repo_id, revision=revision)
        files = [s.rfilename for s in info.siblings or []]
        weights = next((w for w in WEIGHTS if any(Path(f).match(w[0]) for f in files)), WEIGHTS[0])
        folder = snapshot_download(
            repo_id,
            revision=info.sha,
            cache_dir=cache_dir(),
            allow_patterns=META_FILES + weights,
            endpoint=endpoint(),
        )
    except Exception as e:  # noqa: BLE001 - every failure becomes the one line of `why`
        raise ConfigError(why(repo_id, revision, e)) from None
    return Snapshot(repo_id, Path(folder).name, Path(folder))


def _has_weights(folder: Path) -> bool:
    return any(next(folder.glob(w[0]), None) for w in WEIGHTS)


# ----------------------------------------------------------------------------- tokenizers


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _token(value: Any) -> str | None:
    """A special token as tokenizer_config.json gives it (a string or {"content": ...})."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


SPECIALS = ("bos", "eos", "unk", "pad")


def tokenizer_signature(folder: Path) -> dict[str, Any] | None:
    """What identifies a model folder's tokenizer, from its files alone: the vocabulary
    (tokenizer.json's tokens and added tokens with their ids, or the sentencepiece model's
    bytes), its size, and the special tokens (tokenizer_config.json, special_tokens_map.json,
    config.json's ids). None when the folder has no tokenizer files."""
    folder = Path(folder)
    cfg = _json(folder / "config.json") or {}
    tok = _json(folder / "tokenizer.json")
    tc = {**(_json(folder / "special_tokens_map.json") or {})}
    tc.update(_json(folder / "tokenizer_config.json") or {})
    sp = folder / "tokenizer.model"
    if tok is None and not sp.is_file() and not tc:
        return None
    sig: dict[str, Any] = {"config_vocab": cfg.get("vocab_size")}
    if isinstance(tok, dict):
        vocab = (tok.get("model") or {}).get("vocab") or {}
        if isinstance(vocab, dict):
            pairs = vocab.items()
        else:  # Unigram: [[piece, score], ...] in id order
            pairs = ((p[0], i) for i, p in enumerate(vocab))
        table = {str(t): int(i) for t, i in pairs}
        for a in tok.get("added_tokens") or []:
            table[str(a.get("content"))] = int(a.get("id", -1))
        blob = json.dumps(sorted(table.items(), key=lambda kv: (kv[1], kv[0])))
        sig["tokens"] = len(table)
        sig["vocab"] = hashlib.sha256(blob.encode()).hexdigest()
        sig["ids"] = table
    if sp.is_file():
        sig["sentencepiece"] = hashlib.sha256(sp.read_bytes()).hexdigest()
    for s in SPECIALS:
        text = _token(tc.get(f"{s}_token"))
        if text is not None:
            sig[f"{s}_token"] = text
        if isinstance(cfg.get(f"{s}_token_id"), int):
            sig[f"{s}_id"] = cfg[f"{s}_token_id"]
    return sig


def tokenizer_mismatch(t: dict[str, Any], d: dict[str, Any]) -> str | None:
    """Why two signatures are not one tokenizer (compared only on what both have), or None."""
    for s in SPECIALS:
        for key, shown in ((f"{s}_token", f"{s} token"), (f"{s}_id", f"{s}_token_id")):
            if key in t and key in d and t[key] != d[key]:
                return f"{shown} differs ({t[key]!r} vs {d[key]!r})"
    if "vocab" in t and "vocab" in d and t["vocab"] != d["vocab"]:
        if t["tokens"] != d["tokens"]:
            return f"vocabularies differ ({t['tokens']} vs {d['tokens']} tokens)"
        moved = sum(1 for k, i in t["ids"].items() if d["ids"].get(k) != i)
        return f"vocabularies differ ({moved} of {t['tokens']} tokens have other ids)"
    both_sp = "sentencepiece" in t and "sentencepiece" in d
    if ("vocab" not in t or "vocab" not in d) and both_sp:
        if t["sentencepiece"] != d["sentencepiece"]:
            return "their sentencepiece models (tokenizer.model) differ"
    if "vocab" not in t and "sentencepiece" not in t:
        a, b = t.get("config_vocab"), d.get("config_vocab")
        if a and b and a != b:
            return f"vocabularies differ ({a} vs {b} in config.json)"
    return None


def check_tokenizers(target: str, t_folder: Path | None, draft: str, d_folder: Path | None) -> None:
    """ConfigError, one line, when the target's and draft's tokenizer files (where this
    machine has both) show two tokenizers: no method here translates between them."""
    if t_folder is None or d_folder is None:
        return
    t, d = tokenizer_signature(t_folder), tokenizer_signature(d_folder)
    if t is None or d is None:
        return
    problem = tokenizer_mismatch(t, d)
    if problem:
        raise ConfigError(
            f"target {target} and draft {draft} do not share a tokenizer: {problem} "
            f"(no method here translates between tokenizers; pick a draft of the target's family)"
        )
