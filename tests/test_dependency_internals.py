"""The library internals composer leans on, each the reason for an upper bound in pyproject.toml.

``manifest/settings.py`` overrides private methods of pydantic-settings' sources,
``manifest/yamlnodes.py`` subclasses PyYAML's libyaml binding and mixes its pure-Python reader
classes, ``manifest/models.py`` relies on how pydantic validates str, int and float
subclasses, and the template sandbox overrides methods of Jinja's sandboxed environment. A release that moves one of these would not raise: the override would simply stop
being called (a FIFO ``.env`` would hang again), or a manifest's ``1.10`` would become ``1.1``.
So each internal is asserted here by name and by effect, and a test fails saying which one
moved; raise a bound only with these passing on the new release.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
import yaml.composer
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, ConfigDict
from pydantic_settings import DotEnvSettingsSource, EnvSettingsSource, SecretsSettingsSource
from pydantic_settings.sources import PydanticBaseEnvSettingsSource
from pydantic_settings.sources.utils import parse_env_vars
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from composer.errors import SettingsError
from composer.manifest.models import StrictModel
from composer.manifest.settings import load_settings
from composer.manifest.source import Secret, SourceFloat, SourceInt, SourceStr

# ------------------------------------------------------------------------- pydantic-settings


def parameters(function: Any) -> list[str]:
    """The parameter names of ``function`` after ``self``/``cls``."""
    names = list(inspect.signature(function).parameters)
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


@pytest.mark.parametrize(
    ("owner", "method", "expected"),
    [
        (EnvSettingsSource, "_load_env_vars", []),
        (DotEnvSettingsSource, "_read_env_files", []),
        (SecretsSettingsSource, "get_field_value", ["field", "field_name"]),
    ],
)
def test_the_source_methods_composer_overrides_keep_their_signature(
    owner: type, method: str, expected: list[str]
) -> None:
    """pydantic-settings calls these on composer's sources: another parameter would be a
    TypeError, another name an override never called."""
    assert hasattr(owner, method), f"{owner.__name__}.{method} is gone"
    assert parameters(getattr(owner, method)) == expected


@pytest.mark.parametrize(
    ("owner", "method", "expected"),
    [
        (PydanticBaseEnvSettingsSource, "_extract_field_info", ["field", "field_name"]),
        (SecretsSettingsSource, "find_case_path", ["dir_path", "file_name", "case_sensitive"]),
    ],
)
def test_the_source_methods_composer_calls_take_its_arguments(
    owner: type, method: str, expected: list[str]
) -> None:
    """Composer's secrets source calls these positionally; later parameters need defaults."""
    assert hasattr(owner, method), f"{owner.__name__}.{method} is gone"
    signature = inspect.signature(getattr(owner, method))
    names = parameters(getattr(owner, method))
    assert names[: len(expected)] == expected
    rest = [signature.parameters[name] for name in names[len(expected) :]]
    assert all(parameter.default is not inspect.Parameter.empty for parameter in rest)


def test_parse_env_vars_takes_what_the_dotenv_source_passes_it() -> None:
    assert parameters(parse_env_vars) == [
        "env_vars",
        "case_sensitive",
        "ignore_empty",
        "parse_none_str",
    ]
    assert parse_env_vars({"A": "x", "B": ""}, False, True, None) == {"a": "x"}
    assert parse_env_vars({"A": "x", "B": ""}, True, False, None) == {"A": "x", "B": ""}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory: no stray ``.env`` is read from the checkout."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_environment_source_reads_the_mapping_given(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_load_env_vars`` is still what fills the environment source."""
    monkeypatch.setenv("COMPOSER_ENV", "from-os-environ")
    assert load_settings({"COMPOSER_ENV": "given"}).env == "given"
    assert load_settings({}).env is None


def test_the_dotenv_source_reads_through_composers_reader(workdir: Path) -> None:
    """``_read_env_files`` is still what reads the ``.env`` file: composer's reader refuses a
    NUL byte, which python-dotenv would parse."""
    (workdir / ".env").write_text("COMPOSER_ENV=staging\n")
    assert load_settings({}).env == "staging"
    (workdir / ".env").write_bytes(b"COMPOSER_ENV=sta\x00ging\n")
    with pytest.raises(SettingsError, match=r'^\.env file "\.env": holds a NUL byte'):
        load_settings({})


def test_the_secrets_source_reads_through_composers_reader(workdir: Path) -> None:
    """``get_field_value`` is still what reads a secrets directory's files."""
    secrets = workdir / "secrets"
    secrets.mkdir()
    (secrets / "composer_env").write_text("prod\n")
    assert load_settings({}, secrets_dir=secrets).env == "prod"
    (secrets / "composer_env").write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsError, match=r"^secret file .*composer_env.*: not UTF-8"):
        load_settings({}, secrets_dir=secrets)


# ------------------------------------------------------------------------------------ PyYAML

needs_libyaml = pytest.mark.skipif(
    not yaml.__with_libyaml__, reason="PyYAML was built without libyaml"
)
IMPLICIT = "test:implicit"


@needs_libyaml
def test_libyaml_binding_is_a_parser_class_a_resolver_can_be_mixed_into() -> None:
    libyaml: Any = yaml._yaml
    version = libyaml.get_version()
    assert isinstance(version, tuple)
    assert len(version) == 3
    assert all(isinstance(part, int) for part in version)

    class Parser(libyaml.CParser, yaml.resolver.BaseResolver):  # type: ignore[misc]
        def __init__(self, text: str) -> None:
            libyaml.CParser.__init__(self, text)
            yaml.resolver.BaseResolver.__init__(self)

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            return IMPLICIT

    parser = Parser('a: [plain, "quoted"]\n')
    try:
        root = parser.get_single_node()
    finally:
        parser.dispose()
    assert isinstance(root, MappingNode)
    assert root.tag == IMPLICIT  # the mixed-in resolve is the one libyaml calls
    key, value = root.value[0]
    assert isinstance(value, SequenceNode)
    plain, quoted = value.value
    assert (key.value, key.start_mark.line, value.start_mark.column) == ("a", 0, 3)
    assert not plain.style  # yamlnodes reads both spellings of plain: "" (libyaml), None
    assert quoted.style == '"'

    events = libyaml.CParser("[x]\n")
    try:
        kinds = []
        while events.check_event():
            kinds.append(type(events.get_event()).__name__)
    finally:
        events.dispose()
    assert "SequenceStartEvent" in kinds
    assert "SequenceEndEvent" in kinds


class PurePython(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.resolver.BaseResolver,
):
    """The mix ``yamlnodes._Composer`` makes, each part initialised on its own."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.resolver.BaseResolver.__init__(self)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return IMPLICIT


def test_the_pure_python_reader_classes_compose_when_mixed_by_hand() -> None:
    loader = PurePython("a:\n  - b\n")
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    assert isinstance(root, MappingNode)
    assert root.tag == IMPLICIT
    item = root.value[0][1].value[0]
    assert isinstance(item, ScalarNode)
    assert (item.value, item.style, item.start_mark.line, item.start_mark.column) == (
        "b",
        None,
        1,
        4,
    )


def test_the_pure_python_reader_errors_carry_what_composer_locates_them_by() -> None:
    assert yaml.reader.Reader.NON_PRINTABLE.search("a\x01b")
    assert not yaml.reader.Reader.NON_PRINTABLE.search("tab\tnewline\n")
    with pytest.raises(yaml.reader.ReaderError) as unprintable:
        PurePython("a: \x01\n")
    assert unprintable.value.position == 3
    assert unprintable.value.character in ("\x01", 0x01)  # PyYAML gives the code point
    loader = PurePython("a: [b\n")
    try:
        with pytest.raises(yaml.MarkedYAMLError) as syntax:
            loader.get_single_node()
    finally:
        loader.dispose()
    error = syntax.value
    assert error.problem
    assert error.problem_mark is not None
    assert error.problem_mark.line == 1
    assert isinstance(error.problem_mark.index, int)
    assert error.context_mark is not None


# ---------------------------------------------------------------------------------- pydantic


class Plain(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)

    text: str = ""
    texts: list[str] = []
    table: dict[str, str] = {}


def source(text: str, kind: type[SourceStr] = SourceStr) -> SourceStr:
    return kind(text, Path("m.yaml"), 3, 7)


def test_pydantic_turns_a_str_subclass_into_a_plain_str() -> None:
    """What ``StrictModel`` undoes so that a ``Secret`` stays masked (should pydantic keep
    subclasses one day, its ``_secrets_stay_secret`` validator has nothing left to do)."""
    model = Plain(text=source("a"), texts=[source("b")], table={"k": source("c")})
    assert type(model.text) is str
    assert type(model.texts[0]) is str
    assert type(model.table["k"]) is str


def test_a_strict_model_keeps_every_source_string_and_secret() -> None:
    class Model(StrictModel):
        text: str
        texts: list[str]

    model = Model(text=source("hunter2", Secret), texts=[source("b")])
    assert isinstance(model.text, Secret)
    assert isinstance(model.texts[0], SourceStr)
    assert "hunter2" not in repr(model)
    assert model.model_dump() == {"text": "***", "texts": ["b"]}


def test_coerce_numbers_to_str_takes_the_numbers_own_str() -> None:
    """A number read into a string field keeps the text the file wrote."""
    model = Plain(text=SourceInt(7, "007"), texts=[SourceFloat(1.1, "1.10")])
    assert model.text == "007"
    assert model.texts == ["1.10"]


# ------------------------------------------------------------------------------------ Jinja2


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("call_binop", ["context", "operator", "left", "right"]),
        ("getattr", ["obj", "attribute"]),
        ("getitem", ["obj", "argument"]),
        ("wrap_str_format", ["value"]),
    ],
)
def test_the_sandbox_methods_composer_overrides_keep_their_signature(
    method: str, expected: list[str]
) -> None:
    assert parameters(getattr(ImmutableSandboxedEnvironment, method)) == expected


def test_the_sandbox_call_takes_context_and_callable_then_the_arguments() -> None:
    kinds = [
        p.kind for p in inspect.signature(ImmutableSandboxedEnvironment.call).parameters.values()
    ]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert kinds == [
        positional,
        positional,
        positional,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ]
