"""The web console: the audit log's turns, the providers' counts and the manifest as pages a
browser reads, for ``composer serve --console`` and ``composer console``.

A front-end beside the command line (``composer.cli``) and the servers (``composer.serve``):
what it shows comes from the operations of ``composer.inspect``, as the commands' output does,
and it imports nothing of the command line (``tests/test_layout.py``). ``app`` holds the
routes, ``views`` the pages' data, ``sessions`` the signed login cookies, ``source`` the
audit log it reads; ``templates/`` and ``static/`` ship in the package.
"""

from composer.console.app import PREFIX, Console, console_mount
from composer.console.source import TurnSource

__all__ = ["PREFIX", "Console", "TurnSource", "console_mount"]
