"""The options several commands share, and the manifest they name.

``add_manifest_arguments`` declares ``MANIFEST`` and ``--env`` (which may be given once),
``add_no_interpolate`` the ``--no-interpolate`` switch, ``add_json`` the ``--json`` switch;
``manifest_from`` loads the manifest they name, or prints its located errors
(``load_diagnosed`` returns them); ``show_defaults`` makes every command's ``--help``
state its options' defaults. Only argparse is imported here: the loader is
imported when a command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.documents import Diagnostic
    from composer.manifest import Manifest

__all__ = [
    "JSON_HELP",
    "MANIFEST_HELP",
    "NO_INTERPOLATE_HELP",
    "CommandParser",
    "DefaultsShown",
    "IntermixedParser",
    "Once",
    "add_json",
    "add_manifest_arguments",
    "add_no_interpolate",
    "load_diagnosed",
    "manifest_from",
    "show_defaults",
]

MANIFEST_HELP = "a manifest file, or a folder of <env>.yaml files (default: $COMPOSER_MANIFEST)"

NO_INTERPOLATE_HELP = (
    "read no variable: check each ${VAR} is well formed, use defaults, and list the variables "
    "the environment needs (for CI without secrets)"
)


JSON_HELP = (
    "print one JSON document on standard output instead (its shape, versioned: the JSON "
    "output reference); standard error and the exit code stay the same"
)


class CommandParser(argparse.ArgumentParser):
    """A command's parser (and its actions'): an argument it does not know is its own usage
    error, shown with its usage, where argparse would hand it up to ``composer``'s."""

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        namespace, extras = super().parse_known_args(*args, **kwargs)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


class IntermixedParser(argparse.ArgumentParser):
    """A parser whose optional positional may come after an option: ``audit show LOG
    --schema S ID``. Plain argparse gives ``ID`` nothing once an option stands between it and
    ``LOG``, then refuses ``ID`` as an unrecognized argument. (For a parser without
    subcommands: argparse's intermixed parsing refuses them.)"""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing:  # parse_known_intermixed_args calls this, twice
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        if extras:  # as CommandParser: the action's own usage error
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class Once(argparse.Action):
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


def add_manifest_arguments(parser: argparse.ArgumentParser) -> None:
    """``MANIFEST`` (optional: ``$COMPOSER_MANIFEST``) and ``--env`` (once)."""
    parser.add_argument("manifest", metavar="MANIFEST", nargs="?", help=MANIFEST_HELP)
    parser.add_argument(
        "--env",
        action=Once,
        help="environment: picks <MANIFEST>/<ENV>.yaml (default: $COMPOSER_ENV)",
    )


def add_no_interpolate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-interpolate", action="store_true", help=NO_INTERPOLATE_HELP)


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: the command's document (``composer.inspect.documents``) on standard output."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def manifest_from(
    args: argparse.Namespace,
    output: Output,
    env: str | None = None,
    *,
    path: str | None = None,
    shown: Callable[[str], str] | None = None,
    problems: list[Diagnostic] | None = None,
) -> Manifest | None:
    """The manifest named on the command line (or ``path``), or None after printing its
    located errors, each passed through ``shown`` when given; with ``problems``, the errors
    are added to it too.

    ``--no-interpolate``, where the command has it, loads without reading any variable.
    """
    manifest, found = load_diagnosed(args, output, env, path=path, shown=shown)
    for error in found:
        location = error.location
        output.error(f"{location}: {error.message}" if location else f"composer: {error.message}")
    if problems is not None:
        problems += found
    return manifest


def load_diagnosed(
    args: argparse.Namespace,
    output: Output,
    env: str | None = None,
    *,
    path: str | None = None,
    shown: Callable[[str], str] | None = None,
) -> tuple[Manifest | None, list[Diagnostic]]:
    """``manifest_from`` without printing: the manifest, or None and its errors (each passed
    through ``shown``, files named as the command's output names them)."""
    from composer.errors import ManifestError, SettingsError
    from composer.manifest.loader import load_manifest

    spelled = args.manifest if path is None else path
    output.name_files_as(spelled)

    def show(text: str) -> str:
        return output.relative(shown(text) if shown else text)

    try:
        manifest = load_manifest(
            spelled,
            env=env if env is not None else args.env,
            interpolate=not args.no_interpolate,
        )
    except ManifestError as e:
        from composer.inspect.documents import diagnostic  # its models only when they are needed

        return None, [diagnostic(show(error.location), show(error.message)) for error in e.errors]
    except SettingsError as e:
        from composer.inspect.documents import diagnostic

        return None, [diagnostic(None, show(str(e)))]
    return manifest, []


class DefaultsShown(argparse.HelpFormatter):
    """Help that ends with ``(default: X)`` for an option whose default is a value (not
    None, False or empty), unless its help already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or (not action.option_strings and action.nargs not in ("?", "*"))
        ):
            return action.help
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """``DefaultsShown`` for ``parser`` and each of its subcommands' parsers."""
    parser.formatter_class = DefaultsShown
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
