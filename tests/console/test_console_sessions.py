"""Console sessions: a signed cookie any process with the same principals accepts, bounded in
time and size, refused when edited, ended by rotating its principal's token."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from composer.console.sessions import CONTEXT, MAX_COOKIE, Sessions
from composer.principal import Principal
from composer.serve.principals import Principals

A, B = Principal("team-a"), Principal("team-b")
TOKEN_A, TOKEN_B = b"token-of-team-a-0123456789", b"token-of-team-b-9876543210"
PRINCIPALS = Principals((A, B), (TOKEN_A, TOKEN_B))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def fields(value: str) -> list[str]:
    return value.split(":")


def test_a_session_lasts_its_lifetime_and_idles_out_without_requests() -> None:
    clock = Clock()
    sessions = Sessions(ttl_s=1000, idle_s=300, renew_s=60, clock=clock)
    value = sessions.open(A, PRINCIPALS)
    assert len(value) <= MAX_COOKIE
    opened = sessions.check(value, PRINCIPALS)
    assert opened is not None
    assert opened.principal == A
    assert opened.renewed is None  # not yet due: no new cookie on every request
    clock.now += 299
    due = sessions.check(value, PRINCIPALS)
    assert due is not None
    assert due.renewed is not None
    clock.now += 2
    assert sessions.check(value, PRINCIPALS) is None  # the old cookie idled out
    value = due.renewed
    for _ in range(2):  # each renewal moves the idle deadline on ...
        clock.now += 250
        session = sessions.check(value, PRINCIPALS)
        assert session is not None
        assert session.renewed is not None
        value = session.renewed
    clock.now += 198  # 999 s after login, 198 s after the last renewal
    assert sessions.check(value, PRINCIPALS) is not None
    clock.now += 1  # ... but never past the lifetime from login, however busy
    assert sessions.check(value, PRINCIPALS) is None


def test_another_process_with_the_same_principals_accepts_the_cookie() -> None:
    clock = Clock()
    value = Sessions(clock=clock).open(B, PRINCIPALS)
    again = Principals((A, B), (TOKEN_A, TOKEN_B))  # another worker loaded the same file
    session = Sessions(clock=clock).check(value, again)
    assert session is not None
    assert session.principal == B
    assert TOKEN_B.decode() not in value
    assert "token" not in value


def test_rotating_or_removing_a_token_ends_its_sessions_only() -> None:
    sessions = Sessions()
    a, b = sessions.open(A, PRINCIPALS), sessions.open(B, PRINCIPALS)
    rotated = Principals((A, B), (b"a-new-token-for-team-a-42", TOKEN_B))
    assert sessions.check(a, rotated) is None
    assert sessions.check(b, rotated) is not None
    removed = Principals((B,), (TOKEN_B,))
    assert sessions.check(a, removed) is None
    assert sessions.check(b, removed) is not None


def test_every_field_is_signed() -> None:
    clock = Clock()
    sessions = Sessions(ttl_s=1000, idle_s=300, clock=clock)
    value = sessions.open(A, PRINCIPALS)
    clock.now += 10
    assert sessions.check(value, PRINCIPALS) is not None
    parts = fields(value)
    edits = {
        1: "team-b",  # another principal's name: the MAC is under A's key, not B's
        2: str(int(parts[2]) + 5),  # issued later: a longer life
        3: str(int(parts[3]) + 5),  # seen later: a longer idle deadline
        4: str(int(parts[4]) + 5),  # expires later
        5: ("B" if parts[5][0] != "B" else "C") + parts[5][1:],  # another nonce
        6: ("B" if parts[6][0] != "B" else "C") + parts[6][1:],  # another MAC
    }
    for index, edit in edits.items():
        edited = parts.copy()
        edited[index] = edit
        assert sessions.check(":".join(edited), PRINCIPALS) is None, index
    for index in (1, 5):  # nor can a part move between cookies
        other = fields(sessions.open(B, PRINCIPALS))
        edited = parts.copy()
        edited[index] = other[index]
        assert sessions.check(":".join(edited), PRINCIPALS) is None, index


def test_a_cookie_of_a_cannot_become_one_of_b() -> None:
    sessions = Sessions()
    parts = fields(sessions.open(A, PRINCIPALS))
    parts[1] = "team-b"
    assert sessions.check(":".join(parts), PRINCIPALS) is None
    # signed with A's key under B's name (what a holder of A's token could make): refused
    payload = ":".join(parts[:6])
    key = hashlib.sha256(CONTEXT + TOKEN_A).digest()
    mac = hmac.new(key, payload.encode(), hashlib.sha256).digest()
    forged = f"{payload}:{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    assert sessions.check(forged, PRINCIPALS) is None


def sign_by_hand(payload: str, token: bytes) -> str:
    """``payload:mac`` as the cookie's documented format says: HMAC-SHA256 under
    ``SHA-256(CONTEXT + token)``, unpadded URL-safe base64."""
    key = hashlib.sha256(CONTEXT + token).digest()
    mac = hmac.new(key, payload.encode(), hashlib.sha256).digest()
    return f"{payload}:{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_the_cookie_is_the_documented_format_so_replicas_of_any_release_agree() -> None:
    """A worker still on an earlier release, which signed with its own HMAC code, and one on
    this release accept each other's cookies during a rolling upgrade."""
    clock = Clock()
    sessions = Sessions(clock=clock)
    value = sessions.open(A, PRINCIPALS)
    payload = value.rpartition(":")[0]
    assert value == sign_by_hand(payload, TOKEN_A)
    now = int(clock.now)
    made_elsewhere = sign_by_hand(f"1:team-b:{now}:{now}:{now + 60}:{'n' * 22}", TOKEN_B)
    session = sessions.check(made_elsewhere, PRINCIPALS)
    assert session is not None
    assert session.principal == B


def test_a_mac_differing_only_in_its_unused_base64_bits_is_refused() -> None:
    """The MAC's last base64 character carries two bits that decoding ignores: a cookie that
    changes only those decodes to the same MAC, and must still be no session."""
    value = Sessions().open(A, PRINCIPALS)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(value[-1])
    for low_bits in (1, 2, 3):
        edited = value[:-1] + alphabet[last | low_bits]
        assert base64.urlsafe_b64decode(edited.rpartition(":")[2] + "=") == (
            base64.urlsafe_b64decode(value.rpartition(":")[2] + "=")
        )
        assert Sessions().check(edited, PRINCIPALS) is None


def test_a_cookie_longer_than_its_lifetime_allows_is_refused() -> None:
    """Signed times must make sense: a life longer than ``ttl_s`` (a server that shortened it
    since) or a login in the future is no session."""
    clock = Clock()
    value = Sessions(ttl_s=10_000, clock=clock).open(A, PRINCIPALS)
    assert Sessions(ttl_s=1000, clock=clock).check(value, PRINCIPALS) is None
    clock.now -= 3600
    assert Sessions(ttl_s=10_000, clock=clock).check(value, PRINCIPALS) is None


def test_logout_is_remembered_in_this_process_in_a_bounded_set() -> None:
    clock = Clock()
    sessions = Sessions(ttl_s=100, idle_s=100, max_revoked=3, clock=clock)
    values = [sessions.open(A, PRINCIPALS) for _ in range(5)]
    elsewhere = Sessions(ttl_s=100, idle_s=100, clock=clock)
    sessions.close(values[0], PRINCIPALS)
    assert sessions.check(values[0], PRINCIPALS) is None
    assert elsewhere.check(values[0], PRINCIPALS) is not None  # another replica: until expiry
    for value in values[1:]:
        sessions.close(value, PRINCIPALS)
    assert sessions.revoked() == 3  # the oldest logouts went first
    assert [sessions.check(v, PRINCIPALS) is None for v in values] == [
        False,
        False,
        True,
        True,
        True,
    ]
    sessions.close("not-a-session", PRINCIPALS)  # only a valid cookie takes a place
    assert sessions.revoked() == 3
    clock.now += 100
    sessions.close(sessions.open(B, PRINCIPALS), PRINCIPALS)
    assert sessions.revoked() == 1  # expired logouts are forgotten before the oldest


NAMES = st.sampled_from(["team-a", "team-b", "team-c", "", "team-a\n", "TEAM-A"])
NUMBERS = st.one_of(
    st.integers(-(10**13), 10**13).map(str),
    st.sampled_from(["", "1e9", "0x10", "١٢٣", " 1", "1.5", "NaN"]),
)


@given(
    st.one_of(
        st.text(max_size=400),
        st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
        st.lists(st.text(max_size=30), max_size=10).map(":".join),
        st.tuples(
            st.sampled_from(["1", "2", "", "01"]),
            NAMES,
            NUMBERS,
            NUMBERS,
            NUMBERS,
            st.text(max_size=30),
            st.text(max_size=50),
        ).map(":".join),
    )
)
def test_anything_malformed_is_no_session(value: str) -> None:
    assert Sessions().check(value, PRINCIPALS) is None
    Sessions().close(value, PRINCIPALS)  # and raises nothing


@given(st.integers(0, 200), st.characters(codec="ascii"))
def test_a_valid_cookie_edited_by_one_character_is_no_session(index: int, char: str) -> None:
    value = Sessions().open(A, PRINCIPALS)
    index %= len(value) + 1
    for edited in (value[:index] + char + value[index:], value[:index] + char + value[index + 1 :]):
        if edited != value:
            assert Sessions().check(edited, PRINCIPALS) is None
    assert Sessions().check(value + "x" * MAX_COOKIE, PRINCIPALS) is None
