"""One expensive template operation cannot escape the render's limits.

Each payload is a single filter, method or loop that used to run for seconds to minutes or to
allocate hundreds of megabytes before any limit looked at it (a fill value repeated 10**8
times, a quadratic ``sum`` of lists, a long word re-copied by ``wordwrap``, a size check with
no clock in it). Now each fails fast, as a TemplateError naming the limit, within the
deadline plus a margin and without allocating what it asked for.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from composer.errors import TemplateError
from composer.templating import compile_template, template_context
from composer.turn import Branch, Instruction

# Generous bounds: a runaway takes many seconds or hundreds of MB; the default deadline is 1 s.
SECONDS = 3.0
PEAK_BYTES = 64 * 2**20

# 8,000 distinct characters from a user: punycode encodes them in quadratic time (11 s)
DISTINCT = "".join(map(chr, range(256, 8256)))
CONTEXT = template_context(Branch("sys"), Instruction(DISTINCT), provider="p")


def refused(what: str, unit: str) -> str:
    """The message of a call refused before it ran, over the value cap or the operations."""
    return rf"RenderLimitExceeded: template {what} would exceed \d+ {unit}$"


DEADLINE = r"RenderLimitExceeded: template exceeded [\d.]+s$"

BOMBS = [
    pytest.param(
        "{{ [1]|batch(10**8, 0)|list|length }}", refused("batch", "characters"), id="batch fill"
    ),
    pytest.param(
        "{{ [1]|batch(10**8, 'x')|list|length }}",
        refused("batch", "characters"),
        id="batch fill str",
    ),
    pytest.param(
        "{{ [1]|slice(10**7, fill_with=0)|list|length }}",
        refused("slice", "characters"),
        id="slice fill",
    ),
    pytest.param(
        "{{ [1]|slice(10**6)|list|length }}", refused("slice", "operations"), id="slice lists"
    ),
    pytest.param(
        "{{ ([[1] * 1000] * 3000)|sum(start=[])|length }}",
        refused("sum", "operations"),
        id="sum lists",
    ),
    pytest.param(
        "{{ ('x' * 1300000)|wordwrap(1)|length }}",
        refused("wordwrap", "operations"),
        id="wordwrap word",
    ),
    pytest.param(
        "{{ ([[[[1] * 10] * 10] * 10] * 600)|pprint|length }}",
        refused("pprint", "operations"),
        id="pprint nested",
    ),
    pytest.param(
        "{{ ('http://a.b ' * 100)|urlize(target='x' * 2000000)|length }}",
        refused("urlize", "characters"),
        id="urlize target",
    ),
    pytest.param(
        "{{ ('http://a.b ' * 100)|urlize(rel='x' * 2000000)|length }}",
        refused("urlize", "characters"),
        id="urlize rel",
    ),
    pytest.param(
        "{{ (1).to_bytes(10**8, 'big')|length }}",
        refused(r"int\.to_bytes\(\)", "characters"),
        id="to_bytes",
    ),
    pytest.param(
        "{% set big = [0] * 1999999 %}{% for i in range(100000) %}{% if big|length %}{% endif %}"
        "{% endfor %}",
        DEADLINE,
        id="length loop",
    ),
    pytest.param(
        "{% set big = [0] * 1999999 %}{% for i in range(1000) %}{% if big[i:]|length %}{% endif %}"
        "{% endfor %}",
        DEADLINE,
        id="fresh list loop",
    ),
    pytest.param(
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        r"RenderLimitExceeded: template exceeded \d+ nested calls$",
        id="macro recursion",
    ),
    # found auditing the other filters and methods for the same kind of single operation
    pytest.param("{{ ([0] * 1500000)|sort|length }}", refused("sort", "operations"), id="sort"),
    pytest.param(
        "{{ (('.' * 20000) ~ 'a.')|urlize|length }}",
        refused("urlize", "operations"),
        id="urlize quadratic",
    ),
    pytest.param(
        "{{ ('{0}' * 1000).format('x' * 1000000)|length }}",
        refused(r"str\.format\(\)", "characters"),
        id="format repeats a field",
    ),
    pytest.param(
        "{{ (('f' * 1900000)|int(base=16)) % (('f' * 950000)|int(base=16)) }}",
        r"RenderLimitExceeded: template result of filter 'int' exceeds \d+ bits$",
        id="huge integer modulo",
    ),
    pytest.param("{{ 5|round(-30000000) }}", refused("round", "bits"), id="round power"),
    pytest.param(
        "{{ range(1000)|list|tojson(indent=100000)|length }}",
        refused("tojson", "characters"),
        id="tojson indent",
    ),
    pytest.param(
        "{{ ([10 ** 4000] * 1000000)|join|length }}",
        refused("repetition", "characters"),
        id="join huge ints",
    ),
    pytest.param(
        "{{ instruction.text.encode('punycode')|length }}",
        r"RenderLimitExceeded: codec 'punycode' is not available in templates$",
        id="punycode",
    ),
]


@pytest.mark.parametrize(("payload", "expected"), BOMBS)
def test_one_operation_stays_within_the_render_limits(payload: str, expected: str) -> None:
    """The payload fails as a TemplateError naming its limit, in bounded time and memory."""
    template = compile_template(payload)
    tracemalloc.start()
    try:
        start = time.perf_counter()
        with pytest.raises(TemplateError, match=expected):
            template.render(CONTEXT)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < SECONDS
    assert peak < PEAK_BYTES


def test_a_float_times_an_integer_is_arithmetic() -> None:
    """Only a sequence times an integer is repetition; a float product renders."""
    assert compile_template("{{ 2.5 * 5000000 }}").render(CONTEXT) == "12500000.0"
