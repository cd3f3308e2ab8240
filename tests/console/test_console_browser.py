"""The console in a real Chromium over a running ``composer serve --console``: the turns page
lists turns that real requests made, a turn shows its blocks under their providers' names and
its budget bar, the compare view shows the block that changed, and no page holds the secret.

The browser reaches nothing but 127.0.0.1 (every other name resolves to nothing), so the pages
work offline with what the wheel ships. Each page's screenshot is written under the test's
temporary folder, and also into ``$COMPOSER_CONSOLE_SCREENSHOTS`` when set (the guide's
pictures are made that way).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, find_browser
from serve.conftest import Server, start_serve

from console.console_setup import ENV, SENTINEL, post_turn, wait_for_lines, write_files

TURNS = (
    ("inc-7", "the disk is full on db-1, what do I do?"),
    ("inc-7", "the disk is still full after logrotate"),
    ("inc-9", f"latency is high after the deploy; key {SENTINEL}"),
    ("inc-9", "which dashboards show the p95 latency?"),
)


@pytest.fixture(scope="module")
def browser() -> Browser:
    return find_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A token-less loopback server with the console; four turns made through its API."""
    folder = tmp_path_factory.mktemp("console-browser")
    manifest, _ = write_files(folder)
    server = start_serve([str(manifest), "--console", "--console-preview"], env=ENV)
    for branch, text in TURNS:
        post_turn(server.url, text, branch=branch)
    wait_for_lines(folder / "turns.jsonl", len(TURNS))
    yield server, folder
    assert server.stop() == 0


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    """Where the screenshots go; copied to ``$COMPOSER_CONSOLE_SCREENSHOTS`` at the end."""
    taken: list[Path] = []
    yield taken
    wanted = os.environ.get("COMPOSER_CONSOLE_SCREENSHOTS")
    if wanted:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        for path in taken:
            shutil.copy(path, Path(wanted) / path.name)


def ids(folder: Path) -> list[str]:
    """The turn ids, oldest first."""
    return [json.loads(line)["turn_id"] for line in wait_for_lines(folder / "turns.jsonl", 4)]


def snap(
    browser: Browser,
    shots: list[Path],
    tmp_path: Path,
    url: str,
    name: str,
    *,
    size: tuple[int, int] = (1200, 900),
) -> None:
    """The page in the light and the dark scheme, each a PNG artefact."""
    for dark in (False, True):
        path = tmp_path / f"console-{name}{'-dark' if dark else ''}.png"
        shots.append(browser.screenshot(url, path, size=size, dark=dark))


def test_the_turns_page_lists_the_turns_real_requests_made(
    browser: Browser, served: tuple[Server, Path], shots: list[Path], tmp_path: Path
) -> None:
    server, _ = served
    dom = browser.dom(f"{server.url}/console/turns")
    assert "4 turns" in dom
    for _, text in TURNS:
        assert " ".join(text.split()[:4]) in dom
    assert dom.count('class="mark o-over_budget"') == 4  # the strip: huge never fits
    assert SENTINEL.lower() not in dom.lower()
    snap(browser, shots, tmp_path, f"{server.url}/console/turns", "turns", size=(1200, 560))
    phone = tmp_path / "console-turns-phone.png"
    shots.append(browser.screenshot(f"{server.url}/console/turns", phone, size=(390, 844)))


def test_a_turn_shows_its_labelled_blocks_and_budget_bar(
    browser: Browser, served: tuple[Server, Path], shots: list[Path], tmp_path: Path
) -> None:
    server, folder = served
    url = f"{server.url}/console/turns/{ids(folder)[0]}"
    dom = browser.dom(url)
    for provider in ("rules", "runbook", "echo"):
        assert f'data-provider="{provider}"' in dom
    assert "Disk runbook: free space with logrotate" in dom
    assert 'data-provider="huge"' not in dom  # over the budget: the model never saw it
    assert '<svg class="bar"' in dom
    assert dom.count('<rect class="seg') == 3  # one segment per admitted block
    assert "skipped: over the budget" in dom  # the preview table's words
    assert SENTINEL.lower() not in dom.lower()
    snap(browser, shots, tmp_path, url, "turn", size=(1200, 1300))


def test_the_compare_view_shows_the_changed_block(
    browser: Browser, served: tuple[Server, Path], shots: list[Path], tmp_path: Path
) -> None:
    server, folder = served
    first, _, third, _ = ids(folder)
    url = f"{server.url}/console/turns/{first}/compare?with={third}"
    dom = browser.dom(url)
    assert "~ runbook: outcome fired -&gt; guarded" in dom
    assert "~ echo: block changed" in dom
    assert '<span class="line-add">    +Asked about latency is high' in dom
    assert dom.count('<tr class="changed">') == 2  # runbook and echo; rules and huge the same
    assert SENTINEL.lower() not in dom.lower()
    snap(browser, shots, tmp_path, url, "compare", size=(1200, 1000))


def test_no_page_holds_the_secret_and_each_is_photographed(
    browser: Browser, served: tuple[Server, Path], shots: list[Path], tmp_path: Path
) -> None:
    server, _ = served
    pages = {
        "providers": ("/console/providers?window=1h", "rules"),
        "manifest": ("/console/manifest?a=dev&b=prod", "${CONSOLE_SECRET}"),
        "preview": ("/console/preview", "Preview an instruction"),
        "login": ("/console/login", "Paste the bearer token"),
    }
    for name, (path, expected) in pages.items():
        dom = browser.dom(server.url + path)
        assert expected in dom, name
        assert SENTINEL.lower() not in dom.lower(), name
        snap(browser, shots, tmp_path, server.url + path, name, size=(1200, 760))
    css = browser.dom(f"{server.url}/console/static/console.css")
    assert "prefers-color-scheme: dark" in css
    assert SENTINEL.lower() not in css.lower()
