"""The database handle: `Store(url)` is one driver's or reader's connection to the sweeps.

handle.py is the Store; sql.py the pieces every store module shares (StoreError); sweeps.py,
trials.py, reads.py and settle.py its writes and reads; leases.py the driver identity that
per-trial leases are held under.
"""

from orchestrator.store.handle import DB_RETRY_S, Store
from orchestrator.store.leases import LEASE_S
from orchestrator.store.sql import OPEN, StoreError
from orchestrator.store.trials import put_profiles

__all__ = ["DB_RETRY_S", "LEASE_S", "OPEN", "Store", "StoreError", "put_profiles"]
