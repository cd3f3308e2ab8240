"""The package's version, in a module of its own: ``composer`` and the modules that report it
(spans, the servers) import it from here, never the package facade, which imports the rest."""

__all__ = ["__version__"]

__version__ = "0.1.0"
