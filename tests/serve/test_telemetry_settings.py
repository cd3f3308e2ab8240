"""What the ``OTEL_*`` variables ask of ``composer serve`` (``composer.serve.telemetry``),
read without configuring anything: nothing when none is set, the protocol and the endpoint
(shown without its password or query), a start that fails for what composer cannot honour,
and the exporter's secrets masked however they are spelled in a log line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from composer import load_manifest
from composer.errors import ServeError
from composer.serve import ServerConfig, create_app
from composer.serve.telemetry import Exporting, exporting, masking

MANIFEST = "version: 1\nproviders:\n  - {name: rules, type: static, text: x}\n"


@pytest.fixture
def no_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``OTEL_*`` variable of the machine's own in this test."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def test_without_otel_variables_nothing_is_traced_or_exported(no_otel: None) -> None:
    assert exporting({}) is None
    assert exporting({"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}) is None
    assert (
        exporting({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"})
        is None
    )
    disabled = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert exporting(disabled) is None


def test_what_the_variables_ask_for() -> None:
    asked = exporting({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:pw@c.example:4318/x?k=v"})
    assert asked is not None
    assert (asked.protocol, asked.endpoint) == ("http/protobuf", "https://c.example:4318/x")
    grpc = exporting({"OTEL_TRACES_EXPORTER": "otlp_proto_grpc"})
    assert grpc is not None
    assert (grpc.protocol, grpc.endpoint) == ("grpc", "http://localhost:4317")
    traces = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
    }
    assert exporting(traces) == Exporting("grpc", "collector:4317")


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin: composer serve"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "exports to one of"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: composer serve exports over http/protobuf",
        ),
    ],
)
def test_what_cannot_be_honoured_fails_the_start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_otel: None,
    variables: dict[str, str],
    said: str,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "m.yaml").write_text(MANIFEST)
    manifest = load_manifest(tmp_path / "m.yaml")
    with pytest.raises(ServeError, match=said.replace("/", ".")):
        create_app(manifest, ServerConfig())


def test_the_exporter_s_secrets_are_masked_however_written() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok-1234abcd,x-team=ops",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-api-key=k-9876zyxw",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:p%40ss-word-1@collector:4318",
    }
    mask = masking(lambda text: text.replace("manifest-secret", "***"), env)
    said = (
        "sent Bearer tok-1234abcd and Bearer%20tok-1234abcd, k-9876zyxw, p@ss-word-1, "
        "p%40ss-word-1 and manifest-secret"
    )
    assert mask(said) == "sent *** and ***, ***, ***, *** and ***"
    assert masking(str, {})("nothing to mask") == "nothing to mask"
