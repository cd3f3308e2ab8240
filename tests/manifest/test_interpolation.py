"""The ``${VAR}`` language on its own: substitution, escapes, mistakes and which values are secret."""

from __future__ import annotations

import pytest

from composer.manifest.interpolation import Reference, scan, substitute

VALUES = {
    "HOST": "https://api.example.com",
    "PORTED": "http://localhost:8080",
    "CREDENTIALED": "https://user:pw@api.example.com",
    "TOKEN": "s3cret",
    "EMPTY": "",
}

# (raw, text, variables used, values that are secrets, problems)
CASES: list[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = [
    ("plain text", "plain text", (), (), ()),
    ("costs $5 or $", "costs $5 or $", (), (), ()),
    ("$${TOKEN} is written so", "${TOKEN} is written so", (), (), ()),
    ("$$${TOKEN}", "$${TOKEN}", (), (), ()),
    ("Bearer ${TOKEN}", "Bearer s3cret", ("TOKEN",), ("s3cret",), ()),
    ("${EMPTY:-fallback}", "fallback", (), (), ()),
    ("${UNSET:-}", "", (), (), ()),
    ("${EMPTY}", "", ("EMPTY",), ("",), ()),
    # a URL's origin at the start may be shown; anything more of it is a secret
    ("${HOST}/v1/search", "https://api.example.com/v1/search", ("HOST",), (), ()),
    ("${PORTED}?q=1", "http://localhost:8080?q=1", ("PORTED",), (), ()),
    ("${HOST}", "https://api.example.com", ("HOST",), (), ()),
    ("${HOST}.evil", "https://api.example.com.evil", ("HOST",), ("https://api.example.com",), ()),
    ("see ${HOST}", "see https://api.example.com", ("HOST",), ("https://api.example.com",), ()),
    (
        "${CREDENTIALED}/x",
        "https://user:pw@api.example.com/x",
        ("CREDENTIALED",),
        ("https://user:pw@api.example.com",),
        (),
    ),
    (
        "${UNSET} stays",
        "${UNSET} stays",
        (),
        (),
        ('environment variable "UNSET" is not set (use ${UNSET:-default} for a default)',),
    ),
    (
        "${1X} and ${TOKEN}",
        " and s3cret",
        ("TOKEN",),
        ("s3cret",),
        ('bad variable reference "${1X}"; a name is letters, digits and _',),
    ),
    (
        "${TOKEN} then ${OPEN",
        "s3cret then ${OPEN",
        ("TOKEN",),
        ("s3cret",),
        ('unclosed "${" (write "$${" for a literal "${")',),
    ),
]


@pytest.mark.parametrize(("raw", "text", "used", "secrets", "problems"), CASES)
def test_substitution_reports_text_variables_secrets_and_problems(
    raw: str,
    text: str,
    used: tuple[str, ...],
    secrets: tuple[str, ...],
    problems: tuple[str, ...],
) -> None:
    done = substitute(raw, VALUES.get)
    assert (done.text, done.used, done.secrets, done.problems) == (text, used, secrets, problems)
    assert not done.unknown


def test_problems_come_in_the_order_they_are_written() -> None:
    done = substitute("${UNSET} ${bad-name} ${ALSO_UNSET}", VALUES.get)
    assert [p.split('"')[1] for p in done.problems] == ["UNSET", "${bad-name}", "ALSO_UNSET"]


def test_references_say_what_is_written_where() -> None:
    raw = "a ${X:-1} b $${Y} ${Z}"
    assert [p for p in scan(raw) if isinstance(p, Reference)] == [
        Reference("X", "1", 2, 9),
        Reference("Z", None, 18, 22),
    ]
    unset: dict[str, str] = {}
    assert substitute(raw, unset.get, lenient=True).references == (
        Reference("X", "1", 2, 9),
        Reference("Z", None, 18, 22),
    )


def test_inside_a_disabled_provider_an_unset_variable_is_no_problem() -> None:
    done = substitute("${UNSET}", VALUES.get, lenient=True)
    assert (done.text, done.problems) == ("${UNSET}", ())


def test_without_a_lookup_defaults_apply_and_unset_variables_stand_for_the_placeholder() -> None:
    done = substitute("${PORT:-8080} ${TOKEN}", None, stand_in="0")
    assert (done.text, done.used, done.secrets, done.problems) == ("8080 0", (), (), ())
    assert done.unknown
    assert substitute("${TOKEN}", None).text == "${TOKEN}"  # no placeholder chosen: as written


def test_a_secret_that_cannot_be_read_is_a_problem_and_nothing_goes_in() -> None:
    def unreadable(name: str) -> str | None:
        raise PermissionError(13, "Permission denied")

    done = substitute("key=${TOKEN};", unreadable)
    assert (done.text, done.used) == ("key=;", ())
    assert done.problems == ('cannot read secret "TOKEN": Permission denied',)
