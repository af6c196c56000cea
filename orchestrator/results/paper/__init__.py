"""`orch report`: one sweep as a paper-style report."""
