"""The `orch` command line (pyproject: `orch = "orchestrator.cli:main"`)."""

from orchestrator.cli.app import main

__all__ = ["main"]
