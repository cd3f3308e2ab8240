"""What the front-ends do with a manifest, a test file or an audit log, with no terminal and
no web page in it: the operations ``composer`` (``composer.cli``) and the web console
(``composer.console``) share.

One module per operation: ``preview`` (one real turn, explained per provider; ``run_preview``
is the library's way to preview), ``explain`` and ``render`` (the effective manifest with
origins, diffs), ``checks`` (``validate``'s warnings), ``expectations`` (``composer test``'s
runner and its JUnit report), ``turns`` (the audit log's turns read back and compared),
``revisions`` (a manifest at a git revision), ``schema`` (the JSON Schemas), ``scaffold`` and
``write_inside`` (``composer init``'s files), ``stores`` (memory stores by entry point),
``documents`` (the ``--json`` shapes) and ``words`` (outcomes and rows as a person reads
them). Each returns data; printing it is the front-end's. Nothing here imports a front-end
(``tests/test_layout.py``).
"""

__all__: list[str] = []
