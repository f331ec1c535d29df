# The one-word commands. CI calls `make test` through .ci/run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench bench-real lint fuzz install clean i18n mcp-examples vendor-app-bridge docs docs-reference

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

RUN_STAMP := $(VENV)/.installed-run

# `make run` installs the server alone (RUN_EXTRAS=postgres adds PostgreSQL and Redis);
# `make test`, `make bench` and `make lint` the test and benchmark toolchain too.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.$(if $(RUN_EXTRAS),[$(RUN_EXTRAS)])'
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench,docs]'
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

# The state stays beside the checkout under `make run` (an installed `chatmem serve` uses
# the per-user data folder).
run: $(RUN_STAMP)
	CHATMEM_STATE_DIR="$${CHATMEM_STATE_DIR:-.chatmem}" $(BIN)/chatmem serve

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

# The documentation site (mkdocs.yml): the references generated from the code first
# (docs/gen_reference.py: settings, CLI, HTTP routes, error codes), then a strict build into
# site/ — a broken link or anchor fails it.  `make docs-reference` after adding a setting, a
# command or a route (tests/test_docs.py fails until the pages are regenerated).
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs-reference: $(DOCS_STAMP)
	$(BIN)/python docs/gen_reference.py
	$(BIN)/python docs/rule_index.py --write

docs: docs-reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
# Issue 30: bench/memory_quality.py with a real summariser, Gemma 3 270M through llama.cpp,
# in a virtualenv of its own (llama-cpp-python compiles llama.cpp when installed: slow).
# MEMORY_QUALITY_REAL_CONVERSATIONS=… sets how many conversations the model folds (4).
REAL := .venv-real
REAL_STAMP := $(REAL)/.installed

$(REAL_STAMP):
	$(PY) -m venv $(REAL)
	$(REAL)/bin/pip install --quiet --upgrade pip
	$(REAL)/bin/pip install --quiet -e '.[bench-real]'
	touch $(REAL_STAMP)

bench-real: $(REAL_STAMP)
	$(REAL)/bin/python bench/memory_quality.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy  # strict (pyproject)
	$(BIN)/lint-imports
	$(BIN)/vulture src vulture_whitelist.py --min-confidence 60

# PROJ-4: the catalogs follow the templates and scripts — new strings appear in every .po
# untranslated (tests/ui/test_i18n_catalog.py fails until each is translated), gone ones go.
LOCALES_DIR := src/chatmem/web/locales
i18n: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg -k t -k tn:1,2 --add-location=file --sort-by-file \
		-o $(LOCALES_DIR)/messages.pot .
	for lang in ru it id; do \
		$(BIN)/pybabel update -i $(LOCALES_DIR)/messages.pot -d $(LOCALES_DIR) -l $$lang \
			--no-fuzzy-matching --ignore-obsolete || exit 1; \
	done

# Issue 28: the npm MCP servers with apps the browser tests run (tests/ui/test_apps_npm.py),
# pinned by tests/support/npm/package-lock.json, into ~/.cache/chatmem/mcp-examples
# (MCP_EXAMPLES_DIR=… elsewhere).  Needs Node 20 and npm; chatmem itself does not.
mcp-examples:
	scripts/install_mcp_examples.sh

# The MCP Apps bridge in static/vendor, rebuilt from its npm packages (static/vendor/SOURCES.md).
vendor-app-bridge:
	scripts/vendor_app_bridge.sh

clean:
	rm -rf $(VENV) $(PEERS) .chatmem .pytest_cache site
