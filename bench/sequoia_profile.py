"""Measure Sequoia's per-rank acceptance profile p_1..p_K for a model pair (engine/drafters/
sequoia/profile.py measure_profile) on Spec-Bench prompts, outside a sweep; prints JSON, and the
`--param profile=...` value to pass to `orch generate --method sequoia` (which has no database:
a sweep measures and stores the profile itself, `profile: measured`, orchestrator/acceptance.py).

    python bench/sequoia_profile.py --target PATH_OR_NAME --draft PATH_OR_NAME \\
        [--n-prompts 6] [--new-tokens 48] [--width 8] [--temperature 0] [--top-p 1] \\
        [--draft-temperature T]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.common import load_prompts  # noqa: E402
from engine.drafters.sequoia.profile import measure_profile  # noqa: E402
from engine.model_names import DEFAULT_PAIR  # noqa: E402
from engine.models import load_pair  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_PAIR[0])
    ap.add_argument("--draft", default=DEFAULT_PAIR[1])
    ap.add_argument("--n-prompts", type=int, default=6)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--draft-temperature", type=float, default=None, help="None: the target's")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    pair = load_pair(args.target, args.draft)
    prompts = load_prompts(pair, args.n_prompts)
    start = time.perf_counter()
    profile = measure_profile(
        pair,
        prompts,
        args.new_tokens,
        args.width,
        args.temperature,
        top_p=args.top_p,
        draft_temperature=args.draft_temperature,
    )
    print(
        json.dumps(
            {
                "target": args.target,
                "draft": args.draft,
                "n_prompts": len(prompts),
                "new_tokens": args.new_tokens,
                "temperature": args.temperature,
                "top_p": args.top_p,
                "draft_temperature": args.draft_temperature,
                "profile": profile,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )
    print("--param profile=" + ",".join(str(p) for p in profile))


if __name__ == "__main__":
    main()
