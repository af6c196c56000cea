import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_thread_for_drafters(one_thread):
    """Every drafter test runs single-threaded (see tests/conftest.py: one_thread)."""
