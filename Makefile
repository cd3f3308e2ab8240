# Quick start: `make demo` (runs the main job) and `make test` (the whole suite).
# Each target creates .venv from this repo's own files the first time.
# `make test-fast`: the suite without the tests marked slow (`pytest -m "not slow"`), a quick check.
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

.PHONY: demo test test-fast bench lint floors docs kubernetes-manifests clean

$(STAMP): pyproject.toml
	@echo "make: creating $(VENV) (again whenever pyproject.toml changes): composer, editable, with"
	@echo "  dev                     pytest, hypothesis, ruff, mypy, mkdocs: tests, lint, types, docs"
	@echo "  serve                   composer serve and the mcp provider type (tests/serve)"
	@echo "  postgres, redis         the PostgreSQL memory store, the Redis cache (tests/memory, tests/caching)"
	@echo "  otel, metrics, watch    spans, Prometheus metrics, file events (tests/observe, tests/reload)"
	@echo "  lionagi                 the LionAGI integration (tests/lionagi_support)"
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

# Left out: the tests marked slow, by path in tests/conftest.py (one table): the agent frameworks
# and lionagi, the hostile-input and soak suite, the servers and the console's pages against
# processes, the memory stores' many-process races and restarts, the reload and audit-server
# soaks. CPU time of each folder in docs/development.md; `make test` and .ci/run run them all.
test-fast: $(STAMP)
	@echo "make: the suite but the tests marked slow; make test and CI run those too"
	$(BIN)/python -m pytest -m "not slow"

# The quick benchmarks (about 2 minutes): a turn's constant blocks, cold start, memory per attached
# branch, shared state (PostgreSQL and Redis when they answer), corpus build. Each prints ratios
# against a baseline measured in the same run; benchmarks/README.md has earlier figures.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_gather.py --static-tokens 10000
	$(BIN)/python benchmarks/bench_cold_start.py --runs 5
	$(BIN)/python benchmarks/bench_branches.py --memory --branches 10000
	$(BIN)/python benchmarks/bench_state.py --turns 500 --rounds 3
	$(BIN)/python benchmarks/bench_corpus.py --passages 10000 --rounds 2

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

# kustomize reads nothing outside its folder, so the Kubernetes base holds a copy of the files of
# configs/ that composer serve reads there: the manifests and the corpus (not the tests, the
# questions, the editors' schemas, nor the memory seed: in Kubernetes the memory is PostgreSQL's,
# imported once). tests/test_kubernetes.py fails when the copy differs.
KUBERNETES_MANIFESTS := deploy/kubernetes/base/manifests
kubernetes-manifests:
	rm -rf $(KUBERNETES_MANIFESTS)
	mkdir -p $(KUBERNETES_MANIFESTS)
	cd configs && cp --parents $$(ls *.yaml | grep -vx -e tests.yaml -e questions.yaml) \
	  $$(find corpus -type f -name '*.md' | sort) $(CURDIR)/$(KUBERNETES_MANIFESTS)/

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(FLOORS) .pytest_cache .mypy_cache .ruff_cache
