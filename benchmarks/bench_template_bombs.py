"""Template bombs against the bounded sandbox, and what the guards cost an ordinary render.

Run from the repository root:  .venv/bin/python benchmarks/bench_template_bombs.py [--renders N]

Part one renders each bomb (one filter, method or loop that used to escape the per-render
limits) twice: once timed, once under ``tracemalloc`` for its peak (tracing slows Python code,
so the two are separate runs), and prints both next to the figure measured before the guards
(the "before" column: from the report that found them, or, for the bombs found auditing the
other filters, measured on this machine with the previous sandbox). Every bomb must now fail
as a TemplateError; the line shows the limit its message names.

Part two renders ordinary templates (a query, the bundled static text, the file_corpus default
hit template over 3 hits, an http response template over 5 results) N times through composer
(hardened, budgeted, every filter and call pre-checked) and through a plain jinja2
``ImmutableSandboxedEnvironment`` on the same source and context, in the same process. Figures
are the median of 11 rounds of N renders, the two sides alternating round by round;
ratio = composer / plain.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builtin_providers.file_corpus import DEFAULT_TEMPLATE  # noqa: E402
from composer.errors import TemplateError  # noqa: E402
from composer.templating import CONTEXT_NAMES, compile_template, template_context  # noqa: E402
from composer.turn import Branch, Instruction  # noqa: E402

ROUNDS = 11
DISTINCT = "".join(map(chr, range(256, 8256)))  # user text punycode is quadratic on

# (name, payload, before the guards)
BOMBS: list[tuple[str, str, str]] = [
    ("batch fill", "{{ [1]|batch(10**8, 0)|list|length }}", "1.5 GB allocated"),
    ("batch fill str", "{{ [1]|batch(10**8, 'x')|list|length }}", "10**8 items built"),
    ("slice fill", "{{ [1]|slice(10**7, fill_with=0)|list|length }}", "31 s / 729 MB"),
    ("slice lists", "{{ [1]|slice(10**6)|list|length }}", "5.5 s, rendered"),
    ("sum of lists", "{{ ([[1] * 1000] * 3000)|sum(start=[])|length }}", "16 s"),
    ("wordwrap word", "{{ ('x' * 1300000)|wordwrap(1)|length }}", "14 s"),
    ("pprint nested", "{{ ([[[[1] * 10] * 10] * 10] * 600)|pprint|length }}", "2 s"),
    (
        "urlize target",
        "{{ ('http://a.b ' * 100)|urlize(target='x' * 2000000)|length }}",
        "200 MB",
    ),
    ("urlize rel", "{{ ('http://a.b ' * 100)|urlize(rel='x' * 2000000)|length }}", "200 MB"),
    ("int.to_bytes", "{{ (1).to_bytes(10**8, 'big')|length }}", "100 MB"),
    (
        "|length loop",
        "{% set big = [0] * 1999999 %}{% for i in range(100000) %}{% if big|length %}{% endif %}"
        "{% endfor %}",
        "10.8 s",
    ),
    ("macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
    ("sort 1.5M", "{{ ([0] * 1500000)|sort|length }}", "6.7 s / 217 MB (2M)"),
    ("urlize dots", "{{ (('.' * 20000) ~ 'a.')|urlize|length }}", "9.2 s"),
    ("format field x1000", "{{ ('{0}' * 1000).format('x' * 1000000)|length }}", "2.1 s / 954 MB"),
    ("'%(a)s' x1000", "{{ ('%(a)s' * 1000) % {'a': 'x' * 1000000} }}", "0.7 s / 954 MB"),
    (
        "big int modulo",
        "{{ (('f' * 1900000)|int(base=16)) % (('f' * 950000)|int(base=16)) }}",
        "20.8 s",
    ),
    ("round power", "{{ 5|round(-30000000) }}", "> 40 s"),
    ("tojson indent", "{{ range(1000)|list|tojson(indent=100000)|length }}", "191 MB"),
    ("join huge ints", "{{ ([10 ** 4000] * 1000000)|join|length }}", "> 40 s"),
    ("title", "{{ ('a ' * 1300000)|title|length }}", "202 MB"),
    ("bytes %", "{{ '%99999999d'.encode() % 1 }}", "95 MB"),
    ("punycode", "{{ instruction.text.encode('punycode')|length }}", "11 s"),
]


def _outcome(render: Callable[[], str]) -> str:
    try:
        return f"rendered {len(render())} chars"
    except TemplateError as e:
        return str(e).removeprefix("template failed: RenderLimitExceeded: ")


def bombs() -> None:
    context = template_context(Branch("sys"), Instruction(DISTINCT), provider="p")
    print(f"{'bomb':20} {'before':22} {'after':>8} {'peak':>8}  limit named")
    for name, payload, before in BOMBS:
        render = functools.partial(compile_template(payload).render, context)
        start = time.perf_counter()
        outcome = _outcome(render)
        elapsed = time.perf_counter() - start
        tracemalloc.start()
        _outcome(render)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{name:20} {before:22} {elapsed:7.3f}s {peak / 2**20:6.1f}MB  {outcome}")


def _hits() -> list[dict[str, Any]]:
    text = " ".join(
        ["The API returns 502 errors after a deploy; roll back with the pinned tag."] * 8
    )
    return [
        {"path": f"runbooks/{n}.md", "heading": "Rollback", "text": text, "score": 3.1 - n}
        for n in range(3)
    ]


def _ordinary() -> list[tuple[str, str, frozenset[str], dict[str, Any]]]:
    """(name, source, extra names, extra context) of templates manifests really use."""
    results = [{"title": f"Incident {n}", "state": "open"} for n in range(5)]
    response = (
        "Open incidents:\n{% for r in json.results %}- {{ r.title }} ({{ r.state }})\n{% endfor %}"
    )
    return [
        ("query", "{{ instruction.text }}", frozenset(), {}),
        (
            "static text",
            'House rules for {{ branch.name or "the ops team" }}: answer in English.',
            frozenset(),
            {},
        ),
        (
            "file_corpus hits (3)",
            DEFAULT_TEMPLATE,
            frozenset({"hits", "query"}),
            {"hits": _hits(), "query": "502"},
        ),
        ("http response (5)", response, frozenset({"json"}), {"json": {"results": results}}),
    ]


def _paired(
    ours: Callable[[], object], theirs: Callable[[], object], renders: int
) -> tuple[float, float]:
    """Median microseconds per render of each side over ROUNDS rounds of ``renders`` renders,
    the two sides alternating round by round so that load on the machine hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(ROUNDS):
        for render, spent in zip((ours, theirs), times, strict=True):
            start = time.perf_counter()
            for _ in range(renders):
                render()
            spent.append((time.perf_counter() - start) / renders * 1e6)
    return statistics.median(times[0]), statistics.median(times[1])


def overhead(renders: int) -> None:
    plain_env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    base = template_context(
        Branch("sys", name="ops"), Instruction("The API returns 502 errors"), provider="p"
    )
    print(f"\n{'template':22} {'composer':>10} {'plain jinja2':>13} {'ratio':>6}")
    for name, source, extra, more in _ordinary():
        context: Mapping[str, Any] = {**base, **more}
        bounded = compile_template(source, CONTEXT_NAMES | extra)
        plain = plain_env.from_string(source)
        assert bounded.render(context) == plain.render(context)
        ours, theirs = _paired(
            functools.partial(bounded.render, context),
            functools.partial(plain.render, context),
            renders,
        )
        print(f"{name:22} {ours:8.1f}us {theirs:11.1f}us {ours / theirs:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--renders", type=int, default=2000, help="renders per round")
    args = parser.parse_args()
    bombs()
    overhead(args.renders)


if __name__ == "__main__":
    main()
