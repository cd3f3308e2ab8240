"""The optional hooks a provider, or a piece of shared provider state, may declare.

ADR-0008 requires only ``provide``. Everything else a provider can do is one of these
Protocols, checked once when the engine wraps the provider (``composer.build``), never probed
with ``getattr`` on each call. Each hook a class declares must take the call the engine makes,
the one its Protocol spells (every parameter the Protocol lists is passed, by position; extra
optional parameters, ``*args`` and ``**kwargs`` are fine), and the three that the engine
awaits (``writeback``, ``warm_up``, ``aclose``) must be ``async def``: a class whose hook does
not is refused then, with a ``PluginError`` naming the class and the hook, rather than failing
with a ``TypeError`` at the first turn, the first writeback or at shutdown (``check_hooks``):

* ``Writeback``: ``async writeback(branch, action_responses)``, called after tool calls (ADR D7);
  it may return how many items it stored, an ``int`` or a ``WritebackCount`` that also says
  how many of them it stored cut to its size cap;
* ``WarmUp``: ``async warm_up(progress)``, slow set-up done ahead of the first turn (a corpus
  index); ``preview`` and servers call it, a turn never needs it;
* ``Closeable``: ``async aclose()``, releases what the provider holds (an HTTP client);
* ``CacheKey``: ``cache_key(branch, instruction)``, what makes two turns the same for this
  provider (its rendered query or request), used when its ``cache`` names no ``key``;
* ``DisplayQuery``: ``display_query(branch, instruction)``, the turn's query as people may see
  it (a URL without query values or headers), which traces record (masked) instead of the
  cache key, a document that may hold every header;
* ``Constant``: ``constant_text()``, the text the provider gives every turn when it never
  depends on the turn (None when it does), so the engine need not call it each time.

Three hooks belong to a provider's *config* instead: ``Check``, ``check() -> list[Problem]``,
what the config names that this machine does not have (a missing folder or file, an extra
not installed: ``Problem.unless_installed``), which ``composer validate`` reports at the
field's line without building the provider;
``Secrets``, ``secrets() -> list[str]``, values the config holds that are secrets even when
written literally (a DSN's password), which the loader adds to what ``Manifest.redact`` masks;
and ``Partitioned``, ``partition() -> str | None``, the template that splits data several
tenants share (a shared store's namespace), which a server checks reads only what
authentication binds. A config's hooks are checked the same way when its type is loaded
(``composer.catalog``), so that a wrong one is an error at the line of the entry naming it.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from composer.errors import PluginError

__all__ = [
    "CONFIG_HOOKS",
    "PROVIDER_HOOKS",
    "CacheKey",
    "Check",
    "Closeable",
    "Constant",
    "DisplayQuery",
    "Partitioned",
    "Problem",
    "Progress",
    "Secrets",
    "WarmUp",
    "Writeback",
    "WritebackCount",
    "check_hooks",
]

Progress = Callable[[int, int], None]
"""``progress(done, total)``, which a warm-up may call from any thread."""


@runtime_checkable
class Writeback(Protocol):
    """Stores what the agent's tools returned (ADR D7); failures are contained by the registry."""

    async def writeback(self, branch: Any, action_responses: list[Any]) -> Any: ...


class WritebackCount(int):
    """What a ``writeback`` stored: the count (it is that ``int``), and ``cut``, how many of
    those items were stored cut to the provider's size cap rather than whole."""

    cut: int

    def __new__(cls, stored: int, cut: int = 0) -> WritebackCount:
        count = super().__new__(cls, stored)
        count.cut = cut
        return count

    def __repr__(self) -> str:
        return f"WritebackCount({int(self)}, cut={self.cut})"


@runtime_checkable
class WarmUp(Protocol):
    """Does slow set-up now instead of on the first turn; may report ``progress``."""

    async def warm_up(self, progress: Progress | None = None) -> Any: ...


@runtime_checkable
class Closeable(Protocol):
    """Releases what the object holds; safe to call more than once."""

    async def aclose(self) -> None: ...


@runtime_checkable
class CacheKey(Protocol):
    """The text that identifies this turn's request, e.g. the rendered query; may raise."""

    def cache_key(self, branch: Any, instruction: Any) -> str: ...


@runtime_checkable
class DisplayQuery(Protocol):
    """This turn's query for traces: no header, no query value, no secret; may raise."""

    def display_query(self, branch: Any, instruction: Any) -> str: ...


@runtime_checkable
class Constant(Protocol):
    """The provider's answer when it is the same on every turn, else None."""

    def constant_text(self) -> str | None: ...


@dataclass(frozen=True)
class Problem:
    """What a config's ``check`` found: the field (keys below the provider entry, as the
    manifest spells them), what is wrong with it here, and whether it is an error or a
    warning."""

    field: tuple[str | int, ...]
    message: str
    error: bool = True

    @classmethod
    def unless_installed(
        cls,
        field: tuple[str | int, ...],
        extra: str,
        *modules: str,
        distribution: str = "context-composer",
        error: bool = True,
    ) -> list[Problem]:
        """No problem when every one of ``modules`` can be imported, else one naming those
        missing and the pip command of the ``extra`` that brings them. Looked up, not imported
        (a dotted name imports its parents), so that ``validate`` stays fast."""
        absent = [name for name in modules if not _importable(name)]
        if not absent:
            return []
        needs = ", ".join(absent)
        command = f"pip install '{distribution}[{extra}]'"
        return [cls(field, f"needs {needs} (the {extra} extra), not installed: {command}", error)]


def _importable(name: str) -> bool:
    """Whether ``import name`` would find the module (a ``None`` in ``sys.modules``, the way
    an import is blocked, finds nothing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: loaded, with no spec (``__main__``)
        return name in sys.modules and sys.modules[name] is not None


@runtime_checkable
class Check(Protocol):
    """A provider config that checks what it names against this machine, without building
    the provider: a folder that is missing, a file that cannot be created. It must not
    change anything or reach the network."""

    def check(self) -> list[Problem]: ...


@runtime_checkable
class Partitioned(Protocol):
    """A provider config whose data several tenants share, split by a template: a shared
    memory store's ``namespace``. ``partition()`` is that template's source (None when the
    data is not shared), so that ``composer serve`` can refuse a split that clients choose
    themselves (``composer.serve.tenancy``)."""

    def partition(self) -> str | None: ...


@runtime_checkable
class Secrets(Protocol):
    """A provider config holding values to mask wherever they were written (a DSN's
    password, user and options), not only those from a ``${VAR}``."""

    def secrets(self) -> list[str]: ...


PROVIDER_HOOKS: tuple[type, ...] = (Writeback, WarmUp, Closeable, CacheKey, DisplayQuery, Constant)
"""The hooks of a provider (``composer.build`` looks for them when it wraps one)."""

CONFIG_HOOKS: tuple[type, ...] = (Check, Secrets, Partitioned)
"""The hooks of a provider's config (``composer.catalog`` checks them when it loads a type)."""

_METHODS: dict[type, str] = {
    Writeback: "writeback",
    WarmUp: "warm_up",
    Closeable: "aclose",
    CacheKey: "cache_key",
    DisplayQuery: "display_query",
    Constant: "constant_text",
    Check: "check",
    Secrets: "secrets",
    Partitioned: "partition",
}
"""The method each hook names."""

_AWAITED = frozenset({Writeback, WarmUp, Closeable})
"""The hooks the engine awaits."""


def check_hooks(cls: type, hooks: Iterable[type]) -> frozenset[type]:
    """The ones of ``hooks`` that ``cls`` declares, each checked as the engine will call it.

    Raises ``PluginError`` naming ``cls`` and the hook when one cannot take the engine's call
    (a parameter too many, or one missing) or, for one the engine awaits, is not an
    ``async def`` method: refused here, as pluggy refuses a hook at registration, rather than
    failing at the first turn, writeback or shutdown.
    """
    found = frozenset(hook for hook in hooks if issubclass(cls, hook))
    for hook in found:
        method = _METHODS[hook]
        name = f"{cls.__module__}.{cls.__qualname__}.{method}"
        if hook in _AWAITED and not inspect.iscoroutinefunction(getattr(cls, method)):
            raise PluginError(
                f"{name} must be a coroutine function (async def): the engine "
                f"awaits it, and a plain function would fail there with a TypeError"
            )
        refusal = _refused_call(cls, hook, method)
        if refusal is not None:
            raise PluginError(f"{name}{refusal}")
    return found


def _refused_call(cls: type, hook: type, method: str) -> str | None:
    """Why ``cls``'s ``method`` cannot take the call its ``hook`` spells (its signature, then
    why), else None.

    The call is built from the Protocol's own signature: each parameter after ``self`` is
    passed, by position (by keyword when the Protocol makes it keyword-only), whether or not
    the Protocol gives it a default, since the engine always passes it (``warm_up(progress)``
    with None). A method that no signature describes (a builtin, an unusual descriptor) is
    not judged: it will fail, if at all, where it is called.
    """
    spelled = list(inspect.signature(getattr(hook, method)).parameters.values())[1:]
    args = [p.name for p in spelled if p.kind is not p.KEYWORD_ONLY]
    kwargs = {p.name: p.name for p in spelled if p.kind is p.KEYWORD_ONLY}
    static = inspect.getattr_static(cls, method)
    if isinstance(static, staticmethod | classmethod):
        receiver: list[str] = []  # getattr gives a function without self, or one bound to cls
    elif inspect.isfunction(static):
        receiver = ["self"]
    else:
        return None
    try:
        own = inspect.signature(getattr(cls, method))
    except (TypeError, ValueError):
        return None
    try:
        own.bind(*receiver, *args, **kwargs)
    except TypeError as e:
        bare = own.replace(
            parameters=[p.replace(annotation=p.empty) for p in own.parameters.values()],
            return_annotation=own.empty,
        )
        call = ", ".join([*args, *(f"{k}=..." for k in kwargs)])
        return f"{bare} cannot take the engine's call {method}({call}): {e}"
    return None
