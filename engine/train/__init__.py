"""Training of the papers' learned components (issue 19): checkpoints under ORCH_HOME that the
engine loads by name (checkpoint.py), and one trainer per file."""
