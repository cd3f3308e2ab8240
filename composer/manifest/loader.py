"""Manifest files -> a validated ``Manifest``: extends chains, ``${VAR}``, validation.

One ``load_manifest`` call reads the file and every file it ``extends`` as located trees
(``chain.py``, over ``yamlnodes.py``), merges them (``overlay.py``), turns the merged result
into plain values, ``${VAR}`` substituted (``values.py``, ``interpolation.py``: so an overlay
can replace a value whose variable is unset), and only then lets the pydantic models validate
it (``_Validation`` here): the manifest's keys by ``Manifest``, each provider entry by its
type's config model, their errors located by ``validation_errors.py``; without variable values
those that need one stand for placeholders (``placeholders.py``). Every failure, whatever
PyYAML or a plugin raises, leaves as one ``ManifestError`` listing every mistake as
``path:line:column: message``, with secrets masked.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from composer.catalog import ProviderTypes
from composer.errors import ManifestError, PluginError, SettingsError
from composer.hooks import Secrets
from composer.manifest.chain import read_chain
from composer.manifest.models import Manifest, field_names_by_key, redact
from composer.manifest.overlay import merge_chain
from composer.manifest.placeholders import ATTEMPTS, unjudged
from composer.manifest.settings import VARIABLE_NAME, Variables, load_settings
from composer.manifest.source import KeyPath, Origin
from composer.manifest.validation_errors import did_you_mean, locate, translate
from composer.manifest.values import Values
from composer.manifest.yamlnodes import (
    MAX_BYTES,
    MAX_DEPTH,
    Map,
    Node,
    Scalar,
    Seq,
    printable,
    read_yaml,
    scalar_at,
)

__all__ = ["MAX_BYTES", "MAX_DEPTH", "environments", "load_manifest"]


class _Validation:
    """The merged tree of one load validated: by ``Manifest``, each provider by its type's
    config model; every mistake located in ``values.errors``."""

    def __init__(self, values: Values, types: ProviderTypes) -> None:
        self.values = values
        self.types = types
        self.errors = values.errors

    def entries(self, node: Seq) -> list[tuple[Node, KeyPath, str]]:
        """Each provider entry with its value and a label for messages (addressed by name)."""
        result: list[tuple[Node, KeyPath, str]] = []
        self.values.origins[("providers",)] = Origin(
            node.mark.display, node.mark.line, node.mark.column
        )
        names: dict[str, Scalar] = {}
        for i, entry in enumerate(node.items):
            name = scalar_at(entry, "name")
            key: str | int = i
            label = f"provider #{i + 1}"
            if name is not None and name.is_str and name.value:
                key, used, _ = self.values.text(name, record=False)
                label = f'provider "{name.value if used else key}"'  # a secret name shows raw
                first = names.setdefault(key, name)
                if first is not name and first.value != name.value:  # equal raw: reported per file
                    self.errors.append(
                        name.mark.error(
                            f"{label}: the same name as the provider at line {first.mark.line} "
                            "once variables are substituted"
                        )
                    )
            self.values.labels[("providers", key)] = label
            result.append((entry, ("providers", key), label))
        return result

    def validate(self, tree: Map) -> Manifest | None:
        """The manifest's keys by ``Manifest``, each provider by its type's config model."""
        configs: list[Any] = []
        providers = tree.items.get("providers")
        if providers is not None and isinstance(providers[1], Seq):
            for entry, keys, label in self.entries(providers[1]):
                config = self.provider(entry, keys, label)
                if config is not None:
                    configs.append(config)

        def data() -> dict[str, Any]:
            return {
                key: configs
                if key == "providers" and isinstance(child, Seq)
                else self.values.value(child, (key,))
                for key, (_, child) in tree.items.items()
            }

        manifest: Manifest | None = self.checked(Manifest, data, tree, "")
        return manifest

    def checked(self, model: type[Any], make: Callable[[], Any], tree: Node, label: str) -> Any:
        """``model`` validated from ``make()``; None after recording the located errors.

        Without variable values (``placeholders.py``) a value that needs one cannot be judged:
        while its errors are only those of such values, each gets its next placeholder and
        ``make()`` builds the value again.
        """
        placeholders = self.values.placeholders
        for _ in range(ATTEMPTS):
            data = make()
            try:
                validated = model.model_validate(data)
            except ValidationError as e:
                errors = self.located(e, tree, model, label)
                if errors or placeholders is None:
                    self.errors.extend(errors)
                    return None
                if not placeholders.choose(e, tree, self.values.unresolved):
                    break
            else:
                if not self.values.quoted_numbers_seen:  # nothing quoted looks like a number
                    return validated
                quoted = self.quoted_numbers(data, validated, tree, label)
                self.errors.extend(quoted)
                return None if quoted else validated
        self.errors.append(unjudged(tree, label))  # without values only: see above
        return None

    def quoted_numbers(
        self, given: Any, validated: Any, tree: Node, label: str, keys: KeyPath = ()
    ) -> list[ManifestError]:
        """A quoted string (``budget: "2500"``) that validation read as a number or a boolean:
        an error, as the JSON Schema says, though pydantic converts it. A value written with a
        variable is text by nature and may be a number."""
        errors: list[ManifestError] = []
        if isinstance(given, Mapping) and isinstance(validated, BaseModel):
            names = field_names_by_key(type(validated))
            for key, item in given.items():
                if key in names:
                    inner = getattr(validated, names[key])
                    errors += self.quoted_numbers(item, inner, tree, label, (*keys, key))
        elif isinstance(given, Mapping) and isinstance(validated, Mapping):
            for key, item in given.items():
                if key in validated:
                    errors += self.quoted_numbers(item, validated[key], tree, label, (*keys, key))
        elif isinstance(given, list) and isinstance(validated, list | tuple):
            for index, (item, inner) in enumerate(zip(given, validated, strict=False)):
                errors += self.quoted_numbers(item, inner, tree, label, (*keys, index))
        elif isinstance(given, str) and isinstance(validated, bool | int | float):
            node = locate(tree, keys, key_of_last=False)[2]
            if (
                isinstance(node, Scalar)
                and "${" not in node.value
                and id(node) not in self.values.unresolved
            ):
                kind = "true or false" if isinstance(validated, bool) else "a number"
                where = ".".join(str(k) for k in keys)
                message = f"{where}: must be {kind}, not a quoted string (remove the quotes)"
                errors.append(node.mark.error(f"{label}: {message}" if label else message))
        return errors

    def renamed(self, keys: KeyPath) -> str:
        """A hint for an entry without ``type`` whose name is close to another provider's:
        an overlay updates a provider by its exact name; any other name adds a new one."""
        name = keys[1]
        others = [str(k[1]) for k in self.values.labels if k != keys and isinstance(k[1], str)]
        if not isinstance(name, str) or not (hint := did_you_mean(name, others)):
            return ""
        return f" (a new provider: an overlay updates one by its exact name; {hint.strip()[1:-1]})"

    def provider(self, entry: Node, keys: KeyPath, label: str) -> Any:
        value = self.values.entry(entry, keys)
        if not isinstance(entry, Map) or not isinstance(value, dict):
            self.errors.append(entry.mark.error(f"{label}: must be a mapping with name and type"))
            return None
        known = ", ".join(self.types.names)
        type_entry = entry.items.get("type")
        if type_entry is None:
            self.errors.append(
                entry.mark.error(
                    f'{label}: missing key "type"{self.renamed(keys)}; known types: {known}'
                )
            )
            return None
        type_node = type_entry[1]
        type_name = value["type"]
        if not isinstance(type_name, str):
            self.errors.append(type_node.mark.error(f"{label}: type: must be a string"))
            return None
        if type_name not in self.types:
            hint = did_you_mean(type_name, self.types.names)
            self.errors.append(
                type_node.mark.error(
                    f'{label}: unknown provider type "{type_name}"{hint}; known types: {known}'
                )
            )
            return None
        try:
            model = self.types.get(type_name).config
        except PluginError as e:  # only the manifests that name a broken plugin fail
            self.errors.append(type_node.mark.error(f'{label}: provider type "{type_name}": {e}'))
            return None
        try:
            first = [value]  # the value already built is used once; a retry builds it again

            def make() -> Any:
                return first.pop() if first else self.values.entry(entry, keys)

            return self.checked(model, make, entry, label)
        except Exception as e:  # a plugin's validator raising something pydantic does not wrap
            self.errors.append(
                entry.mark.error(f"{label}: rejected by type {type_name!r} ({type(e).__name__})")
            )
        return None

    def located(
        self, error: ValidationError, tree: Node, model: type[BaseModel], label: str
    ) -> list[ManifestError]:
        """``error`` as ManifestErrors, knowing which values came from variables."""
        values = self.values
        return translate(
            error,
            tree,
            model,
            label,
            unresolved=values.unresolved,
            variables_of=values.variables_of,
            uncertain=() if values.placeholders is None else values.placeholders.uncertain,
        )


def environments(folder: str | os.PathLike[str]) -> list[str]:
    """The environments of a folder: each ``<env>.yaml`` in it, by name, except test files.

    A file whose top level holds ``tests`` (a ``composer test`` file) or ``questions`` (a
    ``composer eval`` file) is kept next to the manifests, not an environment. A file that cannot be read stays listed: loading it says
    what is wrong.
    """
    found = []
    for file in sorted(Path(folder).glob("*.yaml")):
        try:
            tree, _ = read_yaml(file.name, file)
        except ManifestError:
            tree = None
        if not (isinstance(tree, Map) and ("tests" in tree.items or "questions" in tree.items)):
            found.append(file.stem)
    return found


def _select(path: str | os.PathLike[str], env: str | None) -> tuple[str, Path]:
    """The file to load: ``path`` itself, or ``<path>/<env>.yaml`` when ``path`` is a folder.

    A folder without an environment, or without that one, is a ``SettingsError``: no file is
    at fault, so there is no line to point at.
    """
    display = os.fspath(path)
    file = Path(path).absolute()  # values resolve relative paths against its folder
    try:
        folder = file.is_dir()
    except OSError:  # a name too long: reading it says so, located
        folder = False
    if not folder:
        return display, file
    if not env:
        listing = ", ".join(environments(file)) or "none"
        raise SettingsError(
            f'"{printable(display)}" is a folder; choose an environment with --env or '
            f"COMPOSER_ENV (found: {listing})"
        )
    # exists(), not is_file(): a FIFO or a folder named <env>.yaml is reported as what it is
    if not VARIABLE_NAME.fullmatch(env.replace("-", "_")) or not (file / f"{env}.yaml").exists():
        listing = ", ".join(environments(file)) or "none"
        raise SettingsError(
            f'no manifest for environment "{printable(env)}" in "{printable(display)}" '
            f"(found: {listing})"
        )
    return os.path.join(display, f"{env}.yaml"), file / f"{env}.yaml"


def load_manifest(
    path: str | os.PathLike[str] | None = None,
    *,
    env: str | None = None,
    environ: Mapping[str, str] | None = None,
    types: ProviderTypes | None = None,
    interpolate: bool = True,
    variables: Mapping[str, str] | None = None,
) -> Manifest:
    """Read, merge, interpolate and validate a manifest; every failure is one ManifestError,
    except unusable composer settings (``SettingsError``: no manifest file is at fault).

    ``path`` is a file, or a folder of per-environment files from which ``env`` (else
    ``COMPOSER_ENV``) picks ``<env>.yaml``; a folder without an environment is an error listing
    the files, since silently loading a default in production is worse than stopping. With no
    ``path``, ``COMPOSER_MANIFEST`` is used. ``environ`` replaces ``os.environ`` for settings
    and ``${VAR}`` (a ``.env`` file and a secrets directory are consulted after it). ``types``
    defaults to every provider type installed.

    ``variables`` replaces every source of ``${VAR}`` (environment, ``.env``, secrets
    directory) with exactly that mapping. ``interpolate=False`` reads no variable at all:
    each reference must still be well formed, a default applies, and a value that needs an
    unset variable is kept as written and not judged (for checks in CI, where no secret is
    available). ``Manifest.variables`` lists every reference either way.
    """
    try:
        settings = load_settings(environ)
    except (ValidationError, ValueError, OSError) as e:
        raise SettingsError(f"bad composer settings ({type(e).__name__})") from e
    if path is None:
        if settings.manifest is None:
            raise SettingsError("no manifest given: pass a path or set COMPOSER_MANIFEST")
        path = settings.manifest
    display = os.fspath(path)
    if types is None:
        types = ProviderTypes.installed()
    try:
        display, file = _select(path, env or settings.env)
        lookup: Callable[[str], str | None] | None
        if not interpolate:
            lookup = None  # no value is read (placeholders.py)
        elif variables is not None:
            lookup = Variables(variables).get
        else:
            lookup = settings.variables(environ, folder=Path(os.path.dirname(display) or ".")).get
        roots = (file.parent.resolve(), *(r.resolve() for r in settings.extends_folders))
        with _without_cyclic_gc():
            manifest = _load(Values(lookup, []), types, roots, display, file)
    except (ManifestError, SettingsError):  # a secret file that cannot be read is a setting
        raise
    except Exception as e:  # the loader's promise: nothing but ManifestError leaves it
        raise ManifestError(display, 1, 1, f"cannot load manifest ({type(e).__name__})") from e
    return manifest


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a manifest loads.

    A load makes some ten objects per value (nodes, marks, origins, strings, models), nearly
    all acyclic and freed by reference counting; the collector, triggered by their number,
    would walk every object alive again and again and find nothing (a third of a large
    manifest's load time). Whatever cycles a load leaves are collected once it is resumed;
    it stays off when the application had turned it off.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _declared_secrets(manifest: Manifest) -> set[str]:
    """What configs name as secrets however they were written (a DSN's password): the
    providers' and the audit sink's."""
    audit = manifest.runtime.audit
    configs = [*manifest.providers, *([audit] if audit is not None else [])]
    return {
        value
        for config in configs
        if isinstance(config, Secrets)
        for value in config.secrets()
        if value
    }


def _load(
    values: Values, types: ProviderTypes, roots: tuple[Path, ...], display: str, file: Path
) -> Manifest:
    errors = values.errors
    try:
        trees = read_chain(
            display, file, roots=roots, resolve=lambda node: values.text(node)[0], errors=errors
        )
    except ManifestError as e:
        raise ManifestError.collect(_shown(x, values.secrets) for x in [*errors, e]) from e
    manifest = _Validation(values, types).validate(merge_chain(trees, types))
    if errors or manifest is None:
        raise ManifestError.collect(_shown(e, values.secrets) for e in errors)
    manifest._bind(
        path=Path(display),
        secrets=values.secrets | _declared_secrets(manifest),
        origins=values.origins,
        types=types,
        variables=values.uses,  # a retry reads a value again: ``_bind`` keeps each once
    )
    return manifest


def _shown(error: ManifestError, secrets: set[str]) -> ManifestError:
    """``error`` as shown: secrets masked, on one line whatever names it quotes."""
    message = printable(redact(error.message, secrets))
    return ManifestError(error.path, error.line, error.column, message)
