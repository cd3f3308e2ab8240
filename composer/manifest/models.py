"""Pydantic models of a manifest. No I/O here: ``loader.py`` reads files and builds these.

A provider entry is validated by the config model of its type (the loader finds it in a
``composer.catalog.ProviderTypes``, which it binds to the manifest it makes: read it with
``catalog_of``, as these models know nothing of the catalog); the fields every type shares
live in ``ProviderConfig``. Unknown keys are errors everywhere.
"""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    create_model,
    model_serializer,
    model_validator,
)

from composer._closing import AsyncCloseable
from composer.hooks import Closeable
from composer.manifest.dsn import dsn_secrets
from composer.manifest.source import MASK, KeyPath, Origin, Secret, SourceStr, VariableUse
from composer.templating import Expression, Template, TemplateShape, template_check_exact

__all__ = [
    "DEFAULT_BUDGET",
    "WRAP_NAMES",
    "WRAP_SHAPES",
    "AuditConfig",
    "AuditPostgres",
    "CacheBackendConfig",
    "CacheConfig",
    "Manifest",
    "ManifestPath",
    "OnFailureConfig",
    "ProviderConfig",
    "RedisCacheConfig",
    "ReportConfig",
    "RuntimeConfig",
    "StrictModel",
    "WrapTemplate",
    "field_names_by_key",
    "manifest_model",
    "map_strings",
    "redact",
]

_SHORT_SECRET = 4

DEFAULT_BUDGET = 2000
"""ADR-0008's default budget; the same number as ``composer.registry.DEFAULT_BUDGET`` (a test
holds them equal), written twice so that the models need nothing of the runtime."""


class StrictModel(BaseModel):
    """Base of every manifest model: unknown keys are errors; input never echoed in errors;
    a ``Secret`` given to a field stays one (pydantic would make it a plain ``str``), so that
    ``repr`` of the model and its serialisation show ``***`` in its place; any other string
    read from a file stays a ``SourceStr``, so that a template knows where it was written."""

    # coerce_numbers_to_str: a str field given ``1.10`` receives the text "1.10" (the loader's
    # numbers remember their source text), not a float turned back into "1.1".
    model_config = ConfigDict(
        extra="forbid", hide_input_in_errors=True, frozen=True, coerce_numbers_to_str=True
    )

    @model_validator(mode="wrap")
    @classmethod
    def _secrets_stay_secret(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if isinstance(data, Mapping) and isinstance(model, cls):
            names = field_names_by_key(cls)
            for key, given in data.items():
                name = names.get(key)
                if name is None or not isinstance(given, str | Mapping | list):
                    continue  # a number or a bool read from a file is what pydantic keeps
                value = getattr(model, name)
                if type(value) is str:  # the common case, without a call
                    if isinstance(given, SourceStr) and value == given:
                        object.__setattr__(model, name, given)  # frozen: set once, here
                    continue
                kept = _keep_secrets(given, value)
                if kept is not value:
                    object.__setattr__(model, name, kept)
        return model

    @model_serializer(mode="wrap")
    def _secrets_masked(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, field in type(self).model_fields.items():
                key = field.alias if info.by_alias and field.alias else name
                if key in data:
                    data[key] = _masked(getattr(self, name), data[key])
        return data


@functools.cache
def field_names_by_key(model: type[BaseModel]) -> dict[str, str]:
    """A model's fields by the key a manifest writes (the alias, else the name)."""
    return {field.alias or name: name for name, field in model.model_fields.items()}


def _keep_secrets(given: Any, validated: Any) -> Any:
    """``validated`` with each string that was a ``SourceStr`` (a ``Secret`` among them) in
    ``given`` that string again."""
    if isinstance(given, SourceStr) and type(validated) is str and validated == given:
        return given
    if isinstance(given, Mapping) and type(validated) is dict:
        return {key: _keep_secrets(given.get(key), value) for key, value in validated.items()}
    if isinstance(given, list) and type(validated) is list and len(given) == len(validated):
        return [_keep_secrets(g, v) for g, v in zip(given, validated, strict=True)]
    return validated


def _masked(value: Any, dumped: Any) -> Any:
    """``dumped`` (the serialised ``value``) with every ``Secret`` in ``value`` as ``***``."""
    if isinstance(value, Secret):
        return MASK
    if isinstance(value, Mapping) and isinstance(dumped, dict):
        return {key: _masked(value.get(key), item) for key, item in dumped.items()}
    if isinstance(value, list | tuple) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_masked(v, d) for v, d in zip(value, dumped, strict=True)]
    return dumped


def _resolve_path(value: Any) -> Any:
    if isinstance(value, SourceStr):
        path = Path(value)
        return path if path.is_absolute() else (value.path.parent / path)
    return value


ManifestPath = Annotated[Path, BeforeValidator(_resolve_path)]
"""A filesystem path; relative paths are relative to the manifest file that holds them."""


WRAP_NAMES = frozenset({"provider", "text", "nonce"})
"""What a ``wrap`` template sees: the provider (name, type, priority), its text, the nonce."""

WRAP_SHAPES = {
    "provider": TemplateShape.record(
        name=TemplateShape.of(str), type=TemplateShape.of(str), priority=TemplateShape.of(int)
    ),
    "text": TemplateShape.of(str),
    "nonce": TemplateShape.of(str),
}

WrapTemplate = Annotated[str, template_check_exact(WRAP_NAMES, shapes=WRAP_SHAPES)]


class CacheConfig(StrictModel):
    """Serve a provider's result again for ``ttl_s`` seconds instead of calling it."""

    ttl_s: float = Field(gt=0, le=86_400, description="How long an entry is served.")
    key: Template | None = Field(
        None,
        description=(
            "What makes two turns the same for this provider (a template), narrowing the "
            "default: the provider's rendered query or request (else the instruction and the "
            "branch's name and metadata) plus every part of the turn its templates read. "
            "Always added: the provider's configuration, the manifest and the principal."
        ),
    )
    max_entries: int = Field(
        1024, ge=1, le=1_000_000, description="Entries kept (least recently used go first)."
    )


class OnFailureConfig(StrictModel):
    """A degrade notice: the model is told a source is missing, never shown healthy silence."""

    notice: str = Field(
        min_length=1,
        description="The block in place of the provider's, e.g. \"The status service did not "
        'answer; do not assume there are no incidents."',
    )


class ProviderConfig(StrictModel):
    """Fields every provider entry has; each type's model adds its own and narrows ``type``."""

    name: str = Field(min_length=1, description="Unique in the manifest; the report's name.")
    type: str = Field(description="The provider type (built-in or from an entry-point plugin).")
    priority: int = Field(
        0,
        description=(
            "Admission order under budget pressure: HIGHER numbers are admitted first "
            "(ADR-0008 D3). Rendering order is always declaration order."
        ),
    )
    max_tokens: int | None = Field(
        None,
        ge=0,
        description=(
            "Per-provider cap: a result with more tokens is skipped whole, never truncated. "
            "0 or null means no cap (ADR-0008 D3)."
        ),
    )
    enabled: bool = Field(True, description="false leaves the provider out of the registry.")
    when: Expression | None = Field(
        None,
        description=(
            "Optional Jinja expression; when it is false the provider does no work and "
            "returns nothing, so it leaves no row in the report."
        ),
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description=(
            "Beyond ADR-0008: cancel the provider after this many seconds and record it "
            "failed (outcome `timeout`). Default: no limit (the ADR's)."
        ),
    )
    cache: CacheConfig | None = Field(
        None,
        description=(
            "Beyond ADR-0008: serve a fresh earlier result without calling the provider "
            "(outcome `cached`); failures and timeouts are never cached."
        ),
    )
    wrap: WrapTemplate | None = Field(
        None,
        description=(
            "Beyond ADR-0008: a template around this provider's block, applied before "
            "counting; sees `provider`, `text` and a per-turn random `nonce` (text containing "
            "the nonce has it removed). Default: `runtime.wrap`, else the raw block."
        ),
    )
    on_failure: OnFailureConfig | None = Field(
        None,
        description=(
            "Beyond ADR-0008: what the block says when the provider fails or times out, "
            "instead of nothing (counted and admitted like any block; the outcome stays "
            "`failed` or `timeout`)."
        ),
    )
    stable: bool | None = Field(
        None,
        description=(
            "With `runtime.placement: stable_prefix`: true keeps this provider's block in the "
            "system fold (its text does not change between turns), false places it with the "
            "turn. Default: stable only for a fixed text (a static provider without "
            "templates)."
        ),
    )


class RedisCacheConfig(StrictModel):
    """Where a shared cache lives in Redis."""

    url: str = Field(
        min_length=1,
        description="redis:// or rediss:// URL (needs the redis extra); a password goes in ${VAR}.",
    )
    prefix: str = Field(
        "composer:",
        description=(
            "Start of every key, followed by a digest of the provider's configuration and "
            "manifest, so manifests, environments and versions never share an entry."
        ),
    )
    timeout_s: float = Field(
        0.25,
        gt=0,
        le=10,
        description="Longest wait for Redis; past it the cache is skipped and the provider called.",
    )


class CacheBackendConfig(StrictModel):
    """Where the providers' `cache` entries live."""

    redis: RedisCacheConfig = Field(
        description="Shared by every process and machine that uses the same server and prefix."
    )


class ReportConfig(StrictModel):
    """What a branch keeps of its past turns."""

    history: int = Field(
        0,
        ge=0,
        le=10_000,
        description=(
            "Keep the last N reports of each branch (`registry.history`, "
            "`composer.observe.report_history(branch)`); 0 keeps none beyond `last_context_report`, as ADR-0008."
        ),
    )


class AuditPostgres(StrictModel):
    """An audit table in PostgreSQL: every replica writes to one, read as one."""

    dsn: str = Field(
        min_length=1,
        repr=False,  # a repr of the manifest never shows it, whatever it holds
        description=(
            "libpq URL or key=value string; give the password through ${VAR} (its password, "
            "user and options are masked wherever shown, however written)."
        ),
    )
    db_schema: str = Field(
        "composer",
        alias="schema",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="The schema of the table `audit_turns`; both are created on first use.",
    )
    max_age_days: float = Field(
        30.0,
        gt=0,
        le=36_500,
        description=(
            "This writer's rows older than this are deleted (checked once a minute; ages by "
            "the server's clock)."
        ),
    )
    max_rows: int = Field(
        1_000_000,
        ge=1,
        description=(
            "At most this many rows of this writer are kept; its oldest beyond it are deleted."
        ),
    )
    writer: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description=(
            "Whose rows these are: retention deletes only its writer's rows, and replicas "
            "with one writer keep max_rows between them. Default: the manifest's path as "
            "the process loaded it, so replicas started alike are one writer; name one when "
            "their paths differ, or when two applications load the same path."
        ),
    )
    connect_timeout_s: float = Field(
        5.0,
        gt=0,
        le=60,
        description="Longest wait to connect or write; past it the batch's lines are lost (counted).",
    )


class AuditConfig(StrictModel):
    """One JSON line per turn, written off the turn's path, to one sink: a file, a PostgreSQL
    table or standard output."""

    path: ManifestPath | None = Field(
        None,
        description=(
            "The JSON Lines file, relative to this manifest; created with mode 0600. Processes "
            "that share a file share its rotation: give each process its own."
        ),
    )
    postgres: AuditPostgres | None = Field(
        None,
        description=(
            "A table shared by every process and replica: `{dsn: ..., schema: ...}` (needs the "
            "postgres extra); `composer audit list DSN` reads it."
        ),
    )
    stdout: bool = Field(
        False,
        description="One line per turn on standard output, for a log shipper to collect.",
    )
    keep_text: bool = Field(
        False,
        description=(
            "Also write the instruction, the system text and each admitted block's text "
            "(secrets masked). Default: their SHA-256 and token counts only."
        ),
    )
    max_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Rotate the file when the next lines would take it past this size.",
    )
    backups: int = Field(
        3,
        ge=1,
        le=100,
        description="Rotated files kept (`turns.jsonl.1` the newest); the oldest is deleted.",
    )
    queue: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description=(
            "Lines waiting for the writer at most; past it a turn's line is dropped and "
            "counted, the turn never waits."
        ),
    )

    @model_validator(mode="after")
    def _one_sink(self) -> AuditConfig:
        given = [self.path is not None, self.postgres is not None, self.stdout]
        if sum(given) != 1:
            raise ValueError("give exactly one of path, postgres or stdout: true")
        return self

    def secrets(self) -> list[str]:
        """The DSN's password, user and options, secrets however they were written."""
        return dsn_secrets(self.postgres.dsn) if self.postgres is not None else []


class RuntimeConfig(StrictModel):
    """Opt-in runtime features beyond ADR-0008; left out, the behaviour is the ADR's exactly."""

    placement: Literal["adr", "stable_prefix"] = Field(
        "adr",
        description=(
            "Where blocks go: `adr` folds all into the system text (ADR-0008 D4); "
            "`stable_prefix` folds only stable blocks there and hands the others over as a "
            "context block for the current turn, so the system text and history stay a "
            "byte-identical prefix between turns (a provider's prompt cache can serve them); "
            "that block is an envelope with a per-turn nonce, each block in it labelled with "
            "its provider and the nonce, and tags forged in a block's text escaped."
        ),
    )
    gather: Literal["sequential", "concurrent"] = Field(
        "sequential",
        description=(
            "`concurrent` starts every provider at once; results are admitted exactly as the "
            "sequential pass (ADR-0008 D2) would admit them."
        ),
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description=(
            "One deadline for the whole gather: providers still running are cancelled and "
            "recorded failed (outcome `timeout`)."
        ),
    )
    wrap: WrapTemplate | None = Field(
        None,
        description="The default `wrap` of every provider that has none of its own.",
    )
    dedup: Literal["exact", "near"] | None = Field(
        None,
        description=(
            "Inject one fact once: a passage, memory item or paragraph whose text was already "
            "admitted from a higher-priority provider (or earlier in the same block) is removed "
            "and the block re-rendered before it is counted, so the tokens saved go to the "
            "budget. Texts are compared case-folded without punctuation; `exact` drops equal "
            "words, `near` also texts whose 3-word shingles have a Jaccard similarity of at "
            "least 0.8. The explanation names the provider whose copy was kept."
        ),
    )
    admission: Literal["adr", "fill"] = Field(
        "adr",
        description=(
            "`adr`: a block that does not fit what is left of the budget is skipped whole "
            "(ADR-0008 D3). `fill`: a ranking provider's block (file_corpus, memory, a plugin "
            "that reports its ranking) is refitted to what is left, its best whole passages "
            "first, and fires with a `refitted` note; other providers keep the ADR's rule."
        ),
    )
    explain: bool = Field(
        False,
        description=(
            "Every turn explains itself: each ranking provider also searches twice as deep "
            "and the report lists every candidate it considered with its score, tokens and "
            "fate (admitted, below_min_score, beyond_top_k, cut_to_fit, duplicate, "
            "lost_with_block), and for a provider lost to the budget what it needed, what was "
            "left and who took the rest. Costs a second search per ranking provider; "
            "`composer preview --explain` does the same for one turn."
        ),
    )
    cache: CacheBackendConfig | None = Field(
        None,
        description=(
            "Where provider caches live: left out, in this process (each provider's "
            "`max_entries`); `{redis: {url: ...}}` shares them between processes and machines."
        ),
    )
    report: ReportConfig | None = Field(
        None, description="Keep each branch's last reports: `{history: N}`."
    )
    audit: AuditConfig | None = Field(
        None,
        description=(
            "Write one JSON line per turn (outcomes, budget, tokens, each admitted block's "
            "SHA-256) to a file (`{path: turns.jsonl}`), a PostgreSQL table "
            "(`{postgres: {dsn: ...}}`) or standard output (`{stdout: true}`); read a file or "
            "a table with `composer audit`."
        ),
    )
    traces: bool = Field(
        False,
        description=(
            "One OpenTelemetry span per turn and one child per provider (needs the otel extra "
            "and an SDK configured by the application; composer serve with OTEL_* variables "
            "traces every turn whatever this says)."
        ),
    )
    metrics: bool = Field(
        False,
        description=(
            "Prometheus metrics of providers, turns and reloads in prometheus_client's default "
            "registry (needs the metrics extra)."
        ),
    )


class Manifest(StrictModel, AsyncCloseable):
    """A validated manifest, after ``extends`` and overlays were applied."""

    version: Literal[1] = Field(description="Manifest format version; must be 1.")
    budget: int = Field(
        DEFAULT_BUDGET,
        ge=0,
        description="Total tokens of injected context per turn (ADR-0008 D3).",
    )
    extends: str | None = Field(
        None,
        description=(
            "A base manifest this one overlays, relative to this file; within the folder of "
            "the manifest loaded unless COMPOSER_EXTENDS_ROOTS lists its folder."
        ),
    )
    providers: list[SerializeAsAny[ProviderConfig]] = Field(default_factory=list)
    runtime: RuntimeConfig = Field(
        default_factory=RuntimeConfig,
        description=(
            "Opt-in runtime features beyond ADR-0008; left out, the behaviour is the ADR's exactly."
        ),
    )

    # What the loader knows beyond the fields, set in one call (``_bind``); empty for a
    # manifest built in code.
    _path: Path | None = PrivateAttr(None)
    _secrets: frozenset[str] = PrivateAttr(frozenset())
    _shared: dict[str, Any] = PrivateAttr(default_factory=dict)
    _origins: dict[KeyPath, Origin] = PrivateAttr(default_factory=dict)
    _types: object = PrivateAttr(None)  # a composer.catalog.ProviderTypes: ``catalog_of``
    _variables: tuple[VariableUse, ...] = PrivateAttr(())

    def _bind(
        self,
        *,
        path: Path,
        secrets: Iterable[str],
        origins: Mapping[KeyPath, Origin],
        types: object,
        variables: Iterable[VariableUse],
    ) -> None:
        """Record where this manifest came from, for ``composer.manifest.loader`` only: the
        file, the values to mask, where each value was written, the provider types that
        validated it (``composer.catalog.catalog_of``; the models know nothing of the
        catalog) and the ``${VAR}`` it reads, once each, in file order."""
        self._path = path
        self._secrets = frozenset(secrets)
        self._origins = dict(origins)
        self._types = types
        self._variables = tuple(dict.fromkeys(variables))

    @property
    def path(self) -> Path | None:
        """The file this manifest was loaded from (the overlay, when it extends another)."""
        return self._path

    @property
    def shared(self) -> dict[str, Any]:
        """Heavy provider state (an index, a client) shared by every registry built from it."""
        return self._shared

    @property
    def types(self) -> Any:
        """Deprecated: ``composer.catalog.catalog_of(manifest)``, which is typed. The provider
        types that validated this manifest (None when not loaded from a file)."""
        return self._types

    async def aclose(self) -> None:
        """Close the shared state that holds resources (an HTTP pool, a store), then forget it.

        ``async with load_manifest(...) as manifest:`` calls it on the way out; registries
        built from the manifest should be closed first.

        Everything is closed at once, so that several slow closes (MCP servers that take a
        second to stop) cost the slowest, not their sum; the first failure is raised after all
        were tried. Registries built afterwards make their shared state again.
        """
        shared = list(self._shared.values())
        self._shared.clear()
        closing = [value.aclose() for value in shared if isinstance(value, Closeable)]
        results = await asyncio.gather(*closing, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    @property
    def origins(self) -> Mapping[KeyPath, Origin]:
        """Where every value came from, keyed like ``("providers", "status", "request", "url")``.

        Providers are addressed by name, list items by index, after overlays were applied, so
        each origin names the file (base or overlay) that set the final value.
        """
        return MappingProxyType(self._origins)

    @property
    def variables(self) -> tuple[VariableUse, ...]:
        """Every ``${NAME}`` the effective manifest reads, in file order, with where it stands."""
        return self._variables

    def origin(self, *keys: str | int) -> Origin | None:
        """The origin of the value at ``keys`` (e.g. ``origin("providers", "status")``), if any."""
        return self._origins.get(tuple(keys))

    def redact(self, text: str) -> str:
        """``text`` with every value that came from a ``${VAR}`` replaced by ``***``."""
        return redact(text, self._secrets)

    @property
    def secrets(self) -> frozenset[str]:
        """What ``redact`` masks: for masking that outlives this manifest (a server's log
        lines after a reload mask the secrets of every manifest it has served)."""
        return self._secrets


def map_strings(data: Any, change: Callable[[str], str], *, keys: bool = False) -> Any:
    """``data`` (a JSON value) with ``change`` applied to every string value in it, and with
    ``keys`` to every key too (a client's metadata, whose keys are data; a document's keys are
    its own)."""
    if isinstance(data, str):
        return change(data)
    if isinstance(data, dict):
        return {
            change(key) if keys else key: map_strings(value, change, keys=keys)
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [map_strings(value, change, keys=keys) for value in data]
    return data


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``, longest first.

    Case is ignored, and a secret is masked however its characters were escaped on the way
    out: percent-encoded (whether a URL encoder left ``/`` or ``+`` as they are or not),
    form-encoded (``+`` for a space, as httpx encodes ``params``) or JSON-escaped (``\\"``,
    ``\\\\``, ``\\u00e9``), so a secret survives neither a URL parser that lower-cases a
    host nor a serialiser. A secret shorter than 4 characters is masked only where it stands
    as a whole word, so that ``TOKEN=x`` does not turn every "x" of a message into "***".
    """
    for pattern in _secret_patterns(frozenset(secrets)):
        text = pattern.sub(MASK, text)
    return text


@functools.lru_cache(maxsize=256)
def _secret_patterns(secrets: frozenset[str]) -> tuple[re.Pattern[str], ...]:
    """One pattern per secret, longest first (made once per set: a manifest's set masks every
    log line and span)."""
    ordered = sorted((s for s in secrets if s), key=lambda s: (-len(s), s))
    return tuple(re.compile(_spelled(secret), re.IGNORECASE) for secret in ordered)


def _spelled(secret: str) -> str:
    """A regex for ``secret`` in which each character an encoder may escape matches its
    escapes too: its UTF-8 bytes as ``%XX``, ``+`` for a space, its JSON escapes."""
    parts = []
    for char in secret:
        encoded = char.encode("utf-8", "surrogatepass")
        percent = "".join(f"%{byte:02X}" for byte in encoded)
        if quote(encoded, safe="") == char:  # a letter, a digit or -_.~: never escaped
            parts.append(re.escape(char))
            continue
        units = char.encode("utf-16-le", "surrogatepass")
        unicode = "".join(f"\\u{units[i + 1]:02x}{units[i]:02x}" for i in range(0, len(units), 2))
        forms = {char, percent, json.dumps(char)[1:-1], unicode}
        forms |= {" ": {"+"}, "/": {"\\/"}}.get(char, set())
        ordered = sorted(forms, key=lambda f: (-len(f), f))
        parts.append("(?:" + "|".join(re.escape(form) for form in ordered) + ")")
    pattern = "".join(parts)
    if len(secret) < _SHORT_SECRET:
        pattern = rf"(?<![\w]){pattern}(?![\w])"
    return pattern


def manifest_model(configs: Iterable[type[ProviderConfig]]) -> type[Manifest]:
    """A Manifest model whose providers are a union of ``configs`` discriminated on ``type``.

    Used for ``composer schema``; the loader validates each entry by its own type instead, so
    an unknown type can be reported with the list of known ones.
    """
    members = tuple(configs)
    item: Any
    if not members:
        item = ProviderConfig
    elif len(members) == 1:
        item = members[0]
    else:
        union = functools.reduce(operator.or_, members)
        try:
            item = Annotated[union, Field(discriminator="type")]
            create_model("_Probe", providers=(list[item], ...))
        except Exception:  # a plugin whose ``type`` is not a Literal: a plain union still works
            item = union
    providers_field: Any = (
        list[item],
        Field(
            default_factory=list,
            description=(
                "Context providers in declaration (rendering) order; each entry's `type` "
                "selects its fields."
            ),
        ),
    )
    model: type[Manifest] = create_model(
        "Manifest", __base__=Manifest, __doc__=Manifest.__doc__, providers=providers_field
    )
    return model
