"""One module per ``composer`` command, each imported only when its command is run.

A command module has three names, which ``composer.cli.main`` reads:

* ``DESCRIPTION``: the text of ``composer COMMAND --help`` (its one-line summary is in
  ``main.COMMANDS``, so ``composer --help`` imports no command module);
* ``add_arguments(parser)``: declares its arguments;
* ``run(args, output) -> int``: runs it and returns the exit code (``exit_codes``).

Only argparse and the command line's light modules (``options``, ``exit_codes``) are imported
at a module's top; what a command runs is imported inside ``run``. No command imports
``main``: what several share is in ``output``, ``options``, ``logs``, ``progress`` and
``tables``.
"""
