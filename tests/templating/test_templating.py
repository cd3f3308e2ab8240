"""The sandbox: escapes and resource exhaustion fail as TemplateError; user text stays data."""

from __future__ import annotations

from dataclasses import replace

import pytest

from composer.errors import TemplateError
from composer.templating import (
    DEFAULT_LIMITS,
    RenderLimits,
    compile_expression,
    compile_template,
    template_context,
)
from composer.turn import Branch, Instruction


def unsafe(attribute: str, owner: str) -> str:
    """Jinja's sandbox refusing an attribute or method of ``owner``."""
    return rf"SecurityError: access to attribute '{attribute}' of '{owner}' object is unsafe\.$"


def unknown(name: str) -> str:
    """The compile-time refusal of a free name outside the template's context."""
    return rf"^unknown name '{name}' in template; available: "


def unavailable(tag: str) -> str:
    """The compile-time refusal of ``self`` or of loading another template."""
    return rf"^'{tag}' is not available in manifest templates$"


def estimated(what: str, unit: str = "characters") -> str:
    """A RenderLimits refusal made from an estimate, before the value was built or the work
    done (``unit``: characters, operations or bits)."""
    return rf"RenderLimitExceeded: template {what} would exceed \d+ {unit}$"


def measured(what: str, unit: str = "characters") -> str:
    """A RenderLimits refusal of a value measured after it was built."""
    return rf"RenderLimitExceeded: template {what} exceeds \d+ {unit}$"


OPERATIONS = r"RenderLimitExceeded: template exceeded \d+ operations$"
NESTED = r"RenderLimitExceeded: template exceeded \d+ nested calls$"
PRODUCED = r"RenderLimitExceeded: template produced more than \d+ characters$"

# (payload, the TemplateError message it must fail with): each is a known way out of a Jinja
# sandbox, or a way to exhaust memory or time, and the message shows which guard stopped it.
INJECTION_PAYLOADS: list[tuple[str, str]] = [
    # -- internals
    ("{{ ''.__class__.__mro__ }}", unsafe("__class__", "str")),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", unsafe("__class__", "str")),
    ("{{ ''|attr('__class__') }}", unsafe("__class__", "str")),
    ("{{ '{0.__class__}'.format(1) }}", unsafe("__class__", "int")),
    ("{{ '{a.__class__}'.format_map({'a': 1}) }}", unsafe("__class__", "int")),
    ("{{ '{0.__class__}'|attr('format')(1) }}", unsafe("__class__", "int")),
    ("{{ cycler.__init__.__globals__ }}", unsafe("__init__", "type")),
    ("{{ joiner.__init__.__globals__.os }}", unsafe("__init__", "type")),
    ("{{ namespace.__init__.__globals__ }}", unsafe("__init__", "type")),
    ("{{ instruction.__class__ }}", unsafe("__class__", "dict")),
    ("{{ branch.items.__self__ }}", unsafe("__self__", "builtin_function_or_method")),
    # the refused __class__ is an undefined that refuses every further lookup
    ("{{ now.__class__.__init__ }}", unsafe("__init__", "StrictUndefined")),
    ("{{ dict.mro() }}", unsafe("mro", "type")),
    ("{{ [].pop() }}", unsafe("pop", "list")),
    # -- other names, templates and modules
    ("{{ lipsum.__globals__ }}", unknown("lipsum")),
    ("{{ config }}", unknown("config")),
    ("{{ request.application.__globals__ }}", unknown("request")),
    ("{{ self }}", unavailable("self")),
    ("{{ self._TemplateReference__context }}", unavailable("self")),
    ("{% include 'secrets.txt' %}", unavailable("include")),
    ("{% extends 'base.html' %}", unavailable("extends")),
    ("{% import 'x' as y %}", unavailable("import")),
    # -- arithmetic and formatting
    ("{{ range(10**9) }}", r"OverflowError: Range too big\. The sandbox blocks ranges larger than"),
    ("{{ 'a' * 10**9 }}", estimated("repetition")),
    ("{{ [1] * 10**9 }}", estimated("repetition")),
    ("{{ 9 ** 9999999 }}", r"RenderLimitExceeded: integer power too large$"),
    ("{{ '%999999999d' % 1 }}", estimated("'%' formatting")),
    ("{{ '%*d' % (10**9, 1) }}", r"RenderLimitExceeded: '\*' widths are not allowed in templates$"),
    ("{{ '%999999999d'|format(1) }}", estimated("format")),
    ("{{ ('%(a)s' * 1000) % {'a': 'x' * 1000000} }}", estimated("'%' formatting")),
    ("{{ '%999999999d'.encode() % 1 }}", estimated("'%' formatting")),
    ("{{ ('{0}' * 1000).format('x' * 1000000) }}", estimated(r"str\.format\(\)")),
    ("{{ [10 ** 4000] * 1000000 }}", estimated("repetition")),
    ("{{ ('f' * 1000000)|int(base=16) }}", measured("result of filter 'int'", "bits")),
    ("{{ 5|round(-10**8) }}", estimated("round", "bits")),
    ("{{ '{:>999999999}'.format(1) }}", estimated(r"str\.format\(\)")),
    (
        "{{ '{:{}}'.format(1, 10**9) }}",
        r"RenderLimitExceeded: nested format specs are not allowed in templates$",
    ),
    # -- growth-prone filters
    ("{{ 'a'|center(10**9) }}", estimated("center")),
    ("{{ 'a'|indent(10**9) }}", estimated("indent")),
    ("{{ 'abcde'|replace('', 'x' * 1000000) }}", estimated("replace")),
    ("{{ ('a' * 1000)|wordwrap(1, wrapstring='x' * 10000) }}", estimated("wordwrap")),
    ("{{ range(99999)|join('x' * 1000) }}", estimated("join")),
    ("{{ [1]|batch(10**8, 0) }}", estimated("batch")),
    ("{{ ([0] * 1500000)|batch(1)|list }}", estimated("batch", "operations")),
    ("{{ [1]|slice(10**7, fill_with=0) }}", estimated("slice")),
    ("{{ [1]|slice(10**6) }}", estimated("slice", "operations")),
    ("{{ ([[1] * 1000] * 3000)|sum(start=[]) }}", estimated("sum", "operations")),
    ("{{ ('x' * 100000)|wordwrap(1) }}", estimated("wordwrap", "operations")),
    ("{{ ([[[[1] * 10] * 10] * 10] * 600)|pprint }}", estimated("pprint", "operations")),
    ("{{ range(99)|list|tojson(indent=100000) }}", estimated("tojson")),
    ("{{ ('http://a.b ' * 100)|urlize(target='x' * 100000) }}", estimated("urlize")),
    ("{{ (('.' * 20000) ~ 'a.')|urlize }}", estimated("urlize", "operations")),
    ("{{ ('&' * 1000000)|escape }}", estimated("escape")),
    ("{{ ('\u00e9' * 400000)|urlencode }}", estimated("urlencode")),
    ("{{ ('\n' * 1900000)|indent(0) }}", estimated("indent", "operations")),
    ("{{ ('a ' * 1300000)|title }}", estimated("title", "operations")),
    ("{{ ('<>' * 1300000)|striptags }}", estimated("striptags", "operations")),
    ("{{ ([0] * 1500000)|sort }}", estimated("sort", "operations")),
    ("{{ ([0] * 1500000)|select|list }}", estimated("select", "operations")),
    # -- growth-prone str methods
    ("{{ 'a'.center(10**9) }}", estimated(r"str\.center\(\)")),
    ("{{ 'a'.ljust(10**9) }}", estimated(r"str\.ljust\(\)")),
    ("{{ 'a'.rjust(10**9) }}", estimated(r"str\.rjust\(\)")),
    ("{{ 'a'.encode().zfill(10**9) }}", estimated(r"str\.zfill\(\)")),
    ("{{ ('\t' * 100).expandtabs(10**5) }}", estimated(r"str\.expandtabs\(\)")),
    ("{{ 'abcde'.replace('', 'x' * 1000000) }}", estimated(r"str\.replace\(\)")),
    ("{{ ('x' * 100000).join(range(99999)|map('string')) }}", estimated(r"str\.join\(\)")),
    ("{{ ('a' * 1000).translate({97: 'x' * 10000}) }}", estimated(r"str\.translate\(\)")),
    ("{{ ('ab ' * 1000000).split() }}", estimated(r"str\.split\(\)", "operations")),
    ("{{ ('\n' * 1900000).splitlines() }}", estimated(r"str\.splitlines\(\)", "operations")),
    ("{{ ('\ufdfa' * 100000).encode('ascii', 'namereplace') }}", estimated(r"str\.encode\(\)")),
    (
        "{{ 'x'.encode('punycode') }}",
        r"RenderLimitExceeded: codec 'punycode' is not available in templates$",
    ),
    ("{{ ('x' * 1500000).encode().hex('-') }}", estimated(r"bytes\.hex\(\)")),
    ("{{ (1).to_bytes(10**8, 'big') }}", estimated(r"int\.to_bytes\(\)")),
    # -- loops, growth across iterations, recursion and output
    (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
        OPERATIONS,
    ),
    (
        "{% set r = range(99999) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",
        OPERATIONS,
    ),
    (
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
        measured("concatenation"),
    ),
    (
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
        estimated("concatenation"),
    ),
    (
        "{% set ns = namespace(n=3) %}{% for i in range(64) %}{% set ns.n = ns.n * ns.n %}"
        "{% endfor %}{{ ns.n > 0 }}",
        r"RenderLimitExceeded: integer product too large$",
    ),
    (
        "{% set a = 'x' * 1000000 %}{% set ns = namespace() %}{% set ns.s = [a, a, a, a, a] %}",
        measured("namespace attribute 's'"),
    ),
    (
        "{% macro d(n) %}{% if n %}{% set x = d(n - 1) %}{{ x ~ x }}{% else %}a{% endif %}"
        "{% endmacro %}{{ d(60)|length }}",
        measured("concatenation"),
    ),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NESTED),
    ("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", NESTED),
    (
        "{% set b = 'x' * 1000000 %}{% set s %}{% for i in range(99999) %}{{ b }}{% endfor %}"
        "{% endset %}{{ s|length }}",
        PRODUCED,
    ),
    (
        "{% set b = 'x' * 1000000 %}{% set c = [b, b, b, b, b] %}{{ c|string|length }}",
        measured("input of filter 'string'"),
    ),
    (
        "{% set s %}{% for i in range(99999) %}"
        + "y" * 1000
        + "{% endfor %}{% endset %}{{ s|length }}",
        PRODUCED,
    ),
    ("{% for i in range(99999) %}{{ i }}{% endfor %}", r"^rendered text exceeds \d+ characters$"),
]
PAYLOADS = [payload for payload, _ in INJECTION_PAYLOADS]

CONTEXT = template_context(Branch("sys", name="b"), Instruction("hello"), provider="p")


PATIENT = replace(DEFAULT_LIMITS, seconds=60.0)
"""The limits, but a wall clock that a loaded machine cannot reach first: each payload is
stopped by the guard named for it (the clock has a test of its own)."""


def compile_and_render(source: str) -> str:
    return compile_template(source).render(CONTEXT, limits=PATIENT)


def test_at_least_ten_payloads() -> None:
    assert len(INJECTION_PAYLOADS) >= 10


@pytest.mark.parametrize(("payload", "expected"), INJECTION_PAYLOADS, ids=PAYLOADS)
def test_payload_is_stopped_by_its_guard(payload: str, expected: str) -> None:
    """Each payload fails as a TemplateError whose message names the guard that stopped it."""
    with pytest.raises(TemplateError, match=expected):
        compile_and_render(payload)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_user_text_stays_literal(payload: str) -> None:
    """User text is a variable value: a payload in it is rendered, never compiled."""
    context = template_context(Branch("sys"), Instruction(payload), provider="p")
    assert compile_template("{{ instruction.text }}").render(context) == payload


def test_user_text_is_never_compiled() -> None:
    context = template_context(Branch("sys"), Instruction("{{7*7}}"), provider="p")
    assert compile_template("q={{ instruction.text }}").render(context) == "q={{7*7}}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("hello {{ instruction.text }}", "hello hello"),
        ("{% for i in range(3) %}{{ i }},{% endfor %}", "0,1,2,"),
        ("{% for x in [1, 2] %}{{ loop.index }}/{{ loop.length }}{% endfor %}", "1/22/2"),
        ("{{ 'a' ~ instruction.text ~ 'b' }}", "ahellob"),
        ("{{ [1, 2, 3]|join('-') }}", "1-2-3"),
        ("{{ range(3)|map('string')|join(',') }}", "0,1,2"),
        ("{{ '%s-%d'|format('x', 3) }} {{ '{}!'.format(3) }} {{ '%05d' % 42 }}", "x-3 3! 00042"),
        ("{{ 2 ** 10 }} {{ 'ab' * 3 }} {{ [0] * 2 }}", "1024 ababab [0, 0]"),
        # a float times an integer is arithmetic, not repetition: no size estimate applies
        ("{{ 2.5 * 5000000 }} {{ 5000000 * 2.5 }}", "12500000.0 12500000.0"),
        # the guarded filters and methods, used as manifests use them
        (
            "{{ [1, 2, 3]|batch(2, 0)|list }} {{ [1, 2, 3]|slice(2)|list }}",
            "[[1, 2], [3, 0]] [[1, 2], [3]]",
        ),
        ("{{ [[1], [2]]|sum(start=[]) }} {{ [3, 1, 2]|sort|join }}", "[1, 2] 123"),
        (
            "{{ 'see https://example.com now'|urlize(target='_blank') }}",
            'see <a href="https://example.com" rel="noopener" target="_blank">https://example.com</a> now',
        ),
        ("{{ 'one two three'|wordwrap(7) }}|{{ 'a\nb'|indent(2) }}", "one two\nthree|a\n  b"),
        ("{{ {'a': [1]}|tojson(indent=1) }} {{ [1]|pprint }}", '{\n "a": [\n  1\n ]\n} [1]'),
        ("{{ 1.26|round(1) }} {{ 'a&b'|e }} {{ 'a b'.split() }}", "1.3 a&amp;b ['a', 'b']"),
        ("{{ 'é'.encode() }} {{ (258).to_bytes(2, 'big') }}", "b'\\xc3\\xa9' b'\\x01\\x02'"),
        ("{% if 1 %}{% set x = 1 %}{{ x }}{% endif %}", "1"),
        (
            "{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}"
            "{% endfor %}{{ ns.n }}",
            "10",
        ),
        ("{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m(1) }}{{ m(2) }}", "<1><2>"),
        ("{{ branch.name }} {{ provider.name }}", "b p"),
    ],
)
def test_ordinary_templates_render(source: str, expected: str) -> None:
    assert compile_and_render(source) == expected


def test_output_cap() -> None:
    template = compile_template("{{ 'x' * 50 }}")
    assert template.render(CONTEXT, limits=RenderLimits(output_chars=50)) == "x" * 50
    with pytest.raises(TemplateError, match="exceeds 49 characters"):
        template.render(CONTEXT, limits=RenderLimits(output_chars=49))


def test_deadline_stops_a_loop_without_output() -> None:
    template = compile_template("{% for i in range(99999) %}{{ i|string|length }}{% endfor %}")
    limits = RenderLimits(seconds=0.0, ops=10**9, output_chars=10**9)
    with pytest.raises(TemplateError, match=r"exceeded 0\.0s"):
        template.render(CONTEXT, limits=limits)


def test_url_templates_encode_every_output() -> None:
    context = template_context(Branch("s"), Instruction("../admin?x=1&y=2 {{7*7}}"), provider="p")
    template = compile_template("/a/{{ instruction.text }}/{{ '..' }}", url=True)
    assert template.render(context) == "/a/..%2Fadmin%3Fx%3D1%26y%3D2%20%7B%7B7%2A7%7D%7D/%2E%2E"
    explicit = compile_template("/a/{{ 'a b/c'|urlencode }}", url=True)
    assert explicit.render(context) == "/a/a%20b/c"


def test_when_expression_is_bounded_and_sandboxed() -> None:
    assert compile_expression("'ell' in instruction.text").evaluate(CONTEXT) is True
    with pytest.raises(TemplateError):
        compile_expression("'a' * 10**9").evaluate(CONTEXT)
    with pytest.raises(TemplateError):
        compile_expression("instruction.__class__.__mro__").evaluate(CONTEXT)


def test_unknown_name_is_a_compile_error() -> None:
    with pytest.raises(TemplateError, match="unknown name 'nope'"):
        compile_template("{{ nope }}")
