"""The draft side of one decoding iteration: what every tree method grows its tree with.

state.py    DecodeState: what a tree builder may know about the decoding so far
builder.py  TreeBuilder: the tree being grown on the host, `add` and `expand`
model.py    DraftModel: the draft LM with its cache, the Feed that runs it for the builder
none.py     NoDraft: the draft side of a model-free method (no draft model)
growth.py   the parts of a device plan: a tree grown with static shapes on the device
"""

from __future__ import annotations

from engine.draft.builder import Batch, TreeBuilder
from engine.draft.model import DraftModel
from engine.draft.none import NoDraft
from engine.draft.state import DecodeState

__all__ = ["Batch", "DecodeState", "DraftModel", "NoDraft", "TreeBuilder"]
