"""The bad-input table: every input a careless or hostile user can give `orch` and what each
must answer (tests/reliability/test_bad_inputs.py runs it with tests/reliability/harness.py),
by concern: values (cases_values.py), files and folders (cases_files.py), databases and
executors (cases_databases.py), a lab's own models, prompt files and placement (cases_byo.py)."""

from tests.reliability import cases_byo, cases_databases, cases_files, cases_values
from tests.reliability.harness import Case

CASES: list[Case] = [
    *cases_values.CASES,
    *cases_files.CASES,
    *cases_databases.CASES,
    *cases_byo.CASES,  # a lab's own models, prompts and placement
]
