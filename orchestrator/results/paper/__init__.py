"""`orch report SWEEP -o DIR`: one sweep as a paper-style report, built only from the database
(write_report, write.py).

DIR/report.md and DIR/report.html say the same (doc.py), figures are PNG files under DIR/img/
(figures.py, axes.py). What is in it follows from the data:
- header (header.py): the sweep, its file's leading comment (the paper, section and table it
  reproduces) and the scale it ran at when stored (sweeps.spec `source`, orchestrator/spec/scale.py
  provenance), pairs, datasets, sampling settings, trial counts, the devices the trials ran on;
- each method's best config, then every config (configs.py; mean over repeats): speedup over
  the autoregressive trials with the same settings (results/frame.py add_speedup), tokens
  per iteration (block efficiency), every scalar acceptance definition under its name
  (engine/metrics.py acceptance_definitions, pooled over the config's prompts and repeats),
  tokens/s, the losslessness certificate (engine/certify/teacher_forced.py trial_certificate) and
  the device;
- figures and per-verifier tables where the sweep varies what they are about (see
  figures.py), and the cost model's prediction on every profiled GPU (the
  `orch compare --predict-on` code path).
Deterministic: the same database content gives byte-identical Markdown and HTML on SQLite and
on Postgres (rows sorted on values, fixed number formats, no database URL, ids or clock times).
"""

from orchestrator.results.paper.write import write_report

__all__ = ["write_report"]
