"""Running trials: the driver (runner.py: submit, resume) claims a sweep's trials in the store
and hands them to an executor (executors/: local, Ray); a worker runs each with run_trial
(trial.py). preflight.py checks how a sweep will run before anything is written, jobs.py
sends a driver to a cluster's head (Ray Jobs), runlog.py keeps a run's log, eta.py says how
long a running sweep has left.

This package stays light: the workers and `orch --help` import it without SQLAlchemy, so
the driver and the Ray Jobs client, which need it, are imported from their modules
(orchestrator.run.runner, orchestrator.run.jobs).
"""

from orchestrator.run.eta import eta_s, format_eta
from orchestrator.run.preflight import check_checkpoints
from orchestrator.run.version import code_version

__all__ = ["check_checkpoints", "code_version", "eta_s", "format_eta"]
