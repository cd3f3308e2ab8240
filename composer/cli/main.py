"""The ``composer`` command: validate, preview, explain, diff and schema.

Each subcommand is a pair of functions: ``add_<name>(subparsers)`` declares its arguments and
sets ``run=<function>``, and the run function takes the parsed arguments and an ``Output`` and
returns the exit code. ``main(argv)`` returns that code instead of exiting, so tests call it.
Diagnostics go to stderr as ``file:line:col: message`` (compilers' format, so editors and CI
annotate them); colour and tables only on a terminal and never with ``NO_COLOR`` set. Every
line that could hold a value from a ``${VAR}`` goes through ``Manifest.redact``, and everything
printed goes through ``Output``, which escapes control characters (``printable``): names come
from files other people write, and must not drive the operator's terminal or forge log lines.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from composer import __version__
from composer.cli.audit import add_audit
from composer.cli.memory import add_memory
from composer.cli.serve import add_serve
from composer.cli.terminate import Terminated

if TYPE_CHECKING:  # each command imports what it runs, so --help and --version stay light
    from composer.cli.preview import Preview, ProviderRow
    from composer.manifest import Manifest

__all__ = [
    "COMMANDS",
    "Output",
    "build_parser",
    "main",
]


def printable(text: str, *, keep: str = "", json: bool = False) -> str:
    """``composer.manifest.yamlnodes.printable``, imported when first needed."""
    from composer.manifest.yamlnodes import printable as escape

    return escape(text, keep=keep, json=json)


class Output:
    """Where a command writes: results to ``out``, diagnostics to ``err``; rich colour on a TTY.

    ``print``, ``error`` and ``warning`` write one line each: a newline or any other control
    character in ``text`` is escaped, so a name cannot start a line of its own. ``block`` keeps
    the newlines and tabs of a multi-line text, ``json`` writes a JSON document.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self._colour = _wants_colour(self.err)

    def print(self, text: str) -> None:
        print(printable(text), file=self.out)

    def block(self, text: str) -> None:
        """Several lines as they are, but for control characters other than newline and tab."""
        print(printable(text, keep="\n\t"), file=self.out)

    def json(self, text: str) -> None:
        """A JSON document; characters its encoder leaves raw (DEL, C1, bidi) as ``\\u`` escapes."""
        print(printable(text, keep="\n", json=True), file=self.out)

    @property
    def utf8(self) -> bool:
        """Whether results are written as UTF-8 (else JSON is kept to ASCII with escapes)."""
        encoding = getattr(self.out, "encoding", None) or "utf-8"
        return encoding.lower().replace("-", "").replace("_", "") == "utf8"

    @property
    def colour(self) -> bool:
        """Whether results may use colour and box tables (stdout is a terminal, no NO_COLOR)."""
        return _wants_colour(self.out)

    @property
    def interactive(self) -> bool:
        """Whether progress may be drawn on stderr."""
        return self._colour

    def error(self, text: str) -> None:
        self._diagnostic(text, "red")

    def warning(self, text: str) -> None:
        self._diagnostic(text, "yellow")

    def _diagnostic(self, text: str, style: str) -> None:
        text = printable(text)
        if self._colour:
            try:
                from rich.console import Console  # only paid for on a terminal
                from rich.text import Text
            except ImportError:
                pass
            else:
                console = Console(file=self.err, highlight=False, soft_wrap=True, emoji=False)
                console.print(Text(text, style=style))
                return
        print(text, file=self.err)


def _wants_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# --------------------------------------------------------------------------- shared


def _load(
    args: argparse.Namespace,
    output: Output,
    env: str | None = None,
    *,
    path: str | None = None,
    shown: Callable[[str], str] | None = None,
) -> Manifest | None:
    """The manifest named on the command line (or ``path``), or None after printing its
    located errors, each passed through ``shown`` when given.

    ``--no-interpolate``, where the command has it, loads without reading any variable.
    """
    from composer.errors import ManifestError, SettingsError
    from composer.manifest.loader import load_manifest

    try:
        return load_manifest(
            args.manifest if path is None else path,
            env=env if env is not None else args.env,
            interpolate=not args.no_interpolate,
        )
    except ManifestError as e:
        for error in e.errors:
            line = f"{error.location}: {error.message}"
            output.error(shown(line) if shown else line)
        return None
    except SettingsError as e:
        output.error(f"composer: {shown(str(e)) if shown else e}")
        return None


_MANIFEST_HELP = "a manifest file, or a folder of <env>.yaml files (default: $COMPOSER_MANIFEST)"


class _Once(argparse.Action):
    """An option that may be given once: a second ``--env`` is a usage error, not a silent
    override (``validate . --env dev --env prod`` would check prod alone)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice; give it once (or see --all-envs)")
        setattr(namespace, self.dest, values)


def _add_manifest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", metavar="MANIFEST", nargs="?", help=_MANIFEST_HELP)
    parser.add_argument(
        "--env",
        action=_Once,
        help="environment: picks <MANIFEST>/<ENV>.yaml (default: $COMPOSER_ENV)",
    )


_NO_INTERPOLATE_HELP = (
    "read no variable: check each ${VAR} is well formed, use defaults, and list the variables "
    "the environment needs (for CI without secrets)"
)


# --------------------------------------------------------------------------- preview

_OUTCOME_TEXT = {
    "fired": "fired",
    "cached": "fired: from its cache",
    "timeout": "failed: timed out",
    "skipped_max_tokens": "skipped: over its max_tokens",
    "skipped_budget": "skipped: over the budget",
    "failed": "failed",
    "empty": "empty: returned nothing",
    "when_false": "empty: its `when` is false",
    "not_called": "not called: branch has no system text",
    "disabled": "disabled",
}
_OUTCOME_STYLE = {"fired": "green", "cached": "green", "failed": "red", "timeout": "red"}
_OUTCOME_STYLE.update(skipped_max_tokens="yellow", skipped_budget="yellow")


def add_preview(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "preview",
        help="run one real turn and show what the model would see",
        description=(
            "Load MANIFEST, build its registry and run one real gather for INSTRUCTION, as the "
            "runtime would before a model turn. Prints one row per declared provider (outcome, "
            "tokens, milliseconds), the budget used, and the exact folded text the model would "
            "see: system text + injected blocks + guidance. Provider failures are contained "
            "(exit 0) unless --strict. The http provider makes real requests."
        ),
    )
    _add_manifest_arguments(parser)
    parser.add_argument("--instruction", required=True, help="the user turn to preview")
    system = parser.add_mutually_exclusive_group()
    system.add_argument(
        "--system",
        help="the branch's system text (default: a stand-in, so that providers are called)",
    )
    system.add_argument(
        "--no-system",
        action="store_true",
        help="preview a branch without system text (ADR-0008: no provider is called)",
    )
    parser.add_argument("--branch-name", help="the branch name templates see as branch.name")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any provider failed")
    parser.add_argument(
        "--watch",
        action="store_true",
        help="preview again on every change of the manifest, the files it extends, .env or "
        "the secrets folder; a broken edit shows its errors instead (Ctrl-C stops)",
    )
    parser.set_defaults(run=run_preview_command)


def run_preview_command(args: argparse.Namespace, output: Output) -> int:
    if getattr(args, "watch", False):
        from composer.cli.watch import watch_preview

        return watch_preview(args, output, run_preview_command)
    from composer.cli.preview import DEFAULT_SYSTEM, PreviewDocument, run_preview
    from composer.cli.terminate import run
    from composer.errors import ComposerError

    manifest = _load(args, output)
    if manifest is None:
        return 1
    system = None if args.no_system else args.system if args.system is not None else DEFAULT_SYSTEM
    shown = str(manifest.path or args.manifest)
    try:
        with _log_records_to(output, manifest.redact):
            preview = run(
                run_preview(
                    manifest,
                    args.instruction,
                    system=system,
                    branch_name=args.branch_name,
                    progress=_progress_factory(output),
                )
            )
    except ComposerError as e:
        output.error(manifest.redact(f"composer: {e}"))
        return 1
    preview.default_system = system == DEFAULT_SYSTEM and args.system is None
    if args.json:
        document = PreviewDocument.of(preview, manifest=shown, env=args.env, redact=manifest.redact)
        # through json, not pydantic: a lone surrogate (bytes that are not UTF-8 in a file name
        # or an argument) becomes a \udcXX escape instead of a serialisation error
        data = document.model_dump(mode="json")
        output.json(json.dumps(data, indent=2, ensure_ascii=not output.utf8))
    else:
        _print_preview(preview, shown, args.env, manifest, output)
    return 1 if args.strict and preview.report.failed else 0


class _MaskRecords(logging.Filter):
    """Masks a log record in place before it is formatted: composer's, and those of the
    libraries providers use (psycopg and psycopg_pool quote a DSN's password or user, httpx
    a URL, mcp a server's message), which reach the root handler as they are.

    The message is formatted once and masked and its arguments dropped; the exception's text
    and the stack are masked too, so no formatter, and no handler running after this one,
    can show a secret (``logging``'s own error report included).
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: the format alone
            message = str(record.msg)
        record.msg = self.redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


class _OneLineHandler(logging.Handler):
    """Log records as one masked line each on stderr, the exception's first line appended.

    Without a handler Python's last-resort one prints full tracebacks, unmasked; the table
    already names each failure, so one line per record is enough here.
    """

    def __init__(self, output: Output, redact: Callable[[str], str]) -> None:
        super().__init__(logging.WARNING)
        self.output = output
        self.redact = redact
        self.addFilter(_MaskRecords(redact))
        # Imported now, not while emitting: a server out of file descriptors logs that it
        # is, and an import then would need one (and fail, with a traceback).
        from composer.cli.preview import first_line

        self._first_line = first_line

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "composer.registry":
            return  # a provider that raised or timed out: its row already says so, once
        first_line = self._first_line
        try:
            message = record.getMessage().rstrip()  # libpq ends its messages with a newline
            text = f"composer: {record.levelname.lower()}: {message}"
            error = record.exc_info[1] if record.exc_info else None
            if error is not None:
                text = f"{text}: {first_line(error)}"
            self.output.warning(self.redact(text))
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """A line that could not be written (stderr closed, no descriptor left) is lost;
        never logging's own ``--- Logging error ---`` traceback, which leaks the record."""
        with contextlib.suppress(OSError):
            os.write(2, b"composer: a log line could not be written\n")


@contextlib.contextmanager
def _log_records_to(output: Output, redact: Callable[[str], str]) -> Iterator[None]:
    """Route warnings logged while a command runs (a provider that raised, a library's
    connection error) through ``redact``, every logger's records alike."""
    handler = _OneLineHandler(output, redact)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


_LARGE_CORPUS_FILES = 1000
"""A corpus this large gets one summary line in a log when its index is built."""


def _progress_factory(output: Output) -> Callable[[str], Callable[[int, int], None] | None]:
    """Progress for index builds: a live bar on a terminal, one summary line otherwise."""

    def make(name: str) -> Callable[[int, int], None] | None:
        if output.interactive:
            return _TerminalProgress(name, output.err)

        def report(done: int, total: int) -> None:
            # by size, not by time: what a log shows must not depend on the machine's load
            if done == total and total >= _LARGE_CORPUS_FILES:
                print(printable(f"composer: indexed {name}: {total} files"), file=output.err)

        return report

    return make


class _TerminalProgress:
    """A one-line ``indexing NAME: done/total`` counter, redrawn in place on stderr."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = printable(name)
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if time.perf_counter() - self.started < 0.3 and done < total:
            return  # only shown when indexing takes more than a moment
        end = "\n" if done >= total else ""
        self.stream.write(f"\rindexing {self.name}: {done}/{total} files{end}")
        self.stream.flush()


def _row_cells(row: ProviderRow) -> list[str]:
    outcome = _OUTCOME_TEXT["when_false" if row.when is False else row.outcome]
    if row.error:
        outcome = f"{outcome}: {row.error}"
    return [
        row.name,
        row.type,
        str(row.priority),
        "-" if row.max_tokens is None else str(row.max_tokens),
        outcome,
        "-" if row.tokens is None else str(row.tokens),
        "-" if row.ms is None else f"{row.ms:.1f}",
    ]


_HEADERS = ["provider", "type", "priority", "max_tokens", "outcome", "tokens", "ms"]
_RIGHT = {2, 3, 5, 6}


def _print_preview(
    preview: Preview, shown: str, env: str | None, manifest: Manifest, output: Output
) -> None:
    redact = manifest.redact
    rows = [[printable(redact(cell)) for cell in _row_cells(row)] for row in preview.rows]
    output.print(f"manifest: {shown}" + (f" (env {env})" if env else ""))
    output.print(f"instruction: {_quoted(redact(preview.instruction))}")
    if preview.system is None:
        output.print("system: none (--no-system): no provider is called (ADR-0008 D4)")
    elif preview.default_system:
        output.print(
            f"system: a stand-in {_quoted(preview.system)}, so that providers are called "
            "(give --system for the real one)"
        )
    output.print("")
    if output.colour:
        _print_rich_table(rows, [row.outcome for row in preview.rows], output)
    else:
        notes = _note_long_outcomes(rows)
        widths = [max(len(r[i]) for r in [_HEADERS, *rows]) for i in range(len(_HEADERS))]
        for cells in [_HEADERS, *rows]:
            padded = [
                cell.rjust(widths[i]) if i in _RIGHT else cell.ljust(widths[i])
                for i, cell in enumerate(cells)
            ]
            output.print("  ".join(padded).rstrip())
        if notes:
            output.print("")
            for note in notes:
                output.print(note)
    output.print("")
    output.print(f"budget: {preview.used} of {preview.budget} tokens used")
    output.print("")
    output.print("----- model-visible guidance: system + injected blocks + guidance -----")
    output.block(redact(preview.guidance or ""))
    output.print("----- end -----")


_OUTCOME_WIDTH = 60
"""Widest outcome cell of the plain table; a longer one (an error) becomes a numbered note,
so that a piped table stays as narrow as its names."""


def _note_long_outcomes(rows: list[list[str]]) -> list[str]:
    """Replace each outcome cell wider than ``_OUTCOME_WIDTH`` by ``label [n]``; the notes."""
    notes: list[str] = []
    for cells in rows:
        outcome = cells[4]
        if len(outcome) <= _OUTCOME_WIDTH:
            continue
        label, _, detail = outcome.partition(": ")
        notes.append(f"[{len(notes) + 1}] {cells[0]}: {detail}")
        cells[4] = f"{label} [{len(notes)}]"
    return notes


def _quoted(text: str) -> str:
    """``text`` as a JSON string literal, so newlines and quotes show; masked beforehand."""
    return json.dumps(text, ensure_ascii=False)


def _print_rich_table(rows: list[list[str]], outcomes: list[str], output: Output) -> None:
    from rich.console import Console  # only paid for on a terminal
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    for i, header in enumerate(_HEADERS):
        table.add_column(header, justify="right" if i in _RIGHT else "left")
    for cells, outcome in zip(rows, outcomes, strict=True):
        # Text, not str: a name or an error such as "[/x]" is not rich markup.
        table.add_row(*(Text(cell) for cell in cells), style=_OUTCOME_STYLE.get(outcome))
    Console(file=output.out, highlight=False, emoji=False).print(table)


# --------------------------------------------------------------------------- render


def add_render(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="print the effective manifest as YAML, each value with the file:line that set it",
        description=(
            "Print the manifest as it is after extends, overlays and ${VAR}, as YAML that "
            "loads again to the same manifest: the manifest's own key names, every value "
            "followed by `# file:line:col` of the file that set it (or `# default`), values "
            "written with variables as written (${NAME}), never their value, and paths "
            "relative to MANIFEST's folder."
        ),
    )
    _add_manifest_arguments(parser)
    parser.add_argument("--no-interpolate", action="store_true", help=_NO_INTERPOLATE_HELP)
    parser.set_defaults(run=run_render)


def add_explain(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="the same as render: the effective manifest with where each value came from",
        description="The same as `composer render`: " + _RENDER_DESCRIPTION,
    )
    _add_manifest_arguments(parser)
    parser.add_argument("--no-interpolate", action="store_true", help=_NO_INTERPOLATE_HELP)
    parser.set_defaults(run=run_render)


_RENDER_DESCRIPTION = (
    "the effective manifest as YAML that loads again, each value with `# file:line:col`."
)


def run_render(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.render import render_lines

    manifest = _load(args, output)
    if manifest is None:
        return 1
    output.print(f"# effective manifest: {manifest.path or args.manifest}")
    for line in render_lines(manifest):
        output.print(line)
    return 0


# --------------------------------------------------------------------------- diff


def add_diff(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="what differs between two environments, folders or revisions, provider by provider",
        description=(
            "Compare two effective manifests and list every value that differs: `~` changed, "
            "`+` only in the second, `-` only in the first, each with the file:line:col that "
            "set it on either side; a provider only on one side is one line, a change of "
            "provider order another. Three forms: MANIFEST --env A --env B (two environments "
            "of one folder); OLD NEW [--env ENV] (one environment of two folders or files); "
            "MANIFEST --rev A..B [--env ENV] (one environment at two git revisions; --rev A "
            "compares A with the working tree). Exit 0, or with --exit-code 1 when they differ; "
            "a side that does not load exits 1 (2 with --exit-code)."
        ),
    )
    parser.add_argument("manifest", metavar="MANIFEST", nargs="?", help=_MANIFEST_HELP)
    parser.add_argument("other", metavar="NEW", nargs="?", help="the second folder or file")
    parser.add_argument(
        "--env", action="append", help="one environment, or two to compare: --env A --env B"
    )
    parser.add_argument("--rev", help="git revisions: A..B, A.. (A against HEAD), or A")
    parser.add_argument(
        "--exit-code", action="store_true", help="exit 1 when there are differences"
    )
    parser.add_argument("--no-interpolate", action="store_true", help=_NO_INTERPOLATE_HELP)
    parser.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.revisions import checkout, split_range
    from composer.errors import SettingsError

    envs: list[str] = args.env or []
    if args.other is None and args.rev is None:
        if len(envs) != 2:
            output.error("composer diff: give exactly two environments: --env A --env B")
            return 2
        first, second = (_load(args, output, env) for env in envs)
        return _print_diff(args, output, f"{envs[0]} -> {envs[1]}", first, second)
    if len(envs) > 1:
        output.error("composer diff: two folders or revisions compare one environment: --env ENV")
        return 2
    if args.other is not None and args.rev is not None:
        output.error("composer diff: give NEW or --rev, not both")
        return 2
    if args.manifest is None:
        output.error("composer diff: give MANIFEST")
        return 2
    env = envs[0] if envs else None
    try:
        old, new = split_range(args.rev) if args.rev is not None else (None, None)
        with (
            checkout(args.manifest, old) as before,
            checkout(args.other or args.manifest, new) as after,
        ):
            title = (
                f"{old} -> {new or 'working tree'}"
                if args.rev
                else f"{args.manifest} -> {args.other}"
            )
            first = _load(args, output, env, path=before.path, shown=before.shown)
            second = _load(args, output, env, path=after.path, shown=after.shown)
            shown = (before.shown, after.shown)
            return _print_diff(
                args, output, title + (f" (env {env})" if env else ""), first, second, shown
            )
    except SettingsError as e:
        output.error(f"composer diff: {e}")
        return 2 if args.exit_code else 1


def _print_diff(
    args: argparse.Namespace,
    output: Output,
    title: str,
    first: Manifest | None,
    second: Manifest | None,
    shown: Sequence[Callable[[str], str]] = (),
) -> int:
    """Print the differences; the exit code (``--exit-code``: 1 when any, 2 when a side failed)."""
    from composer.cli.explain import diff_manifests

    if first is None or second is None:
        return 2 if args.exit_code else 1
    changes = diff_manifests(first, second)
    noun = "difference" if len(changes) == 1 else "differences"
    output.print(f"# {title}: {len(changes)} {noun}")
    for change in changes:
        line = change.describe()
        for relabel in shown:  # a revision's export shown as REV:folder/
            line = relabel(line)
        output.print(line)
    return 1 if args.exit_code and changes else 0


# --------------------------------------------------------------------------- validate


def add_validate(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a manifest; every error located as file:line:col",
        description=(
            "Load MANIFEST (a file, or a folder of per-environment files with --env or "
            "--all-envs), apply extends and ${VAR}, validate every provider, its templates and "
            "the files it names. Exit 0 when valid (warnings included), 1 when not. With "
            "--no-interpolate no variable is read (CI needs no secret) and the variables each "
            "environment needs are listed."
        ),
    )
    _add_manifest_arguments(parser)
    parser.add_argument(
        "--all-envs",
        action="store_true",
        help="validate every environment of the MANIFEST folder, one report each",
    )
    parser.add_argument("--no-interpolate", action="store_true", help=_NO_INTERPOLATE_HELP)
    parser.set_defaults(run=run_validate)


def run_validate(args: argparse.Namespace, output: Output) -> int:
    if not args.all_envs:
        return 0 if _validate_one(args, output, args.env) else 1
    from composer.manifest.loader import environments

    if args.env is not None:
        output.error("composer validate: give --env or --all-envs, not both")
        return 2
    if args.manifest is None or not os.path.isdir(args.manifest):
        output.error("composer validate: --all-envs needs MANIFEST to be a folder")
        return 2
    names = environments(args.manifest)
    invalid = [env for env in names if not _validate_one(args, output, env)]
    verdict = f"{len(names) - len(invalid)} valid"
    if invalid:
        verdict += f", {len(invalid)} invalid ({', '.join(invalid)})"
    noun = "environment" if len(names) == 1 else "environments"
    output.print(f"{args.manifest}: {len(names)} {noun}: {verdict}")
    return 1 if invalid or not names else 0


def _validate_one(args: argparse.Namespace, output: Output, env: str | None) -> bool:
    """Validate one environment, print what was found; whether it is valid."""
    from composer.cli.checks import manifest_findings

    manifest = _load(args, output, env)
    if manifest is None:
        return False
    shown = str(manifest.path or args.manifest)
    valid = True
    for finding in manifest_findings(manifest, variables_read=not args.no_interpolate):
        line = manifest.redact(finding.render(shown))
        if finding.error:
            output.error(line)
            valid = False
        else:
            output.warning(line)
    if not valid:
        return False
    enabled = sum(1 for config in manifest.providers if config.enabled)
    how = "valid without variables" if args.no_interpolate else "valid"
    output.print(
        manifest.redact(
            f"{shown}: {how}; {len(manifest.providers)} providers ({enabled} enabled), "
            f"budget {manifest.budget}"
        )
    )
    if args.no_interpolate:
        output.print(f"{shown}: {_variables_needed(manifest)}")
    return True


def _variables_needed(manifest: Manifest) -> str:
    """Which variables an environment must have, with where each is first read, and which it
    may have (a default applies, or only a disabled provider reads it)."""
    needed: dict[str, str] = {}
    optional: list[str] = []
    for use in manifest.variables:
        if use.required:
            needed.setdefault(use.name, use.location)
    for use in manifest.variables:
        if use.name not in needed and use.name not in optional:
            optional.append(use.name)
    text = "needs " + (", ".join(f"{n} ({where})" for n, where in needed.items()) or "no variable")
    if optional:
        text += f"; reads if set: {', '.join(optional)}"
    return text


# --------------------------------------------------------------------------- test


def add_test(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "test",
        help="run the expected turns of a test file; exit 1 when one does not hold",
        description=(
            "Run each turn of TESTS (a YAML file kept next to the manifests: environment, "
            "instruction, optional system text and branch) against its manifest and check "
            "what it expects: per provider an outcome, fired, skipped, failed or a bound on "
            "tokens; strings or patterns in the folded text; the budget used. A provider given "
            "a recorded response in the file answers with it instead of doing its work. "
            "Variables come from the file only. Exit 0 when every expectation holds, 1 when "
            "one does not or a turn cannot run."
        ),
    )
    parser.add_argument("tests", metavar="TESTS", help="the test file (e.g. configs/tests.yaml)")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    parser.set_defaults(run=run_test)


def run_test(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.expectations import junit_xml, load_tests, run_tests
    from composer.errors import ManifestError
    from composer.manifest import redact

    try:
        tests = load_tests(args.tests)
    except ManifestError as e:
        for error in e.errors:
            output.error(f"{error.location}: {error.message}")
        return 1
    count = len(tests.model.tests)
    output.print(f"{args.tests}: {count} test{'s' if count != 1 else ''}")
    given = list(tests.model.variables.values())
    with _log_records_to(output, lambda text: redact(text, given)):
        results = run_tests(tests)
    for result in results:
        env = f" (env {result.env})" if result.env else ""
        output.print(f"{'ok  ' if result.passed else 'FAIL'}  {result.name}{env}")
        for failure in result.errors + result.failures:
            output.print(f"      {failure.where}: {failure.message}")
        if any(f.message.startswith("text:") for f in result.failures) and result.text:
            output.print("      the folded text was:")
            for line in result.text.splitlines()[:_TEXT_LINES]:
                output.print(f"      | {line}")
            if len(result.text.splitlines()) > _TEXT_LINES:
                output.print("      | ...")
    passed = sum(1 for result in results if result.passed)
    summary = f"{passed} passed"
    if passed < len(results):
        summary += f", {len(results) - passed} failed"
    output.print(summary)
    if args.junit:
        with open(args.junit, "wb") as handle:
            handle.write(junit_xml(args.tests, results))
    return 0 if passed == len(results) else 1


_TEXT_LINES = 20
"""Lines of the folded text shown under a failed text expectation."""


# --------------------------------------------------------------------------- schema


def add_schema(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of a manifest (for editor completion)",
        description=(
            "Print the JSON Schema of a manifest with every installed provider type (each "
            "schema has a stable $id). Point editors at it with a "
            "'# yaml-language-server: $schema=...' first line, or write every schema once "
            "with --write DIR and map file patterns to them in the editor's settings."
        ),
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--overlay",
        action="store_true",
        help="the relaxed schema for files that use extends (no key is required)",
    )
    which.add_argument("--tests", action="store_true", help="the schema of a composer test file")
    which.add_argument(
        "--write",
        metavar="DIR",
        help="write manifest.schema.json, manifest.overlay.schema.json and tests.schema.json",
    )
    parser.set_defaults(run=run_schema)


def run_schema(args: argparse.Namespace, output: Output) -> int:
    from pathlib import Path

    from composer.catalog import ProviderTypes
    from composer.cli.schema import SCHEMA_FILES, manifest_schema, tests_schema, write_schemas
    from composer.errors import ComposerError

    if args.tests:
        output.json(json.dumps(tests_schema(), indent=2))
        return 0
    types = ProviderTypes.installed()
    for error in types.load_all():  # a broken plugin is reported, the others still documented
        output.error(f"composer: warning: {error}; its type is left out of the schema")
    try:
        if args.write is not None:
            for path in write_schemas(Path(args.write), types):
                output.print(f"wrote {path}: {SCHEMA_FILES[path.name]}")
            return 0
        schema = manifest_schema(types, overlay=args.overlay)
    except ComposerError as e:
        output.error(f"composer: {e}")
        return 1
    except OSError as e:
        output.error(f"composer schema: cannot write {args.write}: {e.strerror or e}")
        return 1
    output.json(json.dumps(schema, indent=2))
    return 0


# --------------------------------------------------------------------------- main

COMMANDS: list[Callable[[Any], None]] = [
    add_validate,
    add_preview,
    add_render,
    add_explain,
    add_diff,
    add_test,
    add_schema,
    add_memory,
    add_serve,
    add_audit,
]
"""The subcommands, in ``--help`` order; a new one appends its ``add_<name>`` here."""


_EPILOG = """\
examples:
  composer validate configs --all-envs --no-interpolate   (CI: no secret needed)
  composer preview configs --env dev --instruction "the API returns 502s"
  composer render configs --env prod
  composer diff configs --env staging --env prod
  composer diff configs --rev main..HEAD --env prod --exit-code
  composer test configs/tests.yaml --junit results.xml
  composer serve configs --env prod              (HTTP; --mcp-stdio for an MCP client)

environment:
  COMPOSER_MANIFEST, COMPOSER_ENV   default MANIFEST and --env
  COMPOSER_ENV_FILE, COMPOSER_SECRETS_DIR   where ${VAR} is also looked up
  COMPOSER_EXTENDS_ROOTS            folders extends may also reach (beyond the manifest's)
  NO_COLOR                          plain output even on a terminal

'composer COMMAND --help' describes each command.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="composer",
        description="Declare in YAML where an LLM agent's pre-turn context comes from.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"composer {__version__}")
    parser.set_defaults(no_interpolate=False)
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's 2 for usage errors).

    Whatever the terminal or the pipes do, a person sees at most one line on stderr, never a
    traceback: a reader that left (silence), a closed or full stdout (one line, exit 1),
    Ctrl-C (providers closed, one line, exit 130), SIGTERM during preview or test (the same,
    exit 143); characters the output's encoding cannot
    show, and bytes of arguments and file names that are not UTF-8, are written escaped.
    """
    _escape_what_cannot_be_encoded()
    if sys.stdout is None:  # started with stdout closed (`composer ... >&-`)
        _say("standard output is closed")
        return 1
    try:
        return _run(argv)
    except BrokenPipeError:  # the reader left early (`composer preview ... | head`)
        _detach_stdout()
        return 1
    except Terminated:  # SIGTERM during preview or test, once the providers were closed
        _say("terminated")
        return 143
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except OSError as e:  # stdout is full or gone (`> /dev/full`)
        _detach_stdout()
        _say(f"cannot write the output: {e.strerror or type(e).__name__}")
        return 1


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        sys.stdout.flush()
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    run: Callable[[argparse.Namespace, Output], int] = args.run
    code = run(args, Output())
    sys.stdout.flush()  # here, so that a reader that left is met inside main's ``try``
    return code


def _escape_what_cannot_be_encoded() -> None:
    """Let stdout and stderr write any text: what their encoding (ascii, latin-1, a lone
    surrogate from bytes that are not UTF-8) cannot represent becomes a backslash escape."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError):  # a closed stream
                stream.reconfigure(errors="backslashreplace")


def _detach_stdout() -> None:
    """Point stdout at devnull, so the interpreter's final flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _say(text: str) -> None:
    """One line on stderr, if there is a stderr to write to."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"composer: {text}", file=sys.stderr, flush=True)
