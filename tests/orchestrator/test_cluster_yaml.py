"""cluster.yaml passes Ray's own cluster-config validation (what `ray up` runs first)."""

from __future__ import annotations

import pytest
import yaml
from orch_helpers import REPO


def test_cluster_yaml_validates_with_ray():
    pytest.importorskip("jsonschema")
    from ray.autoscaler._private.util import prepare_config, validate_config

    raw = yaml.safe_load((REPO / "cluster.yaml").read_text())
    validate_config(prepare_config(raw))
    nodes = raw["available_node_types"]
    assert nodes[raw["head_node_type"]]["resources"] == {"CPU": 0}  # driver only
    assert any(
        n.get("min_workers", 0) >= 1 and n["node_config"]["InstanceType"].startswith("g")
        for n in nodes.values()
    )
    assert any("pip install" in c and "[gpu" in c for c in raw["setup_commands"])
    head = " ".join(raw["head_setup_commands"])
    assert "ORCH_DB_URL=postgresql+psycopg://" in head
    assert ":" not in head.split("postgresql+psycopg://")[1].split("@")[0]  # no password
