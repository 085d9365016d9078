# Every target does its own setup on a fresh machine: it creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODEL ?= meta-llama/Llama-3.1-8B-Instruct
TOKENS ?= 32k
BUDGET ?= 64GiB

.PHONY: demo test venv install install-test schema validate bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install -q -e '.[mlx,test]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

## make demo: the main job on the built-in registry: an estimate table for a well-known model against a
## budget, then the longest context that fits it (MODEL=..., TOKENS=..., BUDGET=... change them).
demo: install
	$(BIN)/omlx-profiles validate
	$(BIN)/omlx-profiles estimate $(MODEL) --tokens $(TOKENS) --budget $(BUDGET)
	$(BIN)/omlx-profiles fit $(MODEL) --budget $(BUDGET)

## make test: installs the mlx + test extras and runs the whole suite (CPU backend on Linux), one
## pytest-xdist worker per core (TEST_JOBS=0: one process). --dist loadgroup: tests marked with the same
## xdist_group (they share an expensive module-scoped setup) run on one worker; the rest are spread.
## --durations: the slowest tests are printed, so CI time (budget: ~15 min on 2 cores) is watched.
TEST_JOBS ?= logical
test: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

schema: install
	$(BIN)/omlx-profiles schema --write

validate: install
	$(BIN)/omlx-profiles schema --check
	$(BIN)/omlx-profiles validate

bench: install-test
	$(BIN)/python benchmarks/bench_estimator.py

clean:
	rm -rf $(VENV) build *.egg-info
