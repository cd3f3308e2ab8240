# Quick start: `make demo` (runs the main job) and `make test` (the whole suite).
# Each target creates .venv from this repo's own files the first time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean

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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
