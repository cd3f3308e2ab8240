"""The ``composer`` command line: nothing else in the package imports it.

Laid out as pip's: ``main`` holds the parser, ``main()`` and the table of commands, each
command is a module of ``commands/``, and what several commands share has its own module:

* ``output`` (``Output``, where and how a command writes), ``options`` (shared arguments and
  the manifest they name), ``exit_codes``, ``logs``, ``progress``, ``tables`` (a turn as a
  table);
* ``preview`` (one real turn, explained per provider), ``expectations`` (``composer test``),
  ``audit`` (the audit log read back), ``explain`` and ``render`` (the effective manifest
  with origins, diffs), ``checks`` (``validate``'s warnings), ``stores`` (memory stores by
  entry point), ``schema`` and ``reference`` (JSON Schemas, the README's reference).
"""

from composer.cli.main import COMMANDS, build_parser, main
from composer.cli.output import Output

__all__ = ["COMMANDS", "Output", "build_parser", "main"]
