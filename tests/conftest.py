import functools
import os

import pytest
import torch

os.environ.setdefault("ORCH_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


@functools.lru_cache(maxsize=None)
def _pair(family: str):
    from engine.models import load_pair

    return load_pair(f"tiny-{family}", f"tiny-{family}-draft")


@pytest.fixture(scope="session", params=["llama", "neox"])
def tiny_pair(request):
    """Both tiny families (target, draft derived from it), loaded once per session."""
    return _pair(request.param)


@pytest.fixture(scope="session")
def llama_pair():
    return _pair("llama")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models and small tensor ops: torch's thread pool makes them up to 10x slower on a
    loaded 2-core machine. Modules opt in with `pytestmark = pytest.mark.usefixtures(...)`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
