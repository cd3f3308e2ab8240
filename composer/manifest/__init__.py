"""Manifests: the pydantic models, and reading them from YAML files.

* ``models``: what a valid manifest is (``Manifest``, ``ProviderConfig``), no I/O;
* ``source``: values that remember where they were written;
* ``yamlnodes``: YAML to located trees (knows nothing of manifests);
* ``overlay``: the ``extends`` merge rules over those trees;
* ``validation_errors``: pydantic errors as located ``ManifestError``s;
* ``settings``: ``COMPOSER_*``, ``.env`` and the secrets directory;
* ``chain``: a file and the files it ``extends``, confined to its folder;
* ``interpolation``: the ``${VAR}`` language, pure;
* ``values``: a merged tree as the plain values the models validate, with their origins;
* ``placeholders``: what an unset variable stands for when no value is read;
* ``loader``: ``load_manifest``, which puts these together and validates.
"""

from composer.manifest.models import (
    DEFAULT_BUDGET,
    Manifest,
    ManifestPath,
    ProviderConfig,
    RuntimeConfig,
    StrictModel,
    manifest_model,
    map_strings,
    redact,
)
from composer.manifest.source import (
    KeyPath,
    Origin,
    SourceFloat,
    SourceInt,
    SourceStr,
    VariableUse,
)

__all__ = [
    "DEFAULT_BUDGET",
    "KeyPath",
    "Manifest",
    "ManifestPath",
    "Origin",
    "ProviderConfig",
    "RuntimeConfig",
    "SourceFloat",
    "SourceInt",
    "SourceStr",
    "StrictModel",
    "VariableUse",
    "manifest_model",
    "map_strings",
    "redact",
]
