"""The ``composer`` command line: nothing else in the package imports it.

* ``main``: the parser, the subcommands and the ``Output`` they write to;
* ``preview``: one real turn, explained per provider;
* ``explain``: the effective manifest with origins, and diffs between environments;
* ``checks``: warnings ``validate`` adds to the errors the loader raises;
* ``schema`` and ``reference``: the JSON Schema and the README's manifest reference.
"""

from composer.cli.main import COMMANDS, Output, build_parser, main

__all__ = ["COMMANDS", "Output", "build_parser", "main"]
