"""`python -m orchestrator.cli ...`: the `orch` command."""

from orchestrator.cli import main

main()
