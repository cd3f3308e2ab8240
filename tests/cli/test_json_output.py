"""``--json``: each command prints one document of its documented, versioned shape, saying what
its text says, with the same exit code and the same standard error; its errors are in the
document too.

Each document is read back with its model in strict mode and, when jsonschema is installed,
against the JSON Schema of that model; the reference page's tables are the models' (generated)
and each of its examples is read back with the model of its section.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
from pathlib import Path
from typing import Any, TypeVar

import pytest
from docpages import DOCS, blocks
from pydantic import BaseModel
from repofiles import CONFIGS, put

import composer
from composer.cli import main
from composer.cli.reference import JSON_DOCUMENTS, json_markers, with_json_reference
from composer.inspect.documents import (
    AuditListDocument,
    DiffDocument,
    MemoryStatsDocument,
    RenderDocument,
    TestDocument,
    ValidateDocument,
)

PAGE = DOCS / "reference" / "json.md"
SECRET = "s3cret-Token-7f9a"

Model = TypeVar("Model", bound=BaseModel)


def read(model: type[Model], text: str) -> Model:
    """``text`` as ``model``'s document: one JSON object of exactly its fields and types."""
    document = model.model_validate_json(text, strict=True)
    if importlib.util.find_spec("jsonschema") is not None:  # else the model's check holds
        jsonschema: Any = importlib.import_module("jsonschema")
        jsonschema.validate(json.loads(text), model.model_json_schema())
    return document


def twice(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``argv`` as text and with ``--json``: the exit code and standard error must be the
    same; the text and the document."""
    code = main(argv)
    text, err = capsys.readouterr()
    assert main([*argv, "--json"]) == code
    out, json_err = capsys.readouterr()
    assert json_err == err
    return code, text, out


@pytest.fixture
def configs(tmp_path: Path) -> Path:
    """A copy of configs/ in the working folder, named relatively as ``configs``."""
    shutil.copytree(CONFIGS, tmp_path / "configs", ignore=shutil.ignore_patterns("*.sqlite*"))
    return Path("configs")


# ------------------------------------------------------------------ the reference page


def test_the_reference_page_holds_every_documents_generated_tables() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for name in [*JSON_DOCUMENTS, "parts"]:
        start, end = json_markers(name)
        assert start in page, name
        assert end in page, name
    assert with_json_reference(page) == page, (
        "docs/reference/json.md is stale: run `python -m composer.cli.reference`"
    )


def test_every_example_on_the_page_is_its_sections_shape() -> None:
    """Each JSON example is read back with the model whose table follows it."""
    page = PAGE.read_text(encoding="utf-8")
    examples = blocks(PAGE, "json")
    assert len(examples) == len(JSON_DOCUMENTS)
    lines = page.splitlines()
    for example in examples:
        after = "\n".join(lines[example.line :])
        name = re.search(r"<!-- json:([a-z-]+):start -->", after)
        assert name is not None, example.where
        read(JSON_DOCUMENTS[name[1]], example.text)


def test_every_json_option_says_where_its_shape_is_documented() -> None:
    for argv in (
        ["validate", "configs"],
        ["render", "configs"],
        ["diff", "configs", "--env", "a", "--env", "b"],
        ["test", "t.yaml"],
        ["audit", "list", "turns.jsonl"],
        ["memory", "stats", "m.jsonl"],
    ):
        args = composer.cli.build_parser().parse_args([*argv, "--json"])
        assert args.json is True, argv


# ------------------------------------------------------------------ validate


def test_validate_names_each_error_once_with_its_environments(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, prod = configs / "base.yaml", configs / "prod.yaml"
    base.write_text(base.read_text().replace("budget: 1200", "budget: -5"))
    prod.write_text(prod.read_text().replace("top_k: 3", "top_kk: 3"))
    argv = ["validate", str(configs), "--all-envs", "--no-interpolate"]
    code, text, out = twice(argv, capsys)
    main(argv)
    err = capsys.readouterr().err
    assert code == 1
    document = read(ValidateDocument, out)
    assert (document.version, document.manifest, document.valid) == (1, "configs", False)
    assert [(e.env, e.valid) for e in document.environments] == [
        ("base", False),
        ("dev", False),
        ("prod", False),
        ("staging", True),
    ]
    assert text.splitlines()[-1] == "configs: 4 environments: 1 valid, 3 invalid (base, dev, prod)"
    said = [
        f"{e.path}:{e.line}:{e.column}: {e.message} (in {', '.join(e.environments)})"
        for e in document.errors
    ]
    assert said == err.splitlines()  # standard error, line for line
    budget = document.errors[0]
    assert (budget.path, budget.line, budget.column) == ("configs/base.yaml", 6, 9)
    assert budget.environments == ["base", "dev"]  # prod and staging set their own budget
    assert document.errors[1].environments == ["prod"]
    staging = document.environments[3]
    assert (staging.path, staging.providers, staging.enabled, staging.budget) == (
        "configs/staging.yaml",
        4,
        4,
        1500,
    )


def test_validate_lists_the_variables_an_environment_needs(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, out = twice(["validate", "configs", "--env", "prod", "--no-interpolate"], capsys)
    assert code == 0
    document = read(ValidateDocument, out)
    (prod,) = document.environments
    assert prod.variables is not None
    (needed,) = prod.variables.needed
    assert needed.location is not None
    where = f"{needed.location.path}:{needed.location.line}:{needed.location.column}"
    assert f"needs {needed.name} ({where}); reads if set: STATUS_URL" in text
    assert prod.variables.optional == ["STATUS_URL"]
    assert (document.valid, document.errors, document.warnings) == (True, [], [])


def test_validate_of_a_missing_environment_has_an_error_without_a_location(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, out = twice(["validate", "configs", "--env", "prodd"], capsys)
    assert code == 1
    document = read(ValidateDocument, out)
    (error,) = document.errors
    assert (error.path, error.line, error.column) == (None, None, None)
    assert error.message.startswith('no manifest for environment "prodd" in "configs"')
    assert error.environments == ["prodd"]


# ------------------------------------------------------------------ render


def test_render_gives_every_value_with_its_origin_and_no_secret(
    configs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    code, text, out = twice(["render", "configs", "--env", "prod"], capsys)
    assert code == 0
    assert SECRET not in out
    document = read(RenderDocument, out)
    assert (document.manifest, document.env, document.only_set) == (
        "configs/prod.yaml",
        "prod",
        False,
    )
    assert document.values is not None
    values = {value.path: value for value in document.values}
    budget = values["budget"]
    assert (budget.value, budget.origin and budget.origin.line) == (2000, 4)
    token = values["providers.status.request.headers.Authorization"]
    assert token.value == "Bearer ${STATUS_TOKEN}"  # as written, never its value
    assert token.keys == ["providers", "status", "request", "headers", "Authorization"]
    assert values["providers.runbooks.chunk_tokens"].origin is None  # a default
    assert "    chunk_tokens: 300  # default" in text.splitlines()
    assert "extends" not in values  # as in the YAML

    code, text, out = twice(["render", "configs", "--env", "prod", "--only-set"], capsys)
    only = read(RenderDocument, out)
    assert only.only_set
    assert only.values is not None
    assert all(value.origin is not None for value in only.values)
    assert [v.path for v in document.values if v.origin is not None] == [
        v.path for v in only.values
    ]


def test_render_of_a_manifest_that_does_not_load_has_its_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "m.yaml", "version: 1\nbudget: -1\n")
    code, _, out = twice(["render", "m.yaml"], capsys)
    assert code == 1
    document = read(RenderDocument, out)
    assert (document.manifest, document.values) == (None, None)
    (error,) = document.errors
    assert (error.path, error.line, error.column, error.message) == (
        "m.yaml",
        2,
        9,
        "budget: must be >= 0",
    )


# ------------------------------------------------------------------ diff


def test_diff_gives_each_difference_as_its_line_says(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diff", "configs", "--env", "staging", "--env", "prod", "--no-interpolate"]
    code, text, out = twice(argv, capsys)
    assert code == 0
    document = read(DiffDocument, out)
    assert document.title == "staging -> prod"
    assert document.differences is not None
    lines = text.splitlines()
    assert lines[0] == f"# staging -> prod: {len(document.differences)} differences"
    said = []
    for change in document.differences:
        assert change.change == "changed"
        assert change.before is not None
        assert change.after is not None
        where = [
            "default"
            if side.origin is None
            else f"{side.origin.path}:{side.origin.line}:{side.origin.column}"
            for side in (change.before, change.after)
        ]
        before, after = (
            json.dumps(side.value, ensure_ascii=False) for side in (change.before, change.after)
        )
        said.append(f"~ {change.path}: {before} -> {after}  # {where[0]} -> {where[1]}")
    assert said == lines[1:]


def test_diff_names_a_provider_on_one_side_and_the_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "a.yaml",
        "version: 1\nproviders:\n  - {name: x, type: static, text: X}\n"
        "  - {name: y, type: static, text: Y}\n",
    )
    put(
        tmp_path / "b.yaml",
        "version: 1\nproviders:\n  - {name: y, type: static, text: Y}\n"
        "  - {name: x, type: static, text: X}\n  - {name: z, type: static, text: Z, priority: 7}\n",
    )
    code, text, out = twice(["diff", "a.yaml", "b.yaml"], capsys)
    assert code == 0
    document = read(DiffDocument, out)
    assert document.differences is not None
    kinds = {change.path: change for change in document.differences}
    added = kinds["providers.z"]
    assert (added.change, added.before) == ("added", None)
    assert added.after is not None
    assert added.after.value == {"type": "static", "priority": 7}
    order = kinds["providers (order)"]
    assert order.before is not None
    assert order.after is not None
    assert (order.before.value, order.after.value) == (["x", "y"], ["y", "x"])
    assert "+ providers.z: type static, priority 7  # b.yaml:5:5" in text.splitlines()


def test_diff_with_a_side_that_does_not_load_has_its_error(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diff", "configs", "--env", "staging", "--env", "prodd", "--no-interpolate"]
    code, _, out = twice([*argv, "--exit-code"], capsys)
    assert code == 2
    document = read(DiffDocument, out)
    assert document.differences is None
    (error,) = document.errors
    assert error.path is None
    assert 'environment "prodd"' in error.message


# ------------------------------------------------------------------ test


def test_test_gives_each_result_and_its_located_failures(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = configs / "tests.yaml"
    tests.write_text(tests.read_text().replace('tokens: "<= 600"', 'tokens: "<= 6"', 1))
    code, text, out = twice(["test", str(tests)], capsys)
    assert code == 1
    document = read(TestDocument, out)
    assert (document.tests, document.passed, document.failed) == ("configs/tests.yaml", 5, 1)
    assert document.results is not None
    first = document.results[0]
    assert (first.env, first.passed) == ("dev", False)
    (failure,) = first.failures
    assert (failure.path, failure.line) == ("configs/tests.yaml", 17)
    assert f"      {failure.path}:{failure.line}:{failure.column}: {failure.message}" in text
    assert failure.message.startswith('provider "runbooks": expected tokens <= 6, got ')
    assert first.text is not None
    assert "House rules for payments:" in first.text
    assert [r.name for r in document.results] == [
        line[len("FAIL  ") :].rsplit(" (env ", 1)[0]
        for line in text.splitlines()
        if line.startswith(("ok  ", "FAIL"))
    ]


def test_test_of_a_file_that_does_not_load_has_its_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "t.yaml", "manifest: .\ntests: []\n")
    code, _, out = twice(["test", "t.yaml"], capsys)
    assert code == 1
    document = read(TestDocument, out)
    assert (document.passed, document.failed, document.results) == (None, None, None)
    (error,) = document.errors
    assert (error.path, error.line) == ("t.yaml", 2)


# ------------------------------------------------------------------ audit list


async def test_audit_list_gives_the_turns_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        budget: 40
        runtime: {audit: {path: turns.jsonl, keep_text: true}}
        providers:
          - {name: rules, type: static, text: "Answer in English."}
          - {name: quiet, type: static, text: never, when: "'deploy' not in instruction.text"}
        """,
    )
    manifest = composer.load_manifest(tmp_path / "m.yaml")
    branch = composer.Branch("S\n", name="payments")
    composer.attach(branch, manifest)
    ids = []
    for text in ("deploy one", "status two", "deploy three"):
        turn = await composer.prepare_turn(branch, text)
        assert turn.report is not None
        ids.append(turn.report.turn_id)
    await manifest.aclose()
    code, text, out = twice(["audit", "list", "turns.jsonl", "--limit", "2"], capsys)
    assert code == 0
    document = read(AuditListDocument, out)
    assert (document.log, document.total, document.skipped) == ("turns.jsonl", 3, [])
    assert document.turns is not None
    assert (
        [turn.turn_id for turn in document.turns]
        == ids[:0:-1]
        == [line.split()[1] for line in text.splitlines()[:-1]]
    )
    newest = document.turns[0]
    assert (newest.branch_name, newest.principal, newest.instruction) == (
        "payments",
        None,
        "deploy three",
    )
    assert [(p.name, p.outcome) for p in newest.providers] == [
        ("rules", "fired"),
        ("quiet", "guarded"),
    ]
    assert f"{newest.tokens_used}/{newest.budget}  [+w]" in text


def test_audit_list_of_a_missing_log_has_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, out = twice(["audit", "list", "none.jsonl"], capsys)
    assert code == 1
    document = read(AuditListDocument, out)
    assert (document.total, document.turns) == (None, None)
    (error,) = document.errors
    assert "none.jsonl" in error.message


# ------------------------------------------------------------------ memory stats


def test_memory_stats_counts_per_namespace(
    configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, out = twice(["memory", "stats", "configs/memory.jsonl"], capsys)
    assert code == 0
    document = read(MemoryStatsDocument, out)
    assert (document.store, document.items, document.namespaces) == (
        "configs/memory.jsonl",
        12,
        {"": 12},
    )
    assert text.splitlines() == ["configs/memory.jsonl: 12 items in 1 namespace", "  (default): 12"]


@pytest.mark.parametrize(("store", "code"), [("gone.jsonl", 1), ("gone.txt", 2)])
def test_memory_stats_of_a_store_that_is_not_there_has_its_error(
    store: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    returned, _, out = twice(["memory", "stats", store], capsys)
    assert returned == code
    document = read(MemoryStatsDocument, out)
    assert (document.store, document.items, document.namespaces) == (None, None, None)
    (error,) = document.errors
    assert store in error.message
    assert not Path(store).exists()  # nothing was created
