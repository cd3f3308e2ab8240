"""``python -m composer``: the same command as the ``composer`` console script."""

from composer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
