import functools
import os

import pytest
import torch

os.environ.setdefault(
    "ORCH_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
)


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


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Every test runs with one torch thread: on tiny models and small tensors torch's thread
    pool only adds overhead, up to 10x on a loaded 2-core machine. The real-pair test
    (test_real_golden.py) takes all cores back for itself with `all_threads`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield before
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def all_threads(one_thread):
    torch.set_num_threads(one_thread)
    yield
    torch.set_num_threads(1)
