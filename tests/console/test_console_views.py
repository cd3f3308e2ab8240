"""The console's views of real audit lines: the providers page's counts and durations."""

from __future__ import annotations

from pathlib import Path

from cli.test_audit_list import write_turns

from composer.console import TurnSource
from composer.console.views import provider_stats


async def test_a_guarded_provider_counts_apart_and_has_no_duration(tmp_path: Path) -> None:
    """``quiet``'s `when` is false on every turn: it counts as guarded, never as empty, and
    the time its guard took is no call's duration, so it has no percentile; ``rules``,
    called each turn, has both its counts and its durations."""
    log = await write_turns(tmp_path, keep_text=False)
    stats, turns = provider_stats(TurnSource(log).lines())
    by_name = {entry.name: entry for entry in stats}
    assert turns == 2
    assert by_name["quiet"].counts == {"guarded": 2}
    assert by_name["quiet"].turns == 2
    assert by_name["quiet"].percentile(0.5) is None
    assert by_name["rules"].counts == {"fired": 2}
    assert by_name["rules"].percentile(0.95) is not None
