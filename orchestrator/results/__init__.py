"""Answers from the database: the results frame (frame.py load_frame, its `--where` filters,
`orch status`'s counts), configs ranked and compared (query.py), tables and exports (tables.py,
output.py), plots (plots.py), stored hardware profiles and cost-model predictions
(profiles.py), all keyed on one definition of "the same settings as the autoregressive
baseline" (settings.py).

Two parts are imported by their own paths, as they pull more than pandas and SQLAlchemy: the
losslessness certificates and their stored distribution checks (certificates.py: torch, via
engine.certify) and the paper report (paper/: matplotlib).
"""

from orchestrator.results.frame import (
    BEST_BY,
    PREDICTED,
    QueryError,
    apply_where,
    describe_source,
    load_frame,
    progress_line,
    resolve_sweep,
    status_frame,
)
from orchestrator.results.output import (
    check_output_dir,
    check_output_file,
    export_frame,
    render,
    write_export,
)
from orchestrator.results.plots import make_plots
from orchestrator.results.profiles import (
    PredictWith,
    add_predictions,
    compare_predicted,
    device_curves,
    profile_models,
    read_profile_file,
    save_curves,
)
from orchestrator.results.query import compare, query
from orchestrator.results.settings import BASELINE, SETTINGS, machine, settings_key
from orchestrator.results.tables import query_columns, render_compare, render_query, varied_params

__all__ = [
    "BASELINE",
    "BEST_BY",
    "PREDICTED",
    "SETTINGS",
    "machine",
    "PredictWith",
    "QueryError",
    "add_predictions",
    "apply_where",
    "check_output_dir",
    "check_output_file",
    "compare",
    "compare_predicted",
    "describe_source",
    "device_curves",
    "export_frame",
    "load_frame",
    "make_plots",
    "profile_models",
    "progress_line",
    "query",
    "query_columns",
    "read_profile_file",
    "render",
    "render_compare",
    "render_query",
    "resolve_sweep",
    "save_curves",
    "settings_key",
    "status_frame",
    "varied_params",
    "write_export",
]
