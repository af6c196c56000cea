"""Autoregressive decoding as the empty draft: a root-only tree, so the target forward is one
token and the verifier emits the target's own next token. The baseline of every speedup."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.tree import Tree


@dataclass(frozen=True)
class AutoregressiveConfig:
    pass


def build(
    draft: TreeBuilder, state: DecodeState, cfg: AutoregressiveConfig, gen: torch.Generator
) -> Tree:
    return draft.tree("deterministic")


DRAFTER = Drafter(
    name="autoregressive",
    config=AutoregressiveConfig,
    build=build,
    sampling=None,  # root-only trees
    default_verifier="naive",
    nodes=lambda c: 0,
    model_free=True,
)
