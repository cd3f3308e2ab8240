"""The ``composer`` command: the parser, ``main``, and the table of commands.

Each command is a module of ``composer.cli.commands`` (``DESCRIPTION``, ``add_arguments``,
``run``), named in ``COMMANDS`` with its one-line summary, so ``composer --help`` imports no
command module and ``composer COMMAND`` imports only its own. ``main(argv)`` returns the exit
code instead of exiting, so tests call it. Diagnostics go to stderr as ``file:line:col:
message`` (compilers' format, so editors and CI annotate them); every line that could hold a
value from a ``${VAR}`` goes through ``Manifest.redact``, and everything printed through
``Output``, which escapes control characters.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

from composer import __version__
from composer.cli.exit_codes import FAILURE, INTERRUPTED, TERMINATED, USAGE
from composer.cli.options import CommandParser, show_defaults
from composer.cli.output import Output, detach_stdout, escape_what_cannot_be_encoded, say
from composer.cli.terminate import Terminated

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    """Where a command lives and how ``composer --help`` sums it up."""

    module: str
    summary: str
    aliases: tuple[str, ...] = ()
    whole_parser: bool = False
    """Whether its ``run`` is handed ``args.whole_parser``, building every command's parser."""


COMMANDS: dict[str, Command] = {
    "init": Command(
        "composer.cli.commands.init",
        "write a team's first manifests, corpus, memory seed and tests into a folder",
    ),
    "validate": Command(
        "composer.cli.commands.validate", "check a manifest; every error located as file:line:col"
    ),
    "preview": Command(
        "composer.cli.commands.preview", "run one real turn and show what the model would see"
    ),
    "render": Command(
        "composer.cli.commands.render",
        "print the effective manifest as YAML, each value with the file:line that set it",
        aliases=("explain",),
    ),
    "diff": Command(
        "composer.cli.commands.diff",
        "what differs between two environments, folders or revisions, provider by provider",
    ),
    "test": Command(
        "composer.cli.commands.test",
        "run the expected turns of a test file; exit 1 when one does not hold",
    ),
    "eval": Command(
        "composer.cli.commands.eval",
        "measure the context given to the team's labelled questions; compare, gate CI",
    ),
    "schema": Command(
        "composer.cli.commands.schema",
        "print the JSON Schema of a manifest (for editor completion)",
    ),
    "memory": Command(
        "composer.cli.commands.memory",
        "import, export and count memory items (JSONL, SQLite, PostgreSQL)",
    ),
    "serve": Command(
        "composer.cli.commands.serve",
        "serve composed context over HTTP (and MCP), or MCP over stdio",
    ),
    "audit": Command(
        "composer.cli.commands.audit",
        "list the turns of an audit log, show one, or what changed between two",
    ),
    "console": Command(
        "composer.cli.commands.console",
        "read an audit log in a browser: turns, providers, what the model saw (127.0.0.1)",
    ),
    "completion": Command(
        "composer.cli.commands.completion",
        "print a tab-completion script for bash, zsh or fish",
        whole_parser=True,
    ),
}
"""The commands, in ``--help`` order; a new one is a module of ``composer.cli.commands``
named here."""

_EPILOG = """\
examples:
  composer validate configs --all-envs --no-interpolate   (CI: no secret needed)
  composer preview configs --env dev --instruction "the API returns 502s"
  composer render configs --env prod
  composer diff configs --env staging --env prod
  composer diff configs --rev main..HEAD --env prod --exit-code
  composer test configs/tests.yaml --junit results.xml
  composer serve configs --env prod              (HTTP; --mcp-stdio for an MCP client)

aliases:
  explain                           render

environment:
  COMPOSER_MANIFEST, COMPOSER_ENV   default MANIFEST and --env
  COMPOSER_ENV_FILE, COMPOSER_SECRETS_DIR   where ${VAR} is also looked up
  COMPOSER_EXTENDS_ROOTS            folders extends may also reach (beyond the manifest's)
  NO_COLOR                          plain output even on a terminal

'composer COMMAND --help' describes each command.
"""


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``commands`` of those only: the others are
    listed with their summary but their modules are not imported (nor can they be run)."""
    parser = argparse.ArgumentParser(
        prog="composer",
        description="Declare in YAML where an LLM agent's pre-turn context comes from.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"composer {__version__}")
    parser.set_defaults(no_interpolate=False)
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True, parser_class=CommandParser)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, aliases=command.aliases, help=command.summary)
        if commands is None or name in commands:
            module = importlib.import_module(command.module)
            sub.description = module.DESCRIPTION
            module.add_arguments(sub)
            show_defaults(sub)
            sub.set_defaults(run=module.run)
            if command.whole_parser:
                sub.set_defaults(whole_parser=build_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's 2 for usage errors).

    Whatever the terminal or the pipes do, a person sees at most one line on stderr, never a
    traceback: a reader that left (silence), a closed or full stdout (one line, exit 1),
    Ctrl-C (providers closed, one line, exit 130), SIGTERM during preview or test (the same,
    exit 143); characters the output's encoding cannot
    show, and bytes of arguments and file names that are not UTF-8, are written escaped.
    """
    escape_what_cannot_be_encoded()
    if sys.stdout is None:  # started with stdout closed (`composer ... >&-`)
        say("standard output is closed")
        return FAILURE
    try:
        return _run(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:  # the reader left early (`composer preview ... | head`)
        detach_stdout()
        return FAILURE
    except Terminated:  # SIGTERM during preview or test, once the providers were closed
        say("terminated")
        return TERMINATED
    except KeyboardInterrupt:
        say("interrupted")
        return INTERRUPTED
    except OSError as e:  # stdout is full or gone (`> /dev/full`)
        detach_stdout()
        say(f"cannot write the output: {e.strerror or type(e).__name__}")
        return FAILURE


def _run(argv: list[str]) -> int:
    parser = build_parser(_named(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        sys.stdout.flush()
        return e.code if isinstance(e.code, int) else 0 if e.code is None else USAGE
    run: Callable[[argparse.Namespace, Output], int] = args.run
    code = run(args, Output())
    sys.stdout.flush()  # here, so that a reader that left is met inside main's ``try``
    return code


def _named(argv: list[str]) -> set[str]:
    """The command ``argv`` runs (its first word that is not an option: composer's own
    options take no value), by its main name; none for ``--help`` or a misspelt one."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, command in COMMANDS.items():
        if word == name or word in command.aliases:
            return {name}
    return set()
