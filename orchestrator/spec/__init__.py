"""The sweep file: `load_sweep(path)` reads, checks, scales and expands it into trial configs.

load.py is that entry; parse.py reads the document into a Sweep (types.py), strictly
(values.py: SpecError; caps in limits.py); scale.py applies its `scale:` block; expand.py turns
it into one TrialConfig per trial and places trials on a device.
"""

from orchestrator.spec.expand import place
from orchestrator.spec.limits import check_generate
from orchestrator.spec.load import load_sweep
from orchestrator.spec.scale import announce, provenance
from orchestrator.spec.values import SpecError

__all__ = ["SpecError", "announce", "check_generate", "load_sweep", "place", "provenance"]
