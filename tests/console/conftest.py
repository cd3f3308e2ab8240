"""The console's tests: the pages against a real ``composer serve --console`` or ``composer
console`` process (``console_setup``), the sessions and views in process. Each starts as the
command-line tests do, without the caller's manifest variables, in an empty working folder."""

from cli.conftest import clean_environment
from serve.conftest import dev_server

__all__ = ["clean_environment", "dev_server"]
