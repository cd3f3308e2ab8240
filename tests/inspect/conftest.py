"""The operations' tests start as the command-line tests do: no manifest variable from the
caller's shell, in an empty working folder."""

from cli.conftest import clean_environment

__all__ = ["clean_environment"]
