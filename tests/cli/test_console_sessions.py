"""Console sessions: an opaque id per login, bounded in number and in time."""

from __future__ import annotations

from composer.cli.console.sessions import Sessions
from composer.principal import Principal

A, B = Principal("team-a"), Principal("team-b")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_names_its_principal_until_it_expires_or_idles() -> None:
    clock = Clock()
    sessions = Sessions(ttl_s=100, idle_s=30, clock=clock)
    value = sessions.open(A)
    assert len(value) >= 40  # 32 random bytes: nothing to guess
    assert sessions.principal(value) == A
    clock.now += 29
    assert sessions.principal(value) == A  # each use moves the idle deadline on
    clock.now += 29
    assert sessions.principal(value) == A
    clock.now += 31
    assert sessions.principal(value) is None  # idle too long
    kept = sessions.open(B)
    for _ in range(3):
        clock.now += 25
        assert sessions.principal(kept) == B
    clock.now += 26
    assert sessions.principal(kept) is None  # past its lifetime, however busy
    assert len(sessions) == 0


def test_sessions_are_bounded_and_logout_forgets_one() -> None:
    sessions = Sessions(max_sessions=3)
    values = [sessions.open(A) for _ in range(5)]
    assert len(sessions) == 3
    assert [sessions.principal(v) for v in values] == [None, None, A, A, A]  # oldest went
    sessions.close(values[-1])
    assert sessions.principal(values[-1]) is None
    assert sessions.principal("not-a-session") is None
