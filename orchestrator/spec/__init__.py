"""The sweep file: `load_sweep(path)` reads, checks, scales and expands it into trial configs.

parse.py reads the document into a Sweep (types.py), strictly (values.py, caps in limits.py);
scale.py applies its `scale:` block; expand.py turns it into one TrialConfig per trial.
"""

from orchestrator.spec.load import load_sweep

__all__ = ["load_sweep"]
