"""From a loaded manifest to a per-branch registry, and onto a branch: the engine.

Every provider a manifest declares is wrapped in a ``ManagedProvider`` before it is registered,
whatever its type and class, so what all providers share behaves the same for a built-in type
and a third-party one: a disabled provider is never built, a false ``when`` means the provider
is not called and leaves no row (ADR D2), and its optional hooks (``composer.hooks``) are
looked up once, here. Every option beyond ADR-0008 (``timeout_s``, ``cache``, ``wrap`` per
provider; the ``runtime`` section) is applied here too, and only when the manifest asks.
``ManifestRegistry`` is the ADR registry plus the providers' lifecycle (``warm_up``,
``aclose``, ``async with``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import weakref
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, Unpack, cast

from composer._admission import Dedup, ranked_report
from composer._closing import AsyncCloseable
from composer.caching import (
    MISS,
    ContextCache,
    InProcessCache,
    KeyScope,
    RedisCache,
    key_scope,
    read_values,
)
from composer.catalog import ProviderTypes, catalog_of
from composer.errors import PluginError, ProviderError
from composer.hooks import (
    PROVIDER_HOOKS,
    CacheKey,
    Closeable,
    Constant,
    Progress,
    WarmUp,
    Writeback,
    WritebackCount,
    check_hooks,
)
from composer.manifest.models import WRAP_NAMES, Manifest, ProviderConfig
from composer.manifest.source import Secret
from composer.observe.switch import metrics_wanted, traces_wanted
from composer.outcomes import (
    CURRENT_TURN,
    EXPLAIN,
    Ranking,
    Turn,
    current_turn,
    note,
    note_degraded,
)
from composer.plugin import BuildContext
from composer.principal import principal_name
from composer.registry import (
    BranchLike,
    Call,
    ContextProvider,
    ContextProviderRegistry,
    GatherMode,
    InstructionLike,
    ProviderReport,
)
from composer.templating import (
    CompiledExpression,
    compile_expression,
    compile_template,
    template_context,
)
from composer.templating.views import branch_view, instruction_view
from composer.tokens import count_tokens

if TYPE_CHECKING:
    from composer.observe.observer import TurnObserver

__all__ = [
    "EngineParts",
    "EnginePlan",
    "ManagedProvider",
    "ManifestRegistry",
    "WritebackResult",
    "attach",
    "build_registry",
    "declared_hooks",
    "manage",
]


logger = logging.getLogger("composer.registry")  # writeback failures log where the ADR's do


class WritebackResult(NamedTuple):
    """What one provider's writeback did: items stored (None: its hook does not say), or the
    first line of its error, secrets masked (``error`` is None when it succeeded); ``cut``:
    how many of the stored items were cut to the provider's size cap (``WritebackCount``)."""

    name: str
    stored: int | None
    error: str | None
    cut: int = 0


class EngineParts(TypedDict, total=False):
    """What the engine adds around a provider, each absent unless the manifest asks."""

    cache: ContextCache | None
    wrap: str | None
    scope: KeyScope | None
    operation: str | None


class EnginePlan:
    """What the engine wraps around one manifest entry, the same on every branch: its config,
    the compiled ``when``, cache key and ``wrap``, its cache and scope, its ``on_failure``
    notice. Made once per loaded manifest (``build_registry``) and shared by the
    ``ManagedProvider`` of that entry on every branch, so a branch holds none of it.
    """

    __slots__ = (
        "_constant",
        "cache",
        "cache_key",
        "config",
        "name",
        "notice",
        "operation",
        "plain",
        "scope",
        "when",
        "wrap",
    )

    def __init__(self, config: ProviderConfig, **parts: Unpack[EngineParts]) -> None:
        self.config = config
        self.name = config.name
        self.operation = parts.get("operation")
        self.cache = parts.get("cache") if config.cache is not None else None
        self.scope = parts.get("scope")
        wrap = parts.get("wrap")
        self.when: CompiledExpression | None = (
            compile_expression(config.when) if config.when else None
        )
        self.cache_key = (
            compile_template(config.cache.key) if config.cache and config.cache.key else None
        )
        self.wrap = compile_template(wrap, WRAP_NAMES) if wrap else None
        self.notice = config.on_failure.notice if config.on_failure is not None else None
        self.plain = (
            self.cache is None
            and self.wrap is None
            and config.timeout_s is None
            and self.notice is None
        )
        """No option applies: the provider's own answer, checked, is the block."""
        self._constant: tuple[str, str] | None = None  # (as the provider gave it, plain str)

    def constant(self, text: str) -> str:
        """A located constant text (a str subclass) as one plain str, made once for the
        entry, so that every branch returns the same object and its count is a lookup, not a
        copy and a hash of the whole text; a Secret is kept as given (masked in reprs)."""
        if type(text) is str or isinstance(text, Secret):
            return text
        known = self._constant
        if known is not None and known[0] is text:
            return known[1]
        plain = str.__str__(text)
        self._constant = (text, plain)
        return plain


class ManagedProvider:
    """One provider as the engine runs it: what every provider shares, applied around it.

    In order: the ``when`` guard (false: not called, no row), the cache (a fresh entry is
    served without a call), the provider's own ``timeout_s``, the protocol check of what it
    returned, then the ``wrap`` around its block. Each is off unless the manifest asks.
    ``operation`` is its type's GenAI operation (``ProviderType.operation``), for its spans.

    What it wraps around the provider is its entry's ``EnginePlan``, shared by every branch
    (``plan``; made here when none is given); a branch's own part is the provider and what
    it says of itself (its hooks, its constant text).
    """

    __slots__ = ("_constant_text", "hooks", "plan", "provider")

    def __init__(
        self,
        provider: ContextProvider,
        config: ProviderConfig,
        *,
        plan: EnginePlan | None = None,
        **parts: Unpack[EngineParts],
    ) -> None:
        if plan is None or plan.config is not config:
            plan = EnginePlan(config, **parts)
        self.provider = provider
        self.plan = plan
        self.hooks = declared_hooks(type(provider))
        constant = cast(Constant, provider).constant_text() if Constant in self.hooks else None
        self._constant_text = None if constant is None else plan.constant(constant)

    @property
    def stable(self) -> bool:
        """Its block cannot change between turns: the manifest says so, or it is a fixed text
        (no wrap: a wrap's nonce changes every turn). ``stable_prefix`` folds these only."""
        plan = self.plan
        stable = plan.config.stable
        if stable is not None:
            return stable
        return self._constant_text is not None and plan.wrap is None

    @property
    def config(self) -> ProviderConfig:
        return self.plan.config

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def operation(self) -> str | None:
        return self.plan.operation

    @property
    def cache(self) -> ContextCache | None:
        return self.plan.cache

    @property
    def scope(self) -> KeyScope | None:
        return self.plan.scope

    @property
    def wrapped(self) -> bool:
        """Whether a ``wrap`` (its own or ``runtime.wrap``) labels its block."""
        return self.plan.wrap is not None

    def guard(self, branch: BranchLike, instruction: InstructionLike) -> bool:
        """The value of ``when`` this turn (True when there is none); raises TemplateError."""
        when = self.plan.when
        if when is None:
            return True
        context = template_context(branch, instruction, provider=self.name)
        return bool(when.evaluate(context))

    async def provide(self, branch: BranchLike, instruction: InstructionLike) -> str | None:
        """None without calling the provider when ``when`` is false (no report row, ADR D2).

        The result is held to the protocol, ``str | None``: anything else raises
        ``ProviderError`` here, inside the registry's containment, so one broken plugin is one
        failed row instead of a turn taken down when the registry counts or renders it (which
        ADR D2 leaves uncontained for bare registries). The value is never converted or shown.
        """
        plan = self.plan
        if plan.when is not None and not self.guard(branch, instruction):
            note(self, "guarded")
            return None
        if plan.plain:  # no option applies: the provider's own answer, checked
            constant = self._constant_text
            if constant is not None:  # a Secret, kept as given, stays masked in reprs
                return constant if type(constant) is str else str.__str__(constant)
            result: object = await self.provider.provide(branch, instruction)
            if result is None or type(result) is str:
                return result
            return self._checked(result)
        if self.cache is None:
            return self._wrapped(await self._call(branch, instruction))
        key = self.key(branch, instruction)
        hit = await self.cache.get(key)
        if hit is not MISS:
            note(self, "cached")
            return self._wrapped(cast("str | None", hit))
        result = await self._call(branch, instruction)
        assert self.config.cache is not None
        turn = current_turn()
        if turn is None or id(self) not in turn.degraded:  # a notice is never cached
            await self.cache.set(key, result, self.config.cache.ttl_s)
        return self._wrapped(result)

    async def _call(self, branch: BranchLike, instruction: InstructionLike) -> str | None:
        if self.plan.notice is None:
            return await self._called(branch, instruction)
        try:
            return await self._called(branch, instruction)
        except Exception as e:  # its notice instead; the registry records how it failed
            logger.warning("context provider %r failed; its notice stands in", self.name)
            note_degraded(self, e)
            return str.__str__(self.plan.notice)

    async def _called(self, branch: BranchLike, instruction: InstructionLike) -> str | None:
        timeout = self.config.timeout_s
        result: object
        if timeout is None:
            result = await self.provider.provide(branch, instruction)
        else:
            try:
                async with asyncio.timeout(timeout):
                    result = await self.provider.provide(branch, instruction)
            except TimeoutError as e:
                raise TimeoutError(f"no answer within {timeout:g} s") from e
        if result is None or type(result) is str:
            return result
        return self._checked(result)

    def _checked(self, result: object) -> str:
        """A result that is not exactly ``str | None``: a subclass of str becomes a plain str
        (it may override what str() or format() do); anything else is this provider's failure."""
        if isinstance(result, str):
            return str.__str__(result)
        raise ProviderError(
            f"provider {self.name!r} returned {type(result).__name__}, not str or None"
        )

    def key(self, branch: BranchLike, instruction: InstructionLike) -> str:
        """This turn's cache key: a digest of everything the result depends on.

        That is the provider's scope (its configuration, in its manifest: ``KeyScope``), the
        running turn's principal, and this turn's request: the manifest's ``key`` template
        when it names one (which narrows what else of the turn counts), else the provider's
        own ``cache_key`` (its rendered query) or the instruction and the branch's name and
        metadata, plus the value of every part of the turn's context that the provider's
        templates read. Hashed, so a key never holds a rendered secret in the clear.
        """
        scope = self.scope
        request: list[Any]
        if self.plan.cache_key is not None:
            context = template_context(branch, instruction, provider=self.name)
            request = [self.plan.cache_key.render(context)]
        else:
            own: Any
            if CacheKey in self.hooks:
                own = cast(CacheKey, self.provider).cache_key(branch, instruction)
            else:
                view = branch_view(branch)
                own = {
                    "instruction": instruction_view(instruction),
                    "branch": {"name": view["name"], "metadata": view["metadata"]},
                }
            request = [own]
            if scope is not None and scope.reads:
                context = template_context(branch, instruction, provider=self.name)
                request.append(read_values(context, scope.reads))
        digest = scope.digest if scope is not None else ""
        raw = json.dumps([digest, principal_name(), request], sort_keys=True, default=str)
        return hashlib.sha256(f"{self.name}\x1f{raw}".encode()).hexdigest()

    def rewrap(self, text: str) -> str:
        """A block the engine re-rendered from the provider's ranking (dedup, fill), inside
        its ``wrap`` as the provider's own block was."""
        return self._wrapped(text) or ""

    def _wrapped(self, text: str | None) -> str | None:
        """The block inside the manifest's ``wrap``; the turn's nonce cannot appear in it."""
        if self.plan.wrap is None or not text:
            return text
        turn = current_turn()
        nonce = turn.nonce if turn is not None else Turn().nonce
        provider = {"name": self.name, "type": self.config.type, "priority": self.config.priority}
        clean = text.replace(nonce, "")
        return self.plan.wrap.render({"provider": provider, "text": clean, "nonce": nonce})

    async def warm_up(self, progress: Progress | None = None) -> Any:
        """The provider's own warm-up, if it declared one (its result, else None)."""
        if WarmUp in self.hooks:
            return await cast(WarmUp, self.provider).warm_up(progress)
        return None

    async def aclose(self) -> None:
        if Closeable in self.hooks:
            await cast(Closeable, self.provider).aclose()

    def __repr__(self) -> str:
        return f"<managed {self.provider!r}>"


class _ManagedWriteback(ManagedProvider):
    """A managed provider that declared ``writeback``: only these get the ADR D7 call."""

    __slots__ = ()

    async def writeback(self, branch: BranchLike, action_responses: list[Any]) -> Any:
        return await cast(Writeback, self.provider).writeback(branch, action_responses)


@functools.lru_cache(maxsize=1024)
def declared_hooks(cls: type) -> frozenset[type]:
    """The optional hooks (``composer.hooks``) that the provider class ``cls`` defines.

    Hooks are methods of the class, so this is answered once per class rather than once per
    branch (a Protocol check is slow, and attach runs for every conversation). A class whose
    hook cannot take the engine's call, or whose ``writeback``, ``warm_up`` or ``aclose`` is
    not ``async def``, is refused with a ``PluginError`` naming it and the hook
    (``composer.hooks.check_hooks``; a refusal is not cached: it is raised again each time).
    """
    return check_hooks(cls, PROVIDER_HOOKS)


def manage(
    provider: ContextProvider,
    config: ProviderConfig,
    *,
    plan: EnginePlan | None = None,
    **parts: Unpack[EngineParts],
) -> ManagedProvider:
    """``provider`` wrapped with what the engine owns (``plan``, the entry's shared plan,
    else one made from ``parts``); its hooks are looked up here."""
    cls = _ManagedWriteback if Writeback in declared_hooks(type(provider)) else ManagedProvider
    return cls(provider, config, plan=plan, **parts)


class ManifestRegistry(ContextProviderRegistry, AsyncCloseable):
    """The ADR-0008 registry of one branch, built from a manifest, plus the providers'
    lifecycle: ``warm_up`` ahead of the first turn and one ``aclose`` for all of them; the
    manifest's ``runtime`` options; failure messages in outcomes masked like every output.

    With ``runtime.report``, ``audit``, ``traces`` or ``metrics`` each turn is also handed to
    the manifest's ``TurnObserver`` (``composer.observe``): the last reports are kept in
    ``history``, and the turn is written, traced and counted. Without them, ``gather`` is the
    ADR's, with one attribute test before it.

    With ``runtime.dedup``, ``runtime.admission: fill`` or ``runtime.explain`` (or inside
    ``composer.outcomes.explain_turns``) a turn asks the ranking providers for their rankings
    and is admitted by ``composer._admission`` (dedup, refit, one explanation per provider);
    otherwise the ADR's admission runs untouched.

    Use it as ``async with build_registry(manifest) as registry:`` (or call ``aclose``): it
    closes the providers it built, never the manifest, whose shared state other registries
    use (``async with manifest:`` closes that).
    """

    def __init__(
        self,
        budget: int,
        managed: list[ManagedProvider],
        *,
        gather: GatherMode = "sequential",
        timeout_s: float | None = None,
        redact: Callable[[str], str] | None = None,
        observer: TurnObserver | None = None,
        placement: str = "adr",
        dedup: Dedup | None = None,
        fill: bool = False,
        explain: bool = False,
    ) -> None:
        super().__init__(budget=budget, gather=gather, timeout_s=timeout_s)
        self.managed = managed
        self.dedup: Dedup | None = dedup
        """``runtime.dedup``: ``exact``, ``near`` or None (off)."""
        self.fill = fill
        """``runtime.admission: fill``: refit a ranking provider's block to what is left."""
        self.explain = explain
        """``runtime.explain``: every turn explains itself (else only inside ``explain_turns``)."""
        self._ranks = dedup is not None or fill
        self.placement = placement
        """``adr`` (ADR-0008 D4) or ``stable_prefix``, which ``prepare_turn`` reads."""
        self.stable_names = _interned(frozenset(p.name for p in managed if p.stable))
        """The providers whose blocks ``stable_prefix`` keeps in the system fold."""
        self.wrapped_names = _interned(frozenset(p.name for p in managed if p.wrapped))
        """The providers whose blocks their ``wrap`` labels (``stable_prefix`` does not)."""
        self._redact = redact
        self.observer = observer
        self._history: deque[ProviderReport] | None = None
        """Made on the first report it keeps: a branch that keeps none has none."""
        for provider in managed:
            self.register(
                provider,
                priority=provider.config.priority,
                max_tokens=provider.config.max_tokens,
                name=provider.name,
            )

    @property
    def history(self) -> list[ProviderReport]:
        """This branch's last ``runtime.report.history`` reports, oldest first (empty when off)."""
        return list(self._history) if self._history is not None else []

    def gather(
        self, branch: BranchLike, instruction: InstructionLike
    ) -> Coroutine[Any, Any, ProviderReport]:
        """ADR-0008's gather; the turn handed to the observer when the manifest asks for one.

        Without an observer this is the ADR registry's own coroutine, not one awaiting it:
        a turn of small static providers costs a few microseconds, and a frame is one of them.
        """
        if self.observer is None:
            return super().gather(branch, instruction)
        return self._observed(branch, instruction, self.observer)

    async def _observed(
        self, branch: BranchLike, instruction: InstructionLike, observer: TurnObserver
    ) -> ProviderReport:
        report = await observer.observe(
            super().gather, branch, instruction, self.managed, self.gather_mode == "sequential"
        )
        if observer.history:
            history = self._history
            if history is None:
                history = self._history = deque(maxlen=observer.history)
            history.append(report)
        return report

    def _new_turn(self) -> Turn:
        """A turn that asks for rankings when dedup, fill or an explanation needs them."""
        turn = Turn()
        if self.explain or EXPLAIN.get():
            turn.explain = True
            turn.rankings = {}
        elif self._ranks:
            turn.rankings = {}
        return turn

    def _ranked_report(self, turn: Turn, calls: list[Call]) -> ProviderReport:
        """Admission with dedup, fill and explanations (``composer._admission``), with the
        turn current again so that a re-rendered block is wrapped with its nonce."""
        rankings = turn.rankings or {}

        def ranking_of(entry: Any) -> Ranking | None:
            provider = entry.provider
            inner = provider.provider if isinstance(provider, ManagedProvider) else provider
            return rankings.get(id(inner))

        def rewrap_of(entry: Any) -> Callable[[str], str]:
            provider = entry.provider
            return provider.rewrap if isinstance(provider, ManagedProvider) else str

        token = CURRENT_TURN.set(turn)
        try:
            return ranked_report(
                self._entries,
                calls,
                turn,
                self.budget,
                dedup=self.dedup,
                fill=self.fill,
                count_tokens=count_tokens,
                ranking_of=ranking_of,
                rewrap_of=rewrap_of,
                describe_error=self.describe_error,
            )
        finally:
            CURRENT_TURN.reset(token)

    async def writeback_results(
        self, branch: BranchLike, action_responses: list[Any]
    ) -> list[WritebackResult]:
        """ADR D7's walk (each writeback hook in registration order, each failure contained
        and logged as ``gather_writeback`` does), with what became of each: how many items it
        stored (when its hook says) or its error's first line, masked. For a server, which
        must not tell an agent its tool results were kept when they were not."""
        results: list[WritebackResult] = []
        for provider in self.managed:
            if Writeback not in provider.hooks:
                continue
            try:
                stored = await cast(Writeback, provider).writeback(branch, action_responses)
            except Exception as e:
                logger.warning(
                    "context provider %r writeback raised; skipping", provider.name, exc_info=True
                )
                results.append(WritebackResult(provider.name, None, self.describe_error(e)))
                continue
            if isinstance(stored, WritebackCount):
                results.append(WritebackResult(provider.name, int(stored), None, stored.cut))
                continue
            count = stored if type(stored) is int else None
            results.append(WritebackResult(provider.name, count, None))
        return results

    def describe_error(self, error: BaseException) -> str:
        line = super().describe_error(error)
        return self._redact(line) if self._redact is not None else line

    async def warm_up(
        self, progress: Callable[[str], Progress | None] | None = None
    ) -> dict[str, Exception]:
        """Warm every provider that has the hook; the failures by provider name.

        A failure is not raised: the provider meets the same problem in its turn, where the
        registry contains it (ADR D2).
        """
        failures: dict[str, Exception] = {}
        for provider in self.managed:
            try:
                await provider.warm_up(progress(provider.name) if progress else None)
            except Exception as e:
                failures[provider.name] = e
        return failures

    async def aclose(self) -> None:
        """Close every provider; all are tried, the first failure is raised afterwards."""
        first: Exception | None = None
        for provider in self.managed:
            try:
                await provider.aclose()
            except Exception as e:
                first = first or e
        if first is not None:
            raise first


_NAMES: weakref.WeakValueDictionary[frozenset[str], frozenset[str]] = weakref.WeakValueDictionary()


def _interned(names: frozenset[str]) -> frozenset[str]:
    """One set of names shared by every registry that has the same (branches of a manifest)."""
    return _NAMES.setdefault(names, names)


def build_registry(manifest: Manifest, *, types: ProviderTypes | None = None) -> ManifestRegistry:
    """A new registry with the manifest's enabled providers, in declaration order.

    Each call returns a fresh registry (one per branch); heavy state such as a corpus index is
    shared through ``BuildContext.shared`` between the registries built from one loaded
    manifest. Types come from ``types``, else those that validated the manifest, else every
    installed type; entry points are never rescanned here.
    """
    catalog = types if types is not None else catalog_of(manifest)
    if catalog is None:
        catalog = ProviderTypes.installed()
    context = BuildContext(manifest)
    managed = [_built(catalog, config, context) for config in manifest.providers if config.enabled]
    runtime = manifest.runtime
    return ManifestRegistry(
        manifest.budget,
        managed,
        gather=runtime.gather,
        timeout_s=runtime.timeout_s,
        redact=manifest.redact,
        observer=_observer_of(context),
        placement=runtime.placement,
        dedup=runtime.dedup,
        fill=runtime.admission == "fill",
        explain=runtime.explain,
    )


def _built(
    catalog: ProviderTypes, config: ProviderConfig, context: BuildContext
) -> ManagedProvider:
    """One provider entry built by its type and wrapped by the engine. A provider class the
    engine refuses (``declared_hooks``) is a ``PluginError`` at the entry's line."""
    ptype = catalog.get(config.type)
    provider = ptype.factory(config, context)
    try:
        return manage(provider, config, plan=_plan_of(config, context, ptype.operation))
    except PluginError as e:
        origin = context.manifest.origin("providers", config.name)
        where = f"{origin.location}: " if origin is not None else ""
        raise PluginError(
            context.manifest.redact(f"{where}provider {config.name!r} (type {config.type}): {e}"),
            entry_point=e.entry_point,
        ) from e


def _plan_of(config: ProviderConfig, context: BuildContext, operation: str | None) -> EnginePlan:
    """The entry's ``EnginePlan``, made once per loaded manifest and shared by its branches."""

    def make() -> EnginePlan:
        return EnginePlan(
            config,
            cache=_cache_of(config, context),
            wrap=config.wrap or context.manifest.runtime.wrap,
            scope=_scope_of(config, context),
            operation=operation,
        )

    plan = context.shared(f"composer.build.plan\x1f{config.name}", make)
    return plan if plan.config is config else make()


def _observer_of(context: BuildContext) -> TurnObserver | None:
    """The manifest's one ``TurnObserver`` (shared by its registries), when its ``runtime``
    asks for history, an audit log, traces or metrics; imported only then."""
    runtime = context.manifest.runtime
    history = runtime.report.history if runtime.report is not None else 0
    metrics = metrics_wanted(runtime.metrics)
    traces = traces_wanted(runtime.traces)
    if not (history or runtime.audit is not None or traces or metrics):
        return None
    from composer.observe.observer import TurnObserver

    return context.shared("observe", lambda: TurnObserver(context.manifest))


def _scope_of(config: ProviderConfig, context: BuildContext) -> KeyScope | None:
    """The provider's cache scope (``composer.cachekeys``), found once per loaded manifest."""
    if config.cache is None:
        return None
    manifest = context.manifest
    return context.shared(f"cache-scope:{config.name}", lambda: key_scope(config, manifest.path))


def _cache_of(config: ProviderConfig, context: BuildContext) -> ContextCache | None:
    """The provider's cache, one per provider name per loaded manifest (shared by branches);
    in Redis when ``runtime.cache`` says so, else in this process.

    A Redis key starts with the manifest's ``prefix`` and then the provider's scope digest,
    so two manifests, environments or versions of one provider never share an entry
    whatever the prefix says (and a rolling deploy never serves the old version's blocks).
    """
    if config.cache is None:
        return None
    backend = context.manifest.runtime.cache
    if backend is not None:
        redis = backend.redis
        scope = _scope_of(config, context)
        assert scope is not None
        prefix = f"{redis.prefix}{scope.digest[:32]}:{config.name}:"
        make: Callable[[], ContextCache] = functools.partial(
            RedisCache, redis.url, prefix=prefix, timeout_s=redis.timeout_s
        )
    else:
        make = functools.partial(InProcessCache, config.cache.max_entries)
    return context.shared(f"cache:{config.name}", make)


def attach(
    branch: Any, manifest: Manifest, *, types: ProviderTypes | None = None
) -> ManifestRegistry:
    """Give ``branch`` its own new registry built from ``manifest``, replacing any it had.

    Works on a ``composer.Branch`` and on a ``lionagi`` Branch alike: both keep the registry
    in ``_context_providers``, which their turn paths read (ADR-0008 D1, D4).
    """
    registry = build_registry(manifest, types=types)
    branch._context_providers = registry
    return registry
