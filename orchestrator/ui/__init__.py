"""`orch ui`: a live, read-only web dashboard over the database (docs/ui.md).

server.py (the standard library's HTTP server, routes, 405 for writes), reader.py (the
read-only Store and the per-sweep cache), the pages' data: overview.py (sweeps),
sweep_data.py and figures.py (a sweep), trial_data.py (a trial), compare_data.py (two sweeps),
downloads.py (orch export's bytes, the paper report); pages.py the HTML shells, static/ the
vendored JS and CSS (our own small SVG charts, no library). Answers come from
orchestrator.results (load_frame, apply_where, query, compare, export_frame, write_report).
"""
