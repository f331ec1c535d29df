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

# bench/load.py also measures the LiteLLM proxy, in a virtualenv of its own: litellm[proxy]
# pins versions chatmem's own dependencies have outgrown (rich < 14, among others).
PEERS := .venv-peers
PEERS_STAMP := $(PEERS)/.installed

$(PEERS_STAMP):
	$(PY) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet --upgrade pip
	$(PEERS)/bin/pip install --quiet 'litellm[proxy]>=1.50'
	touch $(PEERS_STAMP)

bench: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/vulture src vulture_whitelist.py --min-confidence 60

clean:
	rm -rf $(VENV) $(PEERS) .chatmem .pytest_cache
