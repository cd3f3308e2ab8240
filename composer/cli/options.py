"""The options several commands share, and the manifest they name.

``add_manifest_arguments`` declares ``MANIFEST`` and ``--env`` (which may be given once),
``add_no_interpolate`` the ``--no-interpolate`` switch; ``manifest_from`` loads the manifest
they name, or prints its located errors; ``show_defaults`` makes every command's ``--help``
state its options' defaults. Only argparse is imported here: the loader is
imported when a command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.manifest import Manifest

__all__ = [
    "MANIFEST_HELP",
    "NO_INTERPOLATE_HELP",
    "DefaultsShown",
    "Once",
    "add_manifest_arguments",
    "add_no_interpolate",
    "manifest_from",
    "show_defaults",
]

MANIFEST_HELP = "a manifest file, or a folder of <env>.yaml files (default: $COMPOSER_MANIFEST)"

NO_INTERPOLATE_HELP = (
    "read no variable: check each ${VAR} is well formed, use defaults, and list the variables "
    "the environment needs (for CI without secrets)"
)


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


def manifest_from(
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

    spelled = args.manifest if path is None else path
    output.name_files_as(spelled)
    try:
        return load_manifest(
            spelled,
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
