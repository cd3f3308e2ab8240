"""``composer preview --watch``: the preview again on every change of what the manifest reads.

The manifest's file, the files it extends, the ``.env`` file and the secrets folder
(``composer.reload.changes.Inputs``) are digested every ``poll_s`` seconds; when a digest
changes, the preview runs again through the same command function as without ``--watch``, so
a broken edit shows its located errors (on stderr) where the table was. On a terminal the
screen is cleared before each run; otherwise runs are separated by a line. Ctrl-C stops.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from composer.inspect.words import counted

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.reload.changes import Digests, Inputs

__all__ = ["watch_preview"]

_CLEAR = "\x1b[H\x1b[2J"


def watch_preview(
    args: argparse.Namespace,
    output: Output,
    run: Callable[[argparse.Namespace, Output], int],
    *,
    poll_s: float = 0.25,
) -> int:
    """Run ``run`` (the preview command) now and after each change, until interrupted."""
    from composer.reload.changes import snapshot

    once = argparse.Namespace(**{**vars(args), "watch": False})
    first = True
    try:
        while True:
            inputs = _inputs(args)
            digests = snapshot(inputs)
            if output.colour:
                output.out.write(_CLEAR)
            elif not first:
                now = _dt.datetime.now().strftime("%H:%M:%S")
                output.print(f"----- {now}: changed, previewing again -----")
            first = False
            run(once, output)
            output.print(
                f"(watching {counted(len(inputs.files), 'file')} for changes; Ctrl-C stops)"
            )
            output.out.flush()
            output.err.flush()
            _wait_for_change(inputs, digests, poll_s)
    except KeyboardInterrupt:
        return 0


def _inputs(args: argparse.Namespace) -> Inputs:
    """What the manifest reads now; a manifest that does not load names its files in its
    errors."""
    from composer.errors import ComposerError, ManifestError
    from composer.manifest.loader import load_manifest
    from composer.reload.changes import Inputs

    manifest = error = None
    try:
        manifest = load_manifest(args.manifest, env=args.env)
    except ManifestError as e:
        error = e
    except ComposerError:
        pass
    inputs = Inputs.of(manifest, path=args.manifest, env=args.env, environ=None, error=error)
    if manifest is not None:
        import asyncio

        asyncio.run(manifest.aclose())  # nothing was built from it, but be sure
    return inputs


def _wait_for_change(inputs: Inputs, digests: Digests, poll_s: float) -> None:
    from composer.reload.changes import snapshot

    while snapshot(inputs) == digests:
        time.sleep(poll_s)
