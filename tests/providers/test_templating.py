"""The sandbox: escapes and resource exhaustion fail as TemplateError; user text stays data."""

from __future__ import annotations

import pytest

from composer.errors import TemplateError
from composer.templating import (
    RenderLimits,
    compile_expression,
    compile_template,
    template_context,
)
from composer.turn import Branch, Instruction

# Each is a known way out of a Jinja sandbox, or a way to exhaust memory or time.
INJECTION_PAYLOADS = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''|attr('__class__') }}",
    "{{ '{0.__class__}'.format(1) }}",
    "{{ '{a.__class__}'.format_map({'a': 1}) }}",
    "{{ '{0.__class__}'|attr('format')(1) }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ joiner.__init__.__globals__.os }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ self }}",
    "{{ self._TemplateReference__context }}",
    "{{ config }}",
    "{{ request.application.__globals__ }}",
    "{{ instruction.__class__ }}",
    "{{ branch.items.__self__ }}",
    "{{ now.__class__.__init__ }}",
    "{{ dict.mro() }}",
    "{{ [].pop() }}",
    "{% include 'secrets.txt' %}",
    "{% extends 'base.html' %}",
    "{% import 'x' as y %}",
    "{{ range(10**9) }}",
    "{{ 'a' * 10**9 }}",
    "{{ [1] * 10**9 }}",
    "{{ 9 ** 9999999 }}",
    "{{ '%999999999d' % 1 }}",
    "{{ '%*d' % (10**9, 1) }}",
    "{{ '%999999999d'|format(1) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '{:{}}'.format(1, 10**9) }}",
    "{{ 'a'|center(10**9) }}",
    "{{ 'a'.center(10**9) }}",
    "{{ 'a'.ljust(10**9) }}",
    "{{ 'ab'|replace('', 'x' * 3000000) }}",
    "{{ ('x' * 100000).join(range(99999)|map('string')) }}",
    "{{ range(99999)|join('x' * 1000) }}",
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "{% set r = range(99999) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(n=3) %}{% for i in range(64) %}{% set ns.n = ns.n * ns.n %}"
    "{% endfor %}{{ ns.n > 0 }}",
    "{% macro d(n) %}{% if n %}{% set x = d(n - 1) %}{{ x ~ x }}{% else %}a{% endif %}"
    "{% endmacro %}{{ d(60)|length }}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{% set b = 'x' * 1000000 %}{% set s %}{% for i in range(99999) %}{{ b }}{% endfor %}"
    "{% endset %}{{ s|length }}",
    "{% set b = 'x' * 1000000 %}{% set c = [b, b, b, b, b] %}{{ c|string|length }}",
    "{% set s %}{% for i in range(99999) %}"
    + "y" * 1000
    + "{% endfor %}{% endset %}{{ s|length }}",
    "{% for i in range(99999) %}{{ i }}{% endfor %}",
]

CONTEXT = template_context(Branch("sys", name="b"), Instruction("hello"), provider="p")


def compile_and_render(source: str) -> str:
    return compile_template(source).render(CONTEXT)


def test_at_least_ten_payloads() -> None:
    assert len(INJECTION_PAYLOADS) >= 10


@pytest.mark.parametrize("payload", INJECTION_PAYLOADS)
def test_payload_is_contained(payload: str) -> None:
    with pytest.raises(TemplateError):
        compile_and_render(payload)


@pytest.mark.parametrize("payload", INJECTION_PAYLOADS)
def test_payload_in_user_text_stays_literal(payload: str) -> None:
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
