# Set-up and entry points. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ORCH := $(VENV)/bin/orch
# prompt sets: the shared/ folder checked out beside this repository, unless set
export ORCH_DATA_DIR ?= $(abspath $(CURDIR)/../shared/data)

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

# torch is pinned to the CPU build that pip finds locally; a looser spec pulls a CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,ray,postgres,real,plots,gpu]"
	touch $@

demo: setup
	$(ORCH) generate --target tiny-llama --draft tiny-llama-draft --method fixed_tree \
		--param depth=4 --param branch=2 --prompt "Speculative decoding" --max-new-tokens 48

test: setup
	TRITON_INTERPRET=1 $(PY) -m pytest -q

bench: setup
	$(PY) bench/engine_overhead.py

clean:
	rm -rf $(VENV) orch.db orch.db-* bench/results
