"""The ``composer`` command line: nothing else in the package imports it.

Laid out as pip's: ``main`` holds the parser, ``main()`` and the table of commands, each
command is a module of ``commands/``, and what several commands share has its own module:

* ``output`` (``Output``, where and how a command writes, and ``print_document`` for
  ``--json``), ``options`` (shared arguments and the manifest they name), ``exit_codes``,
  ``logs``, ``progress``, ``terminate`` (SIGTERM as Ctrl-C), ``watch`` (``preview --watch``),
  ``tables`` (a turn as a table) and ``reference`` (the generated reference pages).

What a command does with a manifest, a test file or an audit log is an operation of
``composer.inspect``, shared with the web console; a command parses, calls it and prints.
"""

from composer.cli.main import COMMANDS, build_parser, main
from composer.cli.output import Output

__all__ = ["COMMANDS", "Output", "build_parser", "main"]
