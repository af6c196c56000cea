"""A prompt and a bushy tree below its last token for the KV-cache tests
(tests/engine/runtime/test_cache.py), and the one tree forward and commit that every cached
model must do as the eager reference does (test_fast_path.py, test_cuda_graphs.py,
test_lean_model.py)."""

from __future__ import annotations

import torch

from engine.runtime.eager import CachedModel
from engine.tree import make_tree

PROMPT = [10, 200, 33, 47, 5, 90, 91, 17, 250, 3, 64, 65, 120, 7, 44, 46, 181, 2]
# a bushy tree below the root, with a depth-4 path 1 -> 3 -> 6 -> 9
PARENTS = [-1, 0, 0, 1, 1, 2, 3, 3, 4, 6, 6, 8, 0]
TOKENS = [PROMPT[-1], 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22]


def tree_then_commit(lm: CachedModel) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill, one tree forward, keep a depth-4 path, one more token: (tree logits, last)."""
    tree = make_tree(TOKENS, PARENTS)
    lm.extend(PROMPT[:-1])
    prefix = lm.committed
    tree_logits = lm.forward(tree.tokens, tree.position_ids(prefix)[0], tree.visibility(prefix))
    lm.commit([prefix + i for i in [0, 1, 3, 6, 9]])
    last = lm.forward(torch.tensor([99]), torch.tensor([lm.length]))
    return tree_logits, last
