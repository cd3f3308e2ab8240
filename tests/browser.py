"""A real browser for the console's tests: Debian's ``chromium``, driven by its own headless
switches (``--dump-dom``, ``--screenshot``), so no driver is downloaded and nothing but
loopback is reached (every other host name resolves to nothing).

Without a ``chromium`` on PATH the test is skipped with the reason, or fails under
``COMPOSER_REQUIRE_SERVICES=1`` (CI, whose ``.ci/run`` installs it), like the database tests.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from memory.services import unavailable

__all__ = ["Browser", "find_browser"]

RUN_S = 120  # a bound that only catches a browser that hangs

_SWITCHES = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)


class Browser:
    """One Chromium executable; each call is a fresh headless run with its own profile."""

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def _run(self, url: str, *switches: str, dark: bool = False) -> str:
        with tempfile.TemporaryDirectory(prefix="composer-chromium-") as profile:
            scheme = (
                ("--force-dark-mode", "--blink-settings=preferredColorScheme=0") if dark else ()
            )
            done = subprocess.run(
                [
                    self.executable,
                    *_SWITCHES,
                    f"--user-data-dir={profile}",
                    *scheme,
                    *switches,
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=RUN_S,
                check=False,
            )
        if done.returncode != 0:
            raise AssertionError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def dom(self, url: str) -> str:
        """The page's DOM after it loaded, serialised (what the browser built, not the bytes)."""
        return self._run(url, "--dump-dom")

    def screenshot(
        self, url: str, path: Path, *, size: tuple[int, int] = (1280, 900), dark: bool = False
    ) -> Path:
        """A PNG of the page at ``size`` (width, height), in the light or dark scheme."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._run(url, f"--screenshot={path}", f"--window-size={size[0]},{size[1]}", dark=dark)
        if not path.is_file() or path.stat().st_size == 0:
            raise AssertionError(f"chromium wrote no screenshot of {url}")
        return path


def find_browser() -> Browser:
    """Debian's chromium (or a chromium-browser) on PATH; skipped (or failed in CI) without."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Browser(found)
    unavailable("no chromium on PATH (apt-get install chromium), so no browser test ran")
