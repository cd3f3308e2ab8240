"""The web console: the audit log's turns, the providers' counts and the manifest as pages a
browser reads, for ``composer serve --console`` and ``composer console``."""

from composer.cli.console.app import PREFIX, Console, console_mount
from composer.cli.console.source import TurnSource

__all__ = ["PREFIX", "Console", "TurnSource", "console_mount"]
