"""What a test needs and what it costs, by where it lives: the suite's markers, set in one place.

- ``slow``: left out of ``make test-fast`` (``pytest -m "not slow"``): tests that start
  processes (``composer serve``, an MCP peer, the console's servers), soaks, many-process
  races, and the agent frameworks and lionagi (each a large import, some in a child process);
- ``services``: needs a real PostgreSQL or Redis (this machine's, else a throwaway one; without
  either it skips, or fails under ``COMPOSER_REQUIRE_SERVICES=1``);
- ``browser``: drives a headless chromium (``tests/browser.py``);
- ``integrations``: an agent framework or lionagi.

``MARKED`` maps a path under ``tests/`` (a folder, ending in ``/``, one file, or one test of a
file: ``file.py::test_name``, every parametrization of it) to markers; a test has the markers
of every path that holds it. The markers are registered in
``pyproject.toml`` (``--strict-markers``); ``tests/test_test_layout.py`` checks that every path
here exists. A new folder or a file that starts processes gets its line here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

__all__ = ["MARKED", "markers_of"]

# The suite compiles its own modules once, not on every run: under PYTHONDONTWRITEBYTECODE (set
# on some machines, this one included) pytest rewrites every test module again and each
# ``composer`` child process compiles the package again, about a fifth of the fast subset's
# CPU. The caches go where Python puts them (``__pycache__``, ignored by git).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

TESTS = Path(__file__).resolve().parent

MARKED: dict[str, tuple[str, ...]] = {
    # the agent frameworks and lionagi
    "integrations/": ("slow", "integrations"),
    "lionagi_support/": ("slow", "integrations"),
    # the standing hostile-input and soak suite
    "reliability/": ("slow",),
    "reliability/test_huge_writeback.py": ("services",),
    "reliability/test_secret_sentinels.py": ("services",),
    # the servers: most tests build the configured server in this process (``serve/apps.py``);
    # those that start `composer serve`, its workers or an MCP peer as processes are slow
    "serve/test_audit_readiness.py": ("services",),
    "serve/test_fleet.py": ("slow", "services"),
    "serve/test_fuzz.py::test_every_operation_answers_as_documented": ("slow",),
    "serve/test_http_server.py::test_a_killed_mcp_child_is_restarted_on_the_next_turn": ("slow",),
    "serve/test_http_server.py::test_sigterm_closes_every_provider": ("slow",),
    "serve/test_json_logs.py": ("slow",),
    "serve/test_library.py::test_a_program_runs_the_server_composer_serve_runs": ("slow",),
    "serve/test_library.py::test_importing_composer_serve_imports_no_web_framework_and_no_console": (
        "slow",
    ),
    "serve/test_mcp_provider.py": ("slow",),
    "serve/test_metrics_workers.py": ("slow", "services"),
    "serve/test_mcp_server.py": ("slow",),
    "serve/test_principals_served.py": ("services",),
    "serve/test_principals_served.py::test_a_stdio_server_is_one_principal_of_the_file": ("slow",),
    "serve/test_principals_served.py::test_the_access_log_names_the_principal_never_its_token": (
        "slow",
    ),
    "serve/test_rate_limits.py": ("services",),
    "serve/test_rate_limits.py::test_two_replicas_sharing_the_state_share_one_limit": ("slow",),
    "serve/test_rate_limits.py::test_two_workers_admit_a_principal_no_more_turns_than_one_worker": (
        "slow",
    ),
    "serve/test_reload_processes.py": ("slow",),
    "serve/test_reload_processes.py::test_each_worker_reloads_by_itself": ("services",),
    "serve/test_rolling_update.py": ("slow",),
    "serve/test_rolling_update.py::test_a_rolling_update_answers_every_turn_exactly_once": (
        "services",
    ),
    "serve/test_serving_guide.py": ("slow",),
    "serve/test_state.py": ("services",),
    "serve/test_telemetry.py": ("slow",),
    "serve/test_telemetry.py::test_each_worker_exports_from_its_own_provider_made_after_the_fork": (
        "services",
    ),
    "serve/test_tenancy.py": ("services",),
    "serve/test_turn_happens_once.py": ("services",),
    "serve/test_workers.py": ("slow", "services"),
    # the console's pages against `composer serve --console` processes (its sessions, views
    # and `composer console` run in the quick check)
    "console/test_console.py": ("slow",),
    "console/test_console_after_init.py": ("slow",),
    "console/test_console_browser.py": ("slow", "browser"),
    "console/test_console_postgres.py": ("slow", "services"),
    "console/test_console_workers.py": ("slow", "services"),
    # the stores against real servers; their many-process write races and server restarts
    "memory/": ("services",),
    "memory/test_concurrency.py": ("slow",),
    "memory/test_write_conflicts.py": ("slow",),
    "memory/test_restart.py": ("slow",),
    # the shared cache in Redis
    "caching/test_cache_isolation.py": ("services",),
    "caching/test_redis_cache.py": ("services",),
    # the audit log in PostgreSQL; its server stopped and restarted under it
    "observe/test_audit_any_line.py": ("services",),
    "observe/test_audit_postgres.py": ("slow", "services"),
    # a forked child draws turn ids of its own
    "observe/test_turn_ids.py::test_a_forked_child_draws_its_own_ids": ("slow",),
    # reloads under load, a soak
    "reload/test_reload_reliability.py": ("slow",),
    # one overlay test loads a manifest whose store is PostgreSQL
    "manifest/test_manifest_overlays.py": ("services",),
    # a wheel built and installed, with every extra, into a fresh venv by its own pip
    "test_install_extras.py": ("slow",),
    # the whole documentation site built by mkdocs (CI builds it on its own too)
    "test_docs.py::test_the_site_builds_with_strict": ("slow",),
    # each Kubernetes overlay's manifest serves a turn with its PostgreSQL and Redis
    "test_kubernetes.py::test_each_overlay_serves_a_turn_from_the_kubelet_s_layout_with_its_stores": (
        "services",
    ),
}
"""Path under ``tests/`` (a folder ends in ``/``) -> the markers of every test it holds."""


def markers_of(path: Path, test: str = "") -> list[str]:
    """The markers of the test named ``test`` (its function's name) in the file ``path``, or
    of every test of the file without ``test``, in ``MARKED``'s order, each once."""
    relative = path.resolve().relative_to(TESTS).as_posix()
    names: dict[str, None] = {}
    for place, markers in MARKED.items():
        if (
            relative == place
            or (place.endswith("/") and relative.startswith(place))
            or (test and place == f"{relative}::{test}")
        ):
            names.update(dict.fromkeys(markers))
    return list(names)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        test = getattr(item, "originalname", None) or item.name
        for name in markers_of(item.path, test):
            item.add_marker(name)
