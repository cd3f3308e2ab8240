"""composer's version, in one place: the build reads it (``[tool.setuptools.dynamic]`` in
pyproject.toml) and ``composer.__version__`` is it, so the two never differ."""

__all__ = ["__version__"]

__version__ = "0.1.0"
