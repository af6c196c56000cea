"""cluster.yaml passes Ray's own cluster-config validation (what `ray up` runs first), as
written (a cloud) and in the on-premises form its comment block describes."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.orchestrator.orch_helpers import REPO

RAW = yaml.safe_load((REPO / "cluster.yaml").read_text())


def _validate(raw: dict) -> dict:
    pytest.importorskip("jsonschema")
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(copy.deepcopy(raw))
    validate_config(config)
    return config


def test_cluster_yaml_validates_with_ray():
    _validate(RAW)
    nodes = RAW["available_node_types"]
    assert nodes[RAW["head_node_type"]]["resources"] == {"CPU": 0}  # driver only
    assert any(
        n.get("min_workers", 0) >= 1 and n["node_config"]["InstanceType"].startswith("g")
        for n in nodes.values()
    )
    assert any("pip install" in c and "[gpu" in c for c in RAW["setup_commands"])
    head = " ".join(RAW["head_setup_commands"])
    assert "ORCH_DB_URL=postgresql+psycopg://" in head
    assert ":" not in head.split("postgresql+psycopg://")[1].split("@")[0]  # no password
    assert "ORCH_DATA_DIR" not in yaml.safe_dump(RAW)  # prompts ship with the package


def test_the_on_premises_form_validates():
    """The comment block's recipe: provider local with a list of hosts, no node types."""
    raw = {
        k: v
        for k, v in RAW.items()
        if k
        not in (
            "available_node_types",
            "head_node_type",
            "max_workers",
            "upscaling_speed",
            "idle_timeout_minutes",
        )
    }
    raw["provider"] = {
        "type": "local",
        "head_ip": "10.0.0.10",
        "worker_ips": ["10.0.0.11", "10.0.0.12"],
    }
    raw["auth"] = {"ssh_user": "ubuntu", "ssh_private_key": "~/.ssh/id_rsa"}
    config = _validate(raw)
    assert config["setup_commands"] == RAW["setup_commands"]
    text = (REPO / "cluster.yaml").read_text()
    assert "type: local" in text and "worker_ips" in text  # the recipe is in the file
