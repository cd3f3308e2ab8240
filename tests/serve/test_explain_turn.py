"""A turn asked to explain itself: the response lists each ranking provider's candidates and
why each left out was; a turn that does not ask answers as before (in process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from composer.serve import ServerConfig
from composer.serve.models import TurnResponse
from serve.apps import served
from serve.conftest import CONFIGS

TURN: dict[str, Any] = {
    "branch": {"id": "explain-1", "name": "payments"},
    "system": "You are the on-call assistant.\n",
    "instruction": {"text": "The API returns 502 errors after the deploy, what do I do?"},
}


@pytest.fixture(scope="module")
def app() -> Iterator[TestClient]:
    with served(CONFIGS, ServerConfig(env="dev", rate_limit=0)) as client:
        yield client


def test_an_explained_turn_lists_every_candidate_and_its_fate(app: TestClient) -> None:
    answer = app.post("/v1/turns", json={**TURN, "explain": True})
    assert answer.status_code == 200, answer.text
    response = TurnResponse.model_validate(answer.json())
    assert response.explanations is not None
    by_name = {e.provider: e for e in response.explanations}
    assert by_name["house-rules"].candidates is None  # a static text ranks nothing
    runbooks = by_name["runbooks"].candidates
    assert runbooks is not None
    fates = [c.fate for c in runbooks]
    assert fates.count("admitted") == 2  # top_k 2
    assert "beyond_top_k" in fates  # the near misses show
    assert all(c.id.startswith("runbooks/") and "#" in c.id for c in runbooks)
    assert all(c.tokens and c.tokens > 0 for c in runbooks)
    assert by_name["team-memory"].candidates


def test_a_turn_that_does_not_ask_has_no_explanations(app: TestClient) -> None:
    plain = app.post("/v1/turns", json=TURN).json()
    explained = app.post("/v1/turns", json={**TURN, "explain": True}).json()
    assert plain["explanations"] is None
    assert plain["guidance"] == explained["guidance"]  # explaining changes no block


@pytest.mark.parametrize("value", ["yes please", "true", 0, 1, None])
def test_explain_must_be_a_boolean(app: TestClient, value: object) -> None:
    # The schema says boolean: no coercion of 0/1 or "true" (a schema-violating body is refused)
    refused = app.post("/v1/turns", json={**TURN, "explain": value})
    assert refused.status_code == 422, refused.text
