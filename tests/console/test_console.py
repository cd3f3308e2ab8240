"""``composer serve --console`` with two principals, over real HTTP: each token (as a bearer
header or through the login form's session cookie) opens its own turns only, form posts must
come from the console's own origin, every page is masked, bounded and never cached."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve.conftest import Server, start_serve

from console.console_setup import (
    ENV,
    SENTINEL,
    TOKENS,
    post_turn,
    wait_for_lines,
    wait_for_turn,
    write_files,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """Two principals' server with the console and its preview form; two turns each."""
    folder = tmp_path_factory.mktemp("console")
    manifest, principals = write_files(folder)
    stderr = (folder / "stderr.log").open("w")
    server = start_serve(
        [
            str(manifest),
            *("--principals", str(principals), "--console", "--console-preview"),
            "--access-log",
        ],
        env=ENV,
        stderr=stderr,
    )
    post_turn(server.url, "team a: the disk is full on db-1", token=TOKENS["team-a"])
    post_turn(server.url, f"team a: rotate {SENTINEL} now", token=TOKENS["team-a"])
    post_turn(server.url, "team b: payroll run failed", branch="pay-9", token=TOKENS["team-b"])
    post_turn(server.url, HOSTILE, branch="pay-9", token=TOKENS["team-b"])
    wait_for_lines(folder / "turns.jsonl", 4)
    yield server, folder
    assert server.stop() == 0
    stderr.close()


HOSTILE = '</pre><script>alert(1)</script><img src=x onerror="alert(2)">'
"""An instruction that would run script if a page printed it as HTML."""


def bearer(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[who]}"}


def turn_ids(log: Path, principal: str) -> list[str]:
    return [
        line["turn_id"]
        for line in map(json.loads, log.read_text().splitlines())
        if line["branch"]["principal"] == principal
    ]


@contextlib.contextmanager
def login(url: str, who: str) -> Iterator[httpx.Client]:
    """A client holding the session cookie the login form gave for ``who``'s token."""
    with httpx.Client(base_url=url, timeout=30) as client:
        yield logged_in(client, url, who)


def logged_in(client: httpx.Client, url: str, who: str) -> httpx.Client:
    answer = client.post("/console/login", data={"token": TOKENS[who]}, headers={"origin": url})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/turns"
    return client


def test_a_principal_sees_only_its_own_turns(served: tuple[Server, Path]) -> None:
    server, folder = served
    log = folder / "turns.jsonl"
    page = httpx.get(f"{server.url}/console/turns", headers=bearer("team-a"), timeout=30)
    assert page.status_code == 200
    assert "the disk is full on db-1" in page.text
    assert "payroll" not in page.text
    assert "2 turns" in page.text
    theirs = turn_ids(log, "team-b")[0]
    for path in (
        f"/console/turns/{theirs}",
        f"/console/turns/{turn_ids(log, 'team-a')[0]}/compare?with={theirs}",
    ):
        refused = httpx.get(server.url + path, headers=bearer("team-a"), timeout=30)
        assert refused.status_code == 403, path
        assert "payroll" not in refused.text
    own = httpx.get(f"{server.url}/console/turns/{theirs}", headers=bearer("team-b"), timeout=30)
    assert own.status_code == 200
    assert "payroll run failed" in own.text
    # the principal filter cannot widen what a principal sees
    widened = httpx.get(
        f"{server.url}/console/turns?principal=team-b", headers=bearer("team-a"), timeout=30
    )
    assert "payroll" not in widened.text


def test_without_a_token_every_page_sends_to_the_login_form(served: tuple[Server, Path]) -> None:
    server, folder = served
    theirs = turn_ids(folder / "turns.jsonl", "team-b")[0]
    for path in (
        "/console/turns",
        f"/console/turns/{theirs}",
        "/console/providers",
        "/console/manifest",
    ):
        answer = httpx.get(server.url + path, timeout=30)
        assert answer.status_code == 303, path
        assert answer.headers["location"] == "/console/login"
    wrong = httpx.get(
        f"{server.url}/console/turns", headers={"authorization": "Bearer nope"}, timeout=30
    )
    assert wrong.status_code == 303
    # the API itself still wants its bearer token: the console opens nothing else
    assert httpx.get(f"{server.url}/v1/manifest", timeout=30).status_code == 401
    assert httpx.get(f"{server.url}/consoles", timeout=30).status_code == 401


def test_the_login_form_gives_a_strict_session_cookie_and_logout_ends_it(
    served: tuple[Server, Path],
) -> None:
    server, folder = served
    with login(server.url, "team-b") as client:
        check_session(client, server.url, folder)
    bad = httpx.post(
        f"{server.url}/console/login",
        data={"token": "not-a-token"},
        headers={"origin": server.url},
        timeout=30,
    )
    assert bad.status_code == 401
    assert "set-cookie" not in bad.headers


def check_session(client: httpx.Client, url: str, folder: Path) -> None:
    (set_cookie,) = list(client.cookies.jar)
    assert set_cookie.name == "composer_console"
    assert set_cookie.path == "/console"
    value = set_cookie.value or ""
    assert TOKENS["team-b"] not in value
    header = (
        client.post("/console/login", data={"token": TOKENS["team-b"]}, headers={"origin": url})
        .headers["set-cookie"]
        .lower()
    )
    assert "httponly" in header
    assert "samesite=strict" in header
    assert "secure" not in header  # plain http on loopback: a Secure cookie would be dropped
    page = client.get("/console/turns")
    assert page.status_code == 200
    assert "payroll run failed" in page.text
    assert "the disk is full" not in page.text
    mine = turn_ids(folder / "turns.jsonl", "team-a")[0]
    assert client.get(f"/console/turns/{mine}").status_code == 403
    value = client.cookies["composer_console"]  # the second login's session
    out = client.post("/console/logout", headers={"origin": url})
    assert out.status_code == 303
    client.cookies.set("composer_console", value, path="/console")
    assert client.get("/console/turns").status_code == 303  # the cookie names nothing now


@pytest.mark.parametrize(
    ("origin", "status"), [("http://evil.example", 403), (None, 403), ("null", 403)]
)
def test_a_form_post_from_elsewhere_is_refused(
    served: tuple[Server, Path], origin: str | None, status: int
) -> None:
    """A cross-site form (or one that hides its origin) can neither log a browser in nor run
    a preview with its session."""
    server, _ = served
    headers = {"origin": origin} if origin else {}
    with login(server.url, "team-a") as client:
        for path, data in (
            ("/console/login", {"token": TOKENS["team-a"]}),
            ("/console/preview", {"instruction": "disk"}),
            ("/console/logout", {}),
        ):
            answer = client.post(path, data=data, headers=headers)
            assert answer.status_code == status, path
            assert "set-cookie" not in answer.headers
        assert client.get("/console/turns").status_code == 200  # the logout was refused too


def test_pages_carry_a_strict_policy_and_are_never_cached(served: tuple[Server, Path]) -> None:
    server, _ = served
    page = httpx.get(f"{server.url}/console/turns", headers=bearer("team-a"), timeout=30)
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src" not in policy  # so scripts fall under default-src 'none'
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert "<script" not in page.text
    assert not re.search(r"\son\w+=", page.text)  # no inline event handler either
    assert "https://" not in page.text
    assert "http://" not in page.text


def test_no_page_or_asset_holds_the_secret(served: tuple[Server, Path]) -> None:
    server, folder = served
    log = folder / "turns.jsonl"
    first, second = turn_ids(log, "team-a")[:2]
    paths = [
        "/console/login",
        "/console/static/console.css",
        "/console/turns",
        f"/console/turns/{first}",
        f"/console/turns/{second}",
        f"/console/turns/{first}/compare?with={second}",
        "/console/providers?window=all",
        "/console/manifest",
        "/console/manifest?a=dev&b=prod",
        "/console/preview",
    ]
    for path in paths:
        answer = httpx.get(server.url + path, headers=bearer("team-a"), timeout=30)
        assert answer.status_code == 200, path
        assert SENTINEL.lower() not in answer.text.lower(), path
        assert SENTINEL.lower() not in str(answer.headers).lower(), path
    with login(server.url, "team-a") as client:
        ran = client.post(
            "/console/preview",
            data={"instruction": f"disk {SENTINEL}"},
            headers={"origin": server.url},
        )
    assert ran.status_code == 200
    assert "Disk runbook" in ran.text
    assert SENTINEL.lower() not in ran.text.lower()
    manifest = httpx.get(f"{server.url}/console/manifest", headers=bearer("team-a"), timeout=30)
    assert "${CONSOLE_SECRET}" in manifest.text  # shown as written, never as its value
    assert "dev.yaml:5:" in manifest.text  # each value's origin


def test_a_preview_is_a_real_turn_of_its_principal(served: tuple[Server, Path]) -> None:
    server, folder = served
    with login(server.url, "team-b") as client:
        ran = client.post(
            "/console/preview",
            data={"instruction": "the disk filled up"},
            headers={"origin": server.url},
        )
    assert ran.status_code == 200
    assert 'data-provider="runbook"' in ran.text
    assert "budget:" in ran.text
    line = wait_for_turn(folder / "turns.jsonl", "the disk filled up")
    assert line["branch"]["principal"] == "team-b"
    assert line["branch"]["name"] == "console-preview"
    assert line["instruction"]["text"] == "the disk filled up"
    # the served manifest was left open: the API still answers turns after a preview
    post_turn(server.url, "after the preview", token=TOKENS["team-b"])


def test_the_preview_form_is_bounded(served: tuple[Server, Path]) -> None:
    server, _ = served
    origin = {"origin": server.url}
    with login(server.url, "team-a") as client:
        post = client.post
        long = post("/console/preview", data={"instruction": "x" * 16_385}, headers=origin)
        assert long.status_code == 400
        assert "at most 16384 characters" in long.text
        huge = post("/console/preview", data={"instruction": "x" * 70_000}, headers=origin)
        assert huge.status_code == 413
        empty = post("/console/preview", data={"instruction": "  "}, headers=origin)
        assert empty.status_code == 400
        as_json = post("/console/preview", json={"instruction": "disk"}, headers=origin)
        assert as_json.status_code == 415


def test_lists_are_bounded_and_filtered(served: tuple[Server, Path]) -> None:
    server, _ = served

    def get(query: str) -> str:
        """The turns page of team a's branch inc-7 (its two turns from the fixture)."""
        url = f"{server.url}/console/turns?branch=inc-7&{query}"
        return httpx.get(url, headers=bearer("team-a"), timeout=30).text

    assert get("limit=1").count('class="said"') == 1
    assert "older</a>" in get("limit=1")
    assert get("limit=999999").count('class="said"') == 2  # capped, not refused
    assert get("offset=1&limit=1").count('class="said"') == 1
    assert "newer</a>" in get("offset=1&limit=1")
    assert get("outcome=timeout").count('class="said"') == 0
    runbook = get("provider=runbook&outcome=fired")
    assert "the disk is full" in runbook
    assert "rotate" not in runbook
    assert get("branch=no-such-branch").count('class="said"') == 0
    assert (
        "No such turn"
        in httpx.get(
            f"{server.url}/console/turns/{'f' * 32}", headers=bearer("team-a"), timeout=30
        ).text
    )


def test_the_providers_page_counts_each_outcome(served: tuple[Server, Path]) -> None:
    """Each outcome in its own column, ``guarded`` (its ``when`` was false) apart from
    ``empty``."""
    server, _ = served
    page = httpx.get(
        f"{server.url}/console/providers?window=1h", headers=bearer("team-b"), timeout=30
    ).text
    assert '<th class="num">empty</th><th class="num">guarded</th>' in page
    counts = {
        m.group(1): [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', m.group(2))]
        for m in re.finditer(r'<th scope="row">(\w+)</th>(.*?)</tr>', page, re.S)
    }
    # team b's turns only: fired, empty, guarded, skipped, failed, timeout, cache hits, tokens
    runbook, huge, rules = counts["runbook"], counts["huge"], counts["rules"]
    assert runbook[1] == 0  # its `when` was false: guarded, never empty
    assert runbook[2] >= 2  # at least team b's two turns, which name no disk
    assert runbook[0] + runbook[2] == sum(runbook[:6])
    assert huge[3] == sum(huge[:6])  # always over the budget
    assert rules[0] == sum(rules[:6])  # always fired


def test_the_access_log_names_the_consoles_principal(served: tuple[Server, Path]) -> None:
    """A console request is logged with its principal, whether its token came as a bearer
    header, through the login form or in the session cookie; a request without one is -."""
    server, folder = served
    httpx.get(f"{server.url}/console/turns?limit=7", headers=bearer("team-a"), timeout=30)
    with login(server.url, "team-b") as client:
        assert client.get("/console/providers?window=7d").status_code == 200
    httpx.get(f"{server.url}/console/turns?limit=9", timeout=30)
    expected = (
        "GET /console/turns 200 principal=team-a",
        "POST /console/login 303 principal=team-b",
        "GET /console/providers 200 principal=team-b",
        "GET /console/turns 303 principal=-",
    )
    deadline = time.monotonic() + 30
    while True:
        logged = (folder / "stderr.log").read_text()
        if all(line in logged for line in expected) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for line in expected:
        assert line in logged, logged[-2000:]
    assert all(token not in logged for token in TOKENS.values())


def test_text_from_a_turn_is_shown_never_run(served: tuple[Server, Path]) -> None:
    """An instruction (and the block that repeats it) is escaped on every page: a turn's
    text cannot put markup, let alone script, into the console."""
    server, folder = served
    hostile = wait_for_turn(folder / "turns.jsonl", HOSTILE)["turn_id"]
    for path in ("/console/turns", f"/console/turns/{hostile}"):
        page = httpx.get(server.url + path, headers=bearer("team-b"), timeout=30).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path
        assert "<script" not in page, path
        assert "<img" not in page, path


def test_the_console_is_off_unless_asked(dev_server: Server) -> None:
    assert httpx.get(f"{dev_server.url}/console/turns", timeout=30).status_code == 404
