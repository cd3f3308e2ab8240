"""One outcome vocabulary: ``preview --json``, the ``composer test`` file, the HTTP API, the
audit log and the preview table all use the registry's names (``composer.outcomes.Outcome``)."""

from __future__ import annotations

import json
from typing import get_args

from composer.inspect.expectations import OLD_SPELLINGS, ProviderExpectation
from composer.inspect.preview import DocumentRow, PreviewDocument
from composer.inspect.words import OUTCOME_TEXT
from composer.observe.record import AuditProvider
from composer.outcomes import Outcome
from composer.serve.models import OutcomeOut

NAMES = set(get_args(Outcome))


def enum_of(schema: dict[str, object]) -> set[str]:
    return set(json.loads(json.dumps(schema))["enum"])


def test_preview_json_version_2_names_outcomes_as_the_registry_does() -> None:
    assert PreviewDocument.model_fields["version"].default == 2
    assert enum_of(DocumentRow.model_json_schema()["properties"]["outcome"]) == NAMES
    assert "when" not in DocumentRow.model_fields  # guarded says it


def test_the_audit_log_and_the_http_api_name_the_same_outcomes() -> None:
    assert enum_of(AuditProvider.model_json_schema()["properties"]["outcome"]) == NAMES
    served = enum_of(OutcomeOut.model_json_schema()["properties"]["outcome"])
    assert served == NAMES - {"disabled"}  # a disabled provider is never in a served report


def test_a_test_file_takes_the_registry_names_and_the_old_ones_deprecated() -> None:
    field = ProviderExpectation.model_json_schema()["properties"]["outcome"]
    current, old, _null = field["anyOf"]
    assert set(current["enum"]) == NAMES
    assert (set(old["enum"]), old["deprecated"]) == (set(OLD_SPELLINGS), True)
    assert set(OLD_SPELLINGS.values()) <= NAMES


def test_the_preview_table_words_every_outcome() -> None:
    assert set(OUTCOME_TEXT) == NAMES
