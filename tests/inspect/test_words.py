"""A count is worded with its noun in the right number: ``1 provider``, never ``1 providers``."""

from __future__ import annotations

import pytest

from composer.inspect.words import counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "expected"),
    [
        (0, "line", None, "0 lines"),
        (1, "line", None, "1 line"),
        (2, "line", None, "2 lines"),
        (1, "entry", "entries", "1 entry"),
        (3, "entry", "entries", "3 entries"),
    ],
)
def test_counted_agrees_the_noun_with_the_count(
    count: int, noun: str, plural: str | None, expected: str
) -> None:
    assert counted(count, noun, plural) == expected
