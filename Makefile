# The one-word commands. CI calls `make test` through .ci/run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench lint fuzz install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/chatmem serve

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# SEC-1: schemathesis over /openapi.json against a real server, many examples per operation
# (make test runs the same with a few); FUZZ_EXAMPLES=… FUZZ_SEED=… to change them.
fuzz: $(STAMP)
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-100} $(BIN)/python -m pytest -s tests/api/test_fuzz.py $(PYTEST_ARGS)

# bench/load.py also measures the LiteLLM proxy (the `peers` extra, installed here only).
PEERS_STAMP := $(VENV)/.installed-peers

$(PEERS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench,peers]'
	touch $(PEERS_STAMP)

bench: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .chatmem .pytest_cache
