"""A sweep's model pairs checked before any model loads (expand.py): every name resolved
(engine.models.locate: built-in, fetched, folder or Hugging Face id, with its revision's
commit where this machine can tell), target and draft compared for one tokenizer from their
files, and a placement checked against what it can place."""

from __future__ import annotations

from engine.config import ConfigError
from orchestrator.spec.types import Sweep
from orchestrator.spec.values import SpecError


def pair_commits(
    sweep: Sweep, source: str, local: bool = True
) -> list[tuple[str | None, str | None]]:
    """Per pair, the (target, draft) revisions trials store: a hub id's commit where the cache
    or the hub gave it (a new revision is a new trial), else its revision as given (None:
    main, or not a hub id). SpecError, one line, for a model that cannot be had, a pair whose
    files show two tokenizers, or a placement for a model it cannot place."""
    from engine.models import NO_DRAFT, check_pair_tokenizers, locate  # lazy: torch

    out = []
    for i, (target, draft) in enumerate(sweep.pairs):
        revs = sweep.pair_revisions(i)
        got = []
        for role, name, rev in (("target", target, revs[0]), ("draft", draft, revs[1])):
            if role == "draft" and name == NO_DRAFT:
                got.append(None)
                continue
            try:
                kind, commit = locate(name, local=local, revision=rev)
            except ConfigError as e:
                raise SpecError(f"{source}: pairs[{i}].{role}: {e}") from None
            if role == "target" and sweep.placement and kind in ("tiny", "checkpoint"):
                raise SpecError(
                    f"{source}: placement: applies to models loaded from files (a hub id or a "
                    f"folder), not pairs[{i}].target {name}"
                )
            got.append(commit or rev)
        if draft != NO_DRAFT:
            try:
                check_pair_tokenizers(target, draft, revs)
            except ConfigError as e:
                raise SpecError(f"{source}: pairs[{i}]: {e}") from None
        out.append((got[0], got[1]))
    if sweep.placement and set(sweep.engines) != {"eager"}:
        raise SpecError(
            f"{source}: placement: a target spread over GPUs or offloaded runs on engine "
            f"eager only (got {', '.join(sweep.engines)})"
        )
    return out
