"""Types shared by all verifiers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Accept:
    path: list[int]  # accepted node indices below the root, root-to-leaf order
    token: int  # the next token after the path: correction on rejection, else bonus
