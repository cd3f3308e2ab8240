# Quick start: `make demo` (runs the main job) and `make test` (the whole suite).
# Each target creates .venv from this repo's own files the first time.
# `make test-fast`: the core suite, without the slow folders (FAST_SKIP), for a quick check.
# `make floors`: the suite again in .venv-floors, every direct dependency at its declared floor.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.core
FLOORS := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed

# Every extra, so that every test runs (none skips for want of a package).
EXTRAS := dev,lionagi,serve,postgres,redis,otel,metrics,watch,langchain,pydantic-ai,agent-framework,openai-agents

# Left out by `make test-fast`: the framework integrations and lionagi (each imports a large
# framework, some in a child process), the standing hostile-input and soak suite, the servers
# and the console's pages (each test starts `composer serve` or an MCP peer as a process), the
# memory stores' many-process write races, and the reload, restart and audit-server soaks. CPU time of each in
# docs/development.md; `make test` and .ci/run still run them.
FAST_SKIP := tests/integrations tests/integration tests/reliability tests/serve \
	tests/console/test_console.py tests/console/test_console_after_init.py \
	tests/console/test_console_browser.py tests/console/test_console_postgres.py \
	tests/console/test_console_workers.py \
	tests/memory/test_concurrency.py tests/memory/test_write_conflicts.py \
	tests/memory/test_restart.py tests/observe/test_reload_reliability.py \
	tests/observe/test_audit_postgres.py

.PHONY: demo test test-fast lint floors docs clean

$(STAMP): pyproject.toml
	@echo "make: creating $(VENV) (again whenever pyproject.toml changes): composer, editable, with"
	@echo "  dev                     pytest, hypothesis, ruff, mypy, mkdocs: tests, lint, types, docs"
	@echo "  serve                   composer serve and the mcp provider type (tests/serve)"
	@echo "  postgres, redis         the PostgreSQL memory store, the Redis cache (tests/memory)"
	@echo "  otel, metrics, watch    spans, Prometheus metrics, file events (tests/observe, tests/runtime)"
	@echo "  lionagi                 the LionAGI integration (tests/integration)"
	@echo "  langchain, pydantic-ai, agent-framework, openai-agents"
	@echo "                          the agent-framework integrations (tests/integrations)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

# The demo needs the core alone, no extras: about 25 s on a fresh machine with a warm cache
# (a current pip resolves and installs it faster than the one the venv ships).
$(CORE_STAMP): pyproject.toml
	@echo "make: creating $(VENV) with composer alone (make test adds every extra)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(CORE_STAMP)

demo: $(CORE_STAMP)
	$(BIN)/composer preview configs --env dev --instruction "The API returns 502 errors after the deploy, what do I do?"

# pytest's default progress: one line per test file with a dot per test, readable in CI logs.
test: $(STAMP)
	@echo "make: the whole suite (tests/), then the bundled expected turns (configs/tests.yaml)"
	$(BIN)/python -m pytest
	$(BIN)/composer test configs/tests.yaml

test-fast: $(STAMP)
	@echo "make: the core suite; the slow folders (FAST_SKIP) run in make test and CI"
	$(BIN)/python -m pytest $(addprefix --ignore=,$(FAST_SKIP))

# The pins come from pyproject.toml each time (.ci/floors.py, standard library only), so they
# never drift from what is declared; `check` then shows pip installed exactly those.
$(FLOORS_STAMP): pyproject.toml .ci/floors.py
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	$(FLOORS)/bin/pip install --quiet --upgrade pip
	$(PYTHON) .ci/floors.py constraints > $(FLOORS)/constraints.txt
	$(FLOORS)/bin/pip install --quiet -c $(FLOORS)/constraints.txt -e ".[$$($(PYTHON) .ci/floors.py extras)]"
	$(FLOORS)/bin/python .ci/floors.py check
	touch $(FLOORS_STAMP)

floors: $(FLOORS_STAMP)
	$(FLOORS)/bin/python -m pytest $(FLOORS_TESTS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(FLOORS) .pytest_cache .mypy_cache .ruff_cache
