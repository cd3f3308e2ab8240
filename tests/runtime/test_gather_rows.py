"""The rows of a gather when everything fits and when the budget drops some: the registry
writes each row once as if all were admitted, then redoes only what admission changes.
The ADR's lists are checked by ``tests/conformance``; here the rows beyond them: durations,
a dropped notice, the tokens used."""

from __future__ import annotations

import textwrap
from pathlib import Path

import composer

MANIFEST = """\
version: 1
budget: {budget}
providers:
  - {{name: low, type: static, priority: 1, text: "{low}"}}
  - name: notice
    type: static
    priority: 0
    text: "{{{{ instruction.context.missing.title }}}}"
    on_failure: {{notice: "{notice}"}}
  - {{name: high, type: static, priority: 5, text: "{high}"}}
  - {{name: empty, type: static, text: "{{{{ '' }}}}"}}
"""

LOW = "Low priority block of several words here."
HIGH = "High priority block, admitted first."
NOTICE = "The source did not answer; do not assume it has nothing."


async def gathered(tmp_path: Path, budget: int) -> composer.ProviderReport:
    path = tmp_path / f"m{budget}.yaml"
    text = MANIFEST.format(budget=budget, low=LOW, high=HIGH, notice=NOTICE)
    path.write_text(textwrap.dedent(text))
    branch = composer.Branch("S\n")
    composer.attach(branch, composer.load_manifest(path))
    prepared = await composer.prepare_turn(branch, "q")
    assert prepared.report is not None
    return prepared.report


def rows(report: composer.ProviderReport) -> list[tuple[str, str, int | None]]:
    return [(o.name, o.outcome, o.tokens) for o in report.outcomes]


async def test_when_everything_fits_every_success_is_admitted(tmp_path: Path) -> None:
    low, high, notice = (composer.count_tokens(t) for t in (LOW, HIGH, NOTICE))
    report = await gathered(tmp_path, 1000)
    assert report.blocks == [LOW, NOTICE, HIGH]
    assert rows(report) == [
        ("low", "fired", low),
        ("notice", "failed", notice),
        ("high", "fired", high),
        ("empty", "empty", None),
    ]
    assert report.tokens_used == low + high + notice
    assert [d["provider_name"] for d in report.degraded] == ["notice"]
    assert all(o.duration_ms is not None and o.duration_ms >= 0 for o in report.outcomes)


async def test_when_the_budget_drops_blocks_their_rows_say_so(tmp_path: Path) -> None:
    low, high, notice = (composer.count_tokens(t) for t in (LOW, HIGH, NOTICE))
    report = await gathered(tmp_path, high + low)  # high first, then low; the notice is out
    assert report.blocks == [LOW, HIGH]  # registration order
    assert report.fired == [
        {"provider_name": "low", "tokens": low},
        {"provider_name": "high", "tokens": high},
    ]
    assert report.skipped == ["notice"]
    # the dropped notice stays what it was, a failure answered by its notice, still degraded
    assert rows(report)[1] == ("notice", "failed", notice)
    assert [d["provider_name"] for d in report.degraded] == ["notice"]
    assert report.tokens_used == high + low

    report = await gathered(tmp_path, high)  # only the highest priority fits
    assert report.blocks == [HIGH]
    assert rows(report) == [
        ("low", "over_budget", low),
        ("notice", "failed", notice),
        ("high", "fired", high),
        ("empty", "empty", None),
    ]
    dropped = report.outcomes[0]
    assert dropped.duration_ms is not None  # a dropped row keeps how long its call took
    assert report.skipped == ["low", "notice"]
    assert report.tokens_used == high
