"""Manifest files -> a validated ``Manifest``: extends chains, ``${VAR}``, validation.

One ``load_manifest`` call is one ``_Session``: it reads the file and every file it ``extends``
as located trees (``yamlnodes.py``), merges them (``overlay.py``), substitutes ``${VAR}`` in the
merged result (so an overlay can replace a value whose variable is unset), and only then lets
the pydantic models validate it: the manifest's keys by ``Manifest``, each provider entry by
its type's config model, their errors located by ``validation_errors.py``. Every failure,
whatever PyYAML or a plugin raises, leaves as one ``ManifestError`` listing every mistake as
``path:line:column: message``, with secrets masked.

``extends`` stays within the folder of the manifest loaded, symlinks followed, unless
``COMPOSER_EXTENDS_ROOTS`` lists the folder it leads to, and the file it names must be a
manifest: otherwise whoever may edit a manifest could have composer read any file of the
machine and quote it back key by key.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from composer.catalog import ProviderTypes
from composer.errors import ManifestError, PluginError, SettingsError
from composer.hooks import Secrets
from composer.manifest.models import Manifest, field_names_by_key, redact
from composer.manifest.overlay import merge_chain
from composer.manifest.settings import VARIABLE_NAME, Variables, load_settings
from composer.manifest.source import KeyPath, Origin, Secret, SourceStr, VariableUse
from composer.manifest.validation_errors import did_you_mean, locate, translate
from composer.manifest.yamlnodes import (
    MAX_BYTES,
    MAX_DEPTH,
    Map,
    Mark,
    Node,
    Scalar,
    Seq,
    core_value,
    printable,
    read_yaml,
    scalar_at,
)

__all__ = ["MAX_BYTES", "MAX_DEPTH", "environments", "load_manifest"]


@dataclass
class _Session:
    """One ``load_manifest`` call: where variables come from, what was found, what went wrong."""

    variables: Variables
    types: ProviderTypes
    roots: tuple[Path, ...]  # resolved folders an extends may lead into, the manifest's first
    errors: list[ManifestError] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    origins: dict[KeyPath, Origin] = field(default_factory=dict)
    lenient: bool = False  # inside a disabled provider, an unset variable is no error
    variables_of: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(scalar) -> names
    unresolved: set[int] = field(default_factory=set)  # id(scalar) with an unset variable
    read_variables: bool = True  # False: no value is looked up; defaults apply, the rest is kept
    uses: list[VariableUse] = field(default_factory=list)
    # Without values (read_variables=False): the placeholder an unset variable stands for in
    # a scalar whose value must have a shape (id(scalar) -> index into _PLACEHOLDERS), and
    # the mappings and lists holding such a scalar (a check over them cannot be judged).
    placeholders: dict[int, int] = field(default_factory=dict)
    uncertain: set[int] = field(default_factory=set)
    labels: dict[KeyPath, str] = field(default_factory=dict)  # ("providers", key) -> label
    quoted_numbers_seen: bool = False  # a quoted scalar reads as a number or bool: check them
    _ancestors: list[int] = field(default_factory=list)

    # -- files

    def read(self, display: str, file: Path, via: tuple[Scalar, str] | None = None) -> Map:
        """One file as a located tree; fatal problems raise, others are collected.

        A file reached by ``extends`` (``via``: its value and target) that is no mapping with
        a manifest key is reported at that value as not a manifest, and nothing of what it
        holds is shown: a base manifest is checked key by key, which would quote any file.
        """
        tree, errors = read_yaml(display, file, overlay_tags=True)
        if via is not None and not (
            isinstance(tree, Map) and any(key in _MANIFEST_KEYS for key in tree.items)
        ):
            node, target = via
            raise node.mark.error(
                f'extends: "{target}" is not a manifest (a base manifest is a mapping with '
                f"{', '.join(_MANIFEST_KEYS[:-1])} or {_MANIFEST_KEYS[-1]})"
            )
        self.errors.extend(errors)
        if not isinstance(tree, Map):
            kind = "a list" if isinstance(tree, Seq) else "a single value"
            raise tree.mark.error(
                f"the top level must be a mapping (version, budget, providers), not {kind}"
            )
        self.check_names(tree)
        return tree

    def check_names(self, tree: Map) -> None:
        """Provider names are unique within one file (overlays update by name across files)."""
        providers = tree.items.get("providers")
        if providers is None or not isinstance(providers[1], Seq):
            return
        seen: dict[str, Mark] = {}
        for entry in providers[1].items:
            name = scalar_at(entry, "name")
            if name is None or not isinstance(name.value, str):
                continue
            if name.value in seen:
                self.errors.append(
                    name.mark.error(
                        f'duplicate provider name "{name.value}" (first at line '
                        f"{seen[name.value].line})"
                    )
                )
            else:
                seen[name.value] = name.mark

    def chain(self, display: str, file: Path) -> list[Map]:
        """The file and everything it extends, the file first; cycles and gaps are located."""
        trees: list[Map] = []
        visited: list[tuple[Path, str]] = []
        via: tuple[Scalar, str] | None = None
        while True:
            tree = self.read(display, file, via)  # first: it reports a path that cannot be read
            visited.append((file.resolve(), display))
            trees.append(tree)
            entry = tree.items.get("extends")
            if entry is None:
                return trees
            node = entry[1]
            if not isinstance(node, Scalar) or not node.is_str or not node.value:
                raise node.mark.error("extends: must be the file name of a base manifest")
            target = self.interpolate(node)[0]
            step = Path(target)
            next_display = (
                target if step.is_absolute() else os.path.join(os.path.dirname(display), target)
            )
            next_file = step if step.is_absolute() else file.parent / step
            try:
                outside = not self.within_roots(next_file)
                looped = any(seen == next_file.resolve() for seen, _ in visited)
                reason = None if outside else _unusable(next_file)
            except (OSError, ValueError) as e:  # a name too long, a NUL byte, a lone surrogate
                outside, looped, reason = False, False, getattr(e, "strerror", None) or str(e)
            if outside:
                raise node.mark.error(
                    f'extends: "{target}" is outside "{self.roots[0]}", the folder of the '
                    "manifest loaded (symlinks followed); a base elsewhere must be in a folder "
                    f'listed in COMPOSER_EXTENDS_ROOTS (separated by "{os.pathsep}")'
                )
            if looped:
                cycle = " -> ".join([shown for _, shown in visited] + [next_display])
                raise node.mark.error(f"extends cycle: {cycle}")
            if reason is not None:
                raise node.mark.error(f'extends: cannot read "{target}": {reason}')
            display, file, via = next_display, next_file, (node, target)

    def within_roots(self, file: Path) -> bool:
        """Whether ``file``, its symlinks followed, is inside one of ``roots``."""
        real = file.resolve()
        return any(real.is_relative_to(root) for root in self.roots)

    # -- variables

    def interpolate(
        self, node: Scalar, *, record: bool = True
    ) -> tuple[str, tuple[str, ...], bool]:
        """``${VAR}``, ``${VAR:-default}`` and ``$${`` in a string: the text, the variables
        substituted, and whether a secret went in.

        A value from a variable is a secret, except a URL's origin: a variable at the start of
        the string whose value is exactly ``scheme://host[:port]`` (no user or password), which
        a failure must be able to name. ``record=False`` only peeks (a provider's name, to
        address its origins): problems and secrets are recorded once, when the value itself is
        built.
        """
        raw: str = node.value
        if "$" not in raw:  # most strings: nothing to substitute
            return raw, (), False
        out: list[str] = []
        used: list[str] = []
        problems: list[ManifestError] = []
        found: list[str] = []
        unknown = False
        i = 0
        while (j := raw.find("$", i)) >= 0:
            out.append(raw[i:j])
            if raw.startswith("$${", j):
                out.append("${")
                i = j + 3
                continue
            if not raw.startswith("${", j):
                out.append("$")
                i = j + 1
                continue
            end = raw.find("}", j + 2)
            if end < 0:
                problems.append(node.mark.error('unclosed "${" (write "$${" for a literal "${")'))
                out.append(raw[j:])
                i = len(raw)
                break
            name, has_default, default = raw[j + 2 : end].partition(":-")
            i = end + 1
            if not VARIABLE_NAME.fullmatch(name):
                problems.append(
                    node.mark.error(
                        f'bad variable reference "${{{name}}}"; a name is letters, digits and _'
                    )
                )
                continue
            if record:
                mark = node.mark
                self.uses.append(
                    VariableUse(
                        name,
                        f"{mark.display}:{mark.line}:{mark.column}",
                        bool(has_default),
                        not has_default and not self.lenient,
                    )
                )
            try:
                value = self.variables.get(name) if self.read_variables else None
            except OSError as e:
                problems.append(node.mark.error(f'cannot read secret "{name}": {e.strerror}'))
                continue
            if value is None or (has_default and value == ""):
                if has_default:
                    out.append(default)
                    continue
                if not self.read_variables:
                    unknown = True  # its value is not read: nothing can be said about it
                    chosen = self.placeholders.get(id(node))
                    out.append(raw[j:i] if chosen is None else _PLACEHOLDERS[chosen])
                    continue
                out.append(raw[j:i])  # kept as written, so no follow-on error about the value
                if not self.lenient:
                    problems.append(
                        node.mark.error(
                            f'environment variable "{name}" is not set (use ${{{name}:-default}} '
                            "for a default)"
                        )
                    )
                continue
            out.append(value)
            used.append(name)
            if j > 0 or not _URL_ORIGIN.fullmatch(value) or raw[i : i + 1] not in _AFTER_ORIGIN:
                found.append(value)
        out.append(raw[i:])
        if record:
            if problems or unknown:
                self.unresolved.add(id(node))
            self.errors.extend(problems)
            self.secrets.update(value for value in found if value)
        return "".join(out), tuple(used), bool(found)

    # -- from trees to Python values

    def value(self, node: Node, keys: KeyPath) -> Any:
        """Plain Python values for validation; strings as SourceStr; origins recorded."""
        mark = node.mark
        if isinstance(node, Scalar):
            if node.is_str:
                text, used, secret = self.interpolate(node)
                if not used and _typed(node.text):
                    self.quoted_numbers_seen = True
                if not self.read_variables and id(node) in self.unresolved:
                    self.uncertain.update(self._ancestors)
                self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text, used)
                if secret:
                    self.variables_of[id(node)] = used
                kind = Secret if secret else SourceStr
                if keys[0] == "providers" and len(keys) > 1:
                    label = self.labels.get(keys[:2], "")
                    return kind(text, *mark[1:], mark.display, label, keys[2:])
                return kind(text, *mark[1:], mark.display, "", keys)
            self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text)
            return node.value
        self.origins[keys] = Origin(mark.display, mark.line, mark.column)
        self._ancestors.append(id(node))
        try:
            if isinstance(node, Seq):
                return [self.value(item, (*keys, i)) for i, item in enumerate(node.items)]
            return {key: self.value(child, (*keys, key)) for key, (_, child) in node.items.items()}
        finally:
            self._ancestors.pop()

    def entry_value(self, entry: Node, keys: KeyPath) -> Any:
        """A provider entry's value; inside a disabled one an unset variable is no error."""
        enabled = scalar_at(entry, "enabled")
        self.lenient = enabled is not None and enabled.value is False
        try:
            return self.value(entry, keys)
        finally:
            self.lenient = False

    def entries(self, node: Seq) -> list[tuple[Node, KeyPath, str]]:
        """Each provider entry with its value and a label for messages (addressed by name)."""
        result: list[tuple[Node, KeyPath, str]] = []
        self.origins[("providers",)] = Origin(node.mark.display, node.mark.line, node.mark.column)
        names: dict[str, Scalar] = {}
        for i, entry in enumerate(node.items):
            name = scalar_at(entry, "name")
            key: str | int = i
            label = f"provider #{i + 1}"
            if name is not None and name.is_str and name.value:
                key, used, _ = self.interpolate(name, record=False)
                label = f'provider "{name.value if used else key}"'  # a secret name shows raw
                first = names.setdefault(key, name)
                if first is not name and first.value != name.value:  # equal raw: reported per file
                    self.errors.append(
                        name.mark.error(
                            f"{label}: the same name as the provider at line {first.mark.line} "
                            "once variables are substituted"
                        )
                    )
            self.labels[("providers", key)] = label
            result.append((entry, ("providers", key), label))
        return result

    # -- validation

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
                else self.value(child, (key,))
                for key, (_, child) in tree.items.items()
            }

        manifest: Manifest | None = self.checked(Manifest, data, tree, "")
        return manifest

    def checked(self, model: type[Any], make: Callable[[], Any], tree: Node, label: str) -> Any:
        """``model`` validated from ``make()``; None after recording the located errors.

        Without variable values a value that needs one cannot be judged, but a model still
        needs something of the right shape there: the unset variable stands for a
        placeholder (``_PLACEHOLDERS``, chosen by what the field expects), and the errors of
        that value and the checks over the mappings holding it are not reported.
        """
        for _ in range(len(_PLACEHOLDERS) + 1):
            data = make()
            try:
                validated = model.model_validate(data)
            except ValidationError as e:
                errors = self.located(e, tree, model, label)
                if errors or self.read_variables:
                    self.errors.extend(errors)
                    return None
                if not self.choose_placeholders(e, tree):
                    break
            else:
                if not self.quoted_numbers_seen:  # nothing quoted looks like a number
                    return validated
                quoted = self.quoted_numbers(data, validated, tree, label)
                self.errors.extend(quoted)
                return None if quoted else validated
        self.errors.append(
            tree.mark.error(
                f"{label + ': ' if label else ''}cannot be checked without the values of its "
                "variables; give them defaults (${NAME:-value}) or validate with them set"
            )
        )
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
                and id(node) not in self.unresolved
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
        others = [str(k[1]) for k in self.labels if k != keys and isinstance(k[1], str)]
        if not isinstance(name, str) or not (hint := did_you_mean(name, others)):
            return ""
        return f" (a new provider: an overlay updates one by its exact name; {hint.strip()[1:-1]})"

    def choose_placeholders(self, error: ValidationError, tree: Node) -> bool:
        """Give each unset value that failed the next placeholder; whether any changed."""
        changed = False
        for item in error.errors(include_url=False, include_input=False):
            node = locate(tree, item["loc"], key_of_last=False)[2]
            if node is None or id(node) not in self.unresolved:
                continue
            index = self.placeholders.get(id(node), -1) + 1
            if index < len(_PLACEHOLDERS):
                self.placeholders[id(node)] = index
                changed = True
        return changed

    def provider(self, entry: Node, keys: KeyPath, label: str) -> Any:
        value = self.entry_value(entry, keys)
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
                return first.pop() if first else self.entry_value(entry, keys)

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
        return translate(
            error,
            tree,
            model,
            label,
            unresolved=self.unresolved,
            variables_of=self.variables_of,
            uncertain=self.uncertain,
        )

    def redacted(self, error: ManifestError) -> ManifestError:
        """``error`` as shown: secrets masked, on one line whatever names it quotes."""
        message = printable(redact(error.message, self.secrets))
        return ManifestError(error.path, error.line, error.column, message)


_URL_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@]+")
"""``scheme://host[:port]``, without a user or password: what a URL's variable may show."""
_AFTER_ORIGIN = ("", "/", "?", "#")


def _typed(text: str) -> bool:
    """Whether ``text``, written plain, would read as a number, a boolean or null."""
    try:
        return not isinstance(core_value(text), str)
    except ValueError:  # more digits than int() takes: a number too
        return True


_PLACEHOLDERS = ("https://placeholder.invalid", "0", "false")
"""What an unset variable stands for, in turn, when no value is read: a URL origin, a
number, a boolean (an unset variable in a plain string needs none)."""


_MANIFEST_KEYS = tuple(field_names_by_key(Manifest))
"""The top-level keys of a manifest: a file reached by extends holds at least one."""


def _unusable(file: Path) -> str | None:
    """Why ``file`` cannot be a manifest, or None when it is a regular file."""
    if file.is_file():
        return None
    if file.is_dir():
        return "is a directory"
    return "not a regular file" if file.exists() else "no such file"


# --------------------------------------------------------------------------- entry point


def environments(folder: str | os.PathLike[str]) -> list[str]:
    """The environments of a folder: each ``<env>.yaml`` in it, by name, except test files.

    A file whose top level holds ``tests`` is a ``composer test`` file kept next to the
    manifests, not an environment. A file that cannot be read stays listed: loading it says
    what is wrong.
    """
    found = []
    for file in sorted(Path(folder).glob("*.yaml")):
        try:
            tree, _ = read_yaml(file.name, file)
        except ManifestError:
            tree = None
        if not (isinstance(tree, Map) and "tests" in tree.items):
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
        if not interpolate:
            lookup = Variables({})
        elif variables is not None:
            lookup = Variables(variables)
        else:
            lookup = settings.variables(environ, folder=Path(os.path.dirname(display) or "."))
        roots = (file.parent.resolve(), *(r.resolve() for r in settings.extends_folders))
        session = _Session(lookup, types, roots, read_variables=interpolate)
        with _without_cyclic_gc():
            manifest = _load(session, display, file)
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
    """What provider configs name as secrets however they were written (a DSN's password)."""
    return {
        value
        for config in manifest.providers
        if isinstance(config, Secrets)
        for value in config.secrets()
        if value
    }


def _load(session: _Session, display: str, file: Path) -> Manifest:
    try:
        trees = session.chain(display, file)
    except ManifestError as e:
        raise ManifestError.collect(session.redacted(x) for x in [*session.errors, e]) from e
    manifest = session.validate(merge_chain(trees, session.types))
    if session.errors or manifest is None:
        raise ManifestError.collect(session.redacted(e) for e in session.errors)
    manifest._path = Path(display)
    manifest._secrets = frozenset(session.secrets | _declared_secrets(manifest))
    manifest._origins = dict(session.origins)
    manifest._types = session.types
    manifest._variables = tuple(dict.fromkeys(session.uses))  # a retry reads a value again
    return manifest
