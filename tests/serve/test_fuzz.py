"""A property-based fuzz of the HTTP API from its committed OpenAPI document (schemathesis):
whatever a client sends, ``composer serve`` answers as documented and never with a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from serve.conftest import CONFIGS, ROOT, Server, start_serve

pytest.importorskip("schemathesis", reason="schemathesis (dev extra) is absent")
import schemathesis  # after the skip: the dev extra brings it

TOKEN = "fuzz-token"
schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.json")


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[Server]:
    server = start_serve(
        [str(CONFIGS), "--env", "dev", "--rate-limit", "0"], env={"COMPOSER_SERVE_TOKEN": TOKEN}
    )
    yield server
    assert server.stop() == 0


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_documented(
    case: schemathesis.Case[Any], fuzz_server: Server
) -> None:
    case.call_and_validate(
        base_url=fuzz_server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    )
