# Quick start: `make demo` (runs the main job) and `make test` (the whole suite).
# Each target creates .venv from this repo's own files the first time.
# `make floors`: the suite again in .venv-floors, every direct dependency at its declared floor.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FLOORS := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed

.PHONY: demo test lint floors docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,lionagi,serve,postgres,redis,otel,metrics,watch,langchain,pydantic_ai,agent_framework,openai_agents]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/composer preview configs --env dev --instruction "The API returns 502 errors after the deploy, what do I do?"

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/composer test configs/tests.yaml

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
	$(FLOORS)/bin/python -m pytest -q $(FLOORS_TESTS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(FLOORS) .pytest_cache .mypy_cache .ruff_cache
