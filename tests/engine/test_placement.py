"""The placement planner (engine/placement.py) on a tiny model's folder, without GPUs: the
device map splits the decoder layers over the GPUs in order within each GPU's budget, leaves
the draft's share of GPU 0, marks what does not fit as offloaded with `offload: cpu`, and
refuses in one line without it."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError
from engine.placement import describe, parse_memory, plan
from tests.hub_cache import save_tiny


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(save_tiny("tiny-llama", tmp_path_factory.mktemp("m") / "t"))


def _gpu_of_layers(dmap):
    """Each decoder layer's device, in layer order (a whole `model.layers` on one device)."""
    if "model.layers" in dmap:
        return [dmap["model.layers"]] * 4
    return [dmap[f"model.layers.{i}"] for i in range(4)]


def test_layers_are_split_in_order_over_the_gpus(folder):
    one = plan(folder, torch.float32, 1, parse_memory("4MiB"))
    assert set(one.values()) == {0}
    two = plan(folder, torch.float32, 2, parse_memory("900KiB"))
    assert set(two.values()) == {0, 1}
    layers = _gpu_of_layers(two)
    assert layers == sorted(layers)  # in order: GPU 0's layers before GPU 1's
    four = plan(folder, torch.float32, 4, parse_memory("400KiB"), draft_bytes=0)
    assert len(set(four.values())) >= 3


def test_offload_marks_the_rest_cpu_and_without_it_refuses(folder):
    small = parse_memory("400KiB")
    dmap = plan(folder, torch.float32, 2, small, offload="cpu", draft_bytes=300 << 10)
    assert "cpu" in dmap.values() and 1 in dmap.values()
    assert dmap.get("model.embed_tokens") != 0  # GPU 0 kept for the draft's 300 KiB
    with pytest.raises(ConfigError, match=r"target needs .* of weights; 2 GPUs of 400.0 KiB"):
        plan(folder, torch.float32, 2, small)


def test_memory_amounts_and_labels():
    assert parse_memory("80GiB") == 80 * 2**30 and parse_memory("40GB") == 40 * 10**9
    assert parse_memory("1.5MiB") == 3 * 2**19 and parse_memory(1024) == 1024
    for bad in ("lots", "-1GiB", "0GB", "12XB"):
        with pytest.raises(ConfigError, match="is not an amount of memory"):
            parse_memory(bad)
    assert describe(None) == "" and describe({"gpus_per_trial": 4}) == " x4"
    assert describe({"gpus_per_trial": 2, "offload": "cpu"}) == " x2 +offload cpu"
