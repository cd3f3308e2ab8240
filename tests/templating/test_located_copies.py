"""A manifest's template compiled again and again (once per branch) is one located copy per
place it was written: the same object, whose location string is the value's own, made once."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.errors import TemplateError
from composer.manifest.source import Secret, SourceStr
from composer.templating import compile_expression, compile_template

FILE = Path("/srv/m.yaml")


def _at(text: str, line: int, cls: type[SourceStr] = SourceStr) -> SourceStr:
    return cls(text, FILE, line, 5, "m.yaml", 'provider "rules"', ("text",))


def test_a_value_s_location_is_made_once() -> None:
    value = _at("{{ branch.name }}", 3)
    assert value.where == 'provider "rules": text (m.yaml:3:5)'
    assert value.where is value.where


def test_one_located_copy_per_place() -> None:
    value = _at("Hi {{ branch.name }}", 3)
    first = compile_template(value)
    assert compile_template(value) is first  # a second branch: no new copy
    assert compile_template(_at("Hi {{ branch.name }}", 3)) is first  # equal place, equal copy
    assert first.where is value.where
    elsewhere = compile_template(_at("Hi {{ branch.name }}", 7))
    assert elsewhere is not first
    assert elsewhere.where == 'provider "rules": text (m.yaml:7:5)'
    plain = compile_template("Hi {{ branch.name }}")
    assert plain.where is None
    assert plain is not first
    with pytest.raises(TemplateError, match=r"m\.yaml:7:5"):
        elsewhere.render({"branch": 1})  # a failure names its own place
    condition = _at("branch.name == 'a'", 4)
    assert compile_expression(condition) is compile_expression(condition)


def test_a_secret_keeps_its_own_copy() -> None:
    """A secret and a plain value with the same text at the same place (two loads of one file
    under other variables): the secret's copy keeps the secret, masked in its repr."""
    plain = compile_template(_at("s3cret {{ branch.name }}", 11))
    secret = compile_template(_at("s3cret {{ branch.name }}", 11, Secret))
    assert secret is not plain
    assert type(secret.source) is Secret
    assert type(plain.source) is SourceStr
    assert "s3cret" not in repr(secret.source)
