"""What a tree builder may know about the decoding so far: `DecodeState`, made by the decoding
loop (engine/decode.py) once per iteration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.sampling import Warp


@dataclass(frozen=True)
class DecodeState:
    """What a tree builder may know about the decoding so far."""

    prefix_len: int  # committed tokens before the root (= target cache length)
    root_token: int  # the last committed token, node 0 of the tree
    warp: Warp  # the target's: what the verifier compares against
    remaining: int  # tokens still to emit; a tree deeper than this is wasted work
    history: tuple[int, ...] = ()  # accepted draft tokens of each earlier iteration
    history_depth: tuple[int, ...] = ()  # depth of each earlier iteration's draft tree
    history_size: tuple[int, ...] = ()  # drafted nodes of each earlier iteration's tree
    # the committed tokens (prompt + emitted, the root last), for model-free drafters (prompt
    # lookup): the decode loop's own list, passed by reference (no copy per iteration), so a
    # drafter reads it during build and never keeps or mutates it
    context: Sequence[int] = ()
    # the draft's warp, what every drafter draws from and scores with, and whose greediness
    # decides the tree's sampling mode (engine/tree.py TreeSampling); None: the target's
    draft_warp: Warp | None = None
    # the method's learned part opened for this generation by its record's `attach`
    # (engine/drafters/record.py): DDTree's trained block drafter fed with the target's
    # features (engine/drafters/ddtree/block_context.py BlockContext), the delayed tree's NDE
    # taps (engine/drafters/delayed/taps.py RootTaps); None for every other method
    attached: Any = None

    def __post_init__(self) -> None:
        if self.draft_warp is None:
            object.__setattr__(self, "draft_warp", self.warp)
