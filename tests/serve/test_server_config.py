"""``ServerConfig``: every option of ``composer serve``, its bounds and the rules between
options checked in one place, saying the same thing from Python as from the command line; and
what ``create_app`` refuses before it serves anything (files missing or empty, a state store
that cannot be used, a token-less server off loopback, a shared store any client could split).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from memory.services import redis_prefix_of

from composer import load_manifest
from composer.cli.exit_codes import USAGE
from composer.cli.main import build_parser, main
from composer.errors import ManifestError, ServeError
from composer.serve import ServerConfig, create_app
from composer.serve.workers import MAX_WORKERS
from serve.apps import variables
from serve.conftest import CONFIGS
from serve.stores import redis_url

__all__ = ["redis_url"]  # the store's fixture

RULES: list[tuple[list[str], dict[str, Any], str]] = [
    (
        ["--max-branches", "0"],
        {"max_branches": 0},
        "--max-branches, --max-body-bytes, --request-timeout and the connection limits must "
        "be positive, --rate-limit at least 0",
    ),
    (["--max-body-bytes", "0"], {"max_body_bytes": 0}, "must be positive"),
    (["--request-timeout", "0"], {"request_timeout": 0.0}, "must be positive"),
    (["--max-connections", "0"], {"max_connections": 0}, "must be positive"),
    (["--max-connections-per-client", "-1"], {"max_connections_per_client": -1}, "positive"),
    (["--rate-limit", "-1"], {"rate_limit": -1.0}, "--rate-limit at least 0"),
    (["--branch-ttl", "0"], {"branch_ttl": 0.0}, "--branch-ttl must be positive"),
    (["--port", "70000"], {"port": 70000}, "--port must be between 0 and 65535"),
    (["--port", "-1"], {"port": -1}, "--port must be between 0 and 65535"),
    (["--host", " "], {"host": " "}, "--host must name an address"),
    (
        ["--principals", "p.yaml", "--token-file", "t"],
        {"principals": Path("p.yaml"), "token_file": Path("t")},
        "give --principals or --token-file, not both",
    ),
    (["--console-preview"], {"console_preview": True}, "--console-preview goes with --console"),
    (
        ["--principal", "ops", "--principals", "p.yaml"],
        {"principal": "ops", "principals": Path("p.yaml")},
        "--principal goes with --mcp-stdio and --principals",
    ),
    (
        ["--principal", "ops", "--mcp-stdio"],
        {"principal": "ops", "mcp_stdio": True},
        "--principal goes with --mcp-stdio and --principals",
    ),
    (["--workers", "0"], {"workers": 0}, f"--workers must be between 1 and {MAX_WORKERS}"),
    (["--workers", "65"], {"workers": 65}, f"--workers must be between 1 and {MAX_WORKERS}"),
    (["--workers", "2"], {"workers": 2}, "--workers above 1 needs --state postgresql://"),
    (
        ["--workers", "2", "--state", "redis://127.0.0.1", "--mcp-stdio"],
        {"workers": 2, "state": "redis://127.0.0.1", "mcp_stdio": True},
        "--workers goes with HTTP, not --mcp-stdio",
    ),
    (["--drain-delay", "-1"], {"drain_delay": -1.0}, "--drain-delay must be between 0 and 60"),
    (["--drain-delay", "61"], {"drain_delay": 61.0}, "--drain-delay must be between 0 and 60"),
    (["--drain-delay", "inf"], {"drain_delay": math.inf}, "--drain-delay must be between"),
    (
        ["--watch", "--mcp-stdio"],
        {"watch": True, "mcp_stdio": True},
        "--watch goes with HTTP, not --mcp-stdio",
    ),
]


@pytest.mark.parametrize(("argv", "given", "message"), RULES)
def test_each_rule_is_one_serve_error_the_command_line_prints_too(
    argv: list[str], given: dict[str, Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ServeError) as refused:
        ServerConfig(**given)
    assert message in str(refused.value)
    assert main(["serve", str(CONFIGS), "--env", "dev", *argv]) == USAGE
    assert capsys.readouterr().err == f"composer serve: {refused.value}\n"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"port": "8080"}, "--port must be a number"),
        ({"port": True}, "--port must be a number"),
        ({"port": 80.5}, "--port must be a whole number"),
        ({"workers": None}, "--workers must be given"),
        ({"rate_limit": math.nan}, "--rate-limit must be a number"),
        ({"rate_limit": "fast"}, "--rate-limit must be a number"),
        ({"console": 1}, "--console is a flag: True or False"),
        ({"host": b"127.0.0.1"}, "--host must be text"),
        ({"state": 5432}, "--state must be text"),
        ({"principals": 7}, "--principals must be a path"),
        ({"log_format": 1}, "--log-format must be text"),
        ({"log_format": "xml"}, "--log-format must be one of text, json"),
        ({"drain_delay": math.nan}, "--drain-delay must be a number"),
        ({"watch": "yes"}, "--watch is a flag: True or False"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_the_option(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ServeError, match=f"^{message}$"):
        ServerConfig(**given)


def test_an_unknown_option_is_refused_by_its_name() -> None:
    with pytest.raises(TypeError, match="prot"):
        ServerConfig(prot=80)  # type: ignore[call-arg]


def test_a_path_may_be_given_as_text_and_the_rules_hold_after_a_change() -> None:
    config = ServerConfig(principals="teams/principals.yaml")  # type: ignore[arg-type]
    assert config.principals == Path("teams/principals.yaml")
    assert dataclasses.replace(config, console=True).console
    with pytest.raises(ServeError, match="--console-preview goes with --console"):
        dataclasses.replace(config, console_preview=True)


def test_every_option_of_the_command_is_a_field_with_the_same_default() -> None:
    """The command fills the config field by field: an option the config lacks, or a default
    that differs, would serve another server than the library's."""
    args = build_parser().parse_args(["serve"])
    options = set(vars(args)) - {"manifest", "no_interpolate", "run", "whole_parser"}  # its own
    fields = {field.name for field in dataclasses.fields(ServerConfig)}
    assert options == fields
    assert ServerConfig(**{name: getattr(args, name) for name in fields}) == ServerConfig()


def manifest_file(folder: Path, **entry: Any) -> Path:
    path = folder / "m.yaml"
    providers = [{"name": "rules", "type": "static", "text": "Answer in English.", **entry}]
    path.write_text(yaml.safe_dump({"version": 1, "providers": providers}))
    return path


def refusal(manifest: Path, config: ServerConfig, **env: str) -> str:
    """What ``create_app`` raises for ``config`` (a ``ComposerError``), as text."""
    with variables(env), pytest.raises((ServeError, ManifestError)) as refused:
        create_app(load_manifest(manifest), config)
    return str(refused.value)


def test_files_that_are_missing_or_empty_are_refused_by_name(tmp_path: Path) -> None:
    manifest = manifest_file(tmp_path)
    gone = tmp_path / "gone"
    assert f"{gone}.yaml:1:1: cannot read" in refusal(
        manifest, ServerConfig(principals=Path(f"{gone}.yaml"))
    )
    assert f"token file '{gone}' does not exist" in refusal(manifest, ServerConfig(token_file=gone))
    empty = tmp_path / "token"
    empty.write_text("\n")
    assert refusal(manifest, ServerConfig(token_file=empty)).endswith("is empty")
    assert refusal(manifest, ServerConfig(token_var="SERVE_TOKEN"), SERVE_TOKEN=" ") == (
        "$SERVE_TOKEN is empty"
    )


def test_a_state_store_it_cannot_use_is_refused_without_its_password(tmp_path: Path) -> None:
    manifest = manifest_file(tmp_path)
    unset = refusal(manifest, ServerConfig(state="${NO_SUCH_STATE_URL}"))
    assert unset == "--state ${NO_SUCH_STATE_URL}: the variable is not set"
    scheme = refusal(manifest, ServerConfig(state="mysql://me:Sekr1t@127.0.0.1/db"))
    assert "give a postgresql:// or redis:// URL" in scheme
    schema = refusal(manifest, ServerConfig(state="redis://127.0.0.1:1", state_schema="Bad-Name"))
    assert "--state-schema 'Bad-Name'" in schema
    down = refusal(manifest, ServerConfig(state="redis://:Sekr1t@127.0.0.1:1/0"))
    assert "the store did not answer" in down
    assert "Sekr1t" not in scheme + down


def test_a_token_less_app_is_for_loopback_only(tmp_path: Path) -> None:
    message = refusal(manifest_file(tmp_path), ServerConfig(host="0.0.0.0"))
    assert message.startswith("refusing to listen on 0.0.0.0 without a token")
    with variables({"COMPOSER_SERVE_TOKEN": "a-token"}):
        assert create_app(load_manifest(manifest_file(tmp_path)), ServerConfig(host="0.0.0.0"))


def test_a_shared_store_any_client_could_split_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nproviders:\n  - name: notes\n    type: memory\n"
        "    source: {sqlite: notes.sqlite, shared: true}\n"
        '    namespace: "{{ branch.metadata.team }}"\n'
    )
    message = refusal(manifest, ServerConfig())
    assert "'notes'" in message
    assert "--principals" in message


def test_listening_options_are_run_s_own(tmp_path: Path) -> None:
    manifest = manifest_file(tmp_path)
    assert "use composer.serve.run" in refusal(manifest, ServerConfig(mcp_stdio=True))
    workers = ServerConfig(workers=2, state="redis://127.0.0.1:6379/0")
    assert "use composer.serve.run" in refusal(manifest, workers)


async def test_an_app_made_inside_a_running_loop_asks_its_state_store(
    tmp_path: Path, redis_url: str
) -> None:
    """A program may make its app in ``async def`` (an app factory): the store is asked on a
    loop of its own all the same (``asyncio.run`` cannot run on this one)."""
    manifest = manifest_file(tmp_path)
    with redis_prefix_of(redis_url) as word:
        config = ServerConfig(state=redis_url, state_schema=word)
        assert create_app(load_manifest(manifest), config)
    assert "the store did not answer" in refusal(
        manifest, ServerConfig(state="redis://127.0.0.1:1/0")
    )
