import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def one_thread():
    """These tests run many tiny forwards and small tensor ops; on the shared 2-core machines
    torch's thread pool makes them 10x slower under load. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
