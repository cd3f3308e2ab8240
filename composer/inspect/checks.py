"""What ``composer validate`` adds to the loader's errors: warnings for legal but suspicious
values, and each provider type's own checks of the files its config names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from composer.errors import ComposerError
from composer.hooks import Check, Problem
from composer.inspect.render import provider_name
from composer.inspect.words import counted
from composer.manifest import Manifest, Origin
from composer.templating import compile_template

__all__ = ["Finding", "manifest_findings", "manifest_warnings", "runtime_findings"]


@dataclass(frozen=True)
class Finding:
    """A value that is suspicious (a warning) or wrong for this machine (``error``)."""

    origin: Origin | None
    message: str
    error: bool = False

    def render(self, fallback: str) -> str:
        where = self.origin.location if self.origin is not None else f"{fallback}:1:1"
        return f"{where}: {self.message}" if self.error else f"{where}: warning: {self.message}"


def manifest_findings(manifest: Manifest, *, variables_read: bool = True) -> list[Finding]:
    """Everything ``validate`` reports about a manifest that loaded: ``manifest_warnings``,
    then what the run would lack on this machine, at the field's line: the ``runtime``
    options' (``runtime_findings``), and each enabled provider's config's (its ``Check``
    hook: a corpus folder or a memory file that is missing, an extra not installed).

    Loaded without variables (``variables_read=False``), a field written with a variable that
    has no default is not known, so what a check says about it is left out.
    """
    unknown = (
        set()
        if variables_read
        else {use.location for use in manifest.variables if not use.has_default}
    )
    checked = runtime_findings(manifest)
    for config in manifest.providers:
        if not config.enabled or not isinstance(config, Check):
            continue
        label = f'provider "{provider_name(manifest, config.name)}"'
        for problem in config.check():
            origin = manifest.origin("providers", config.name, *problem.field)
            field = ".".join(str(key) for key in problem.field)
            message = (
                f"{label}: {field}: {problem.message}" if field else f"{label}: {problem.message}"
            )
            checked.append(
                Finding(origin or manifest.origin("providers", config.name), message, problem.error)
            )
    return manifest_warnings(manifest) + [
        finding
        for finding in checked
        if finding.origin is None or finding.origin.location not in unknown
    ]


def runtime_findings(manifest: Manifest) -> list[Finding]:
    """What the ``runtime`` options need that this machine lacks: an audit file the writer
    cannot use (every turn's line would be lost), psycopg for an audit table, the redis client for ``cache.redis`` (each
    cached provider would fail), the packages of ``traces`` and ``metrics`` (a warning: turns
    run without them)."""
    runtime = manifest.runtime
    found: list[Finding] = []
    if runtime.audit is not None and runtime.audit.path is not None:
        from composer.observe.audit import audit_problem  # 35 ms: only when there is one

        unusable = audit_problem(runtime.audit.path)
        if unusable is not None:
            where = manifest.origin("runtime", "audit", "path")
            found.append(Finding(where, f"runtime.audit.path: {unusable}", error=True))
    table = runtime.audit is not None and runtime.audit.postgres is not None
    needs = [
        (table, ("audit", "postgres"), "postgres", "psycopg", True),
        (runtime.cache is not None, ("cache", "redis"), "redis", "redis", True),
        (runtime.traces, ("traces",), "otel", "opentelemetry", False),
        (runtime.metrics, ("metrics",), "metrics", "prometheus_client", False),
    ]
    for used, field, extra, module, error in needs:
        if not used:
            continue
        for problem in Problem.unless_installed(field, extra, module, error=error):
            message = f"runtime.{'.'.join(map(str, field))}: {problem.message}"
            if not error:
                message += "; turns run without it"
            found.append(Finding(manifest.origin("runtime", *field), message, error))
    return found


def manifest_warnings(manifest: Manifest) -> list[Finding]:
    """What ``validate`` warns about: values the ADR accepts that rarely mean what was meant.

    ``max_tokens: 0`` is no cap at all (ADR-0008 D3 tests truthiness); a cap above the budget
    never binds; a provider whose fixed text alone is over its cap or the budget is always
    skipped. Disabled providers are not checked.
    """
    findings: list[Finding] = []
    budget = manifest.budget
    if budget == 0:
        findings.append(
            Finding(manifest.origin("budget"), "budget: 0 admits no block with any text")
        )
    for config in manifest.providers:
        if not config.enabled:
            continue
        label = f'provider "{config.name}"'
        where = manifest.origin("providers", config.name, "max_tokens")
        cap = config.max_tokens
        if cap == 0:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens: 0 means no cap (ADR-0008 D3); "
                    "remove it or set a positive cap",
                )
            )
        elif cap is not None and cap > budget:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens {cap} is above the budget {budget}, so it never applies",
                )
            )
        limit = min(cap, budget) if cap else budget
        least = _fixed_tokens(config, limit)
        if least is not None:
            over = f"its max_tokens {cap}" if cap and least > cap else f"the budget {budget}"
            findings.append(
                Finding(
                    manifest.origin("providers", config.name, "text")
                    or manifest.origin("providers", config.name),
                    f"{label}: its fixed text is {counted(least, 'token')}, over {over}; "
                    "it can never be admitted",
                )
            )
    return findings


def _fixed_tokens(config: Any, limit: int) -> int | None:
    """Tokens of a provider's constant text (no template syntax) when they are over ``limit``.

    None when the text is a template or fits. No o200k token is shorter than one UTF-8 byte,
    so a text of at most ``limit`` bytes fits without loading the tokenizer.
    """
    text = getattr(config, "text", None)
    if not isinstance(text, str) or not text or len(text.encode("utf-8", "surrogatepass")) <= limit:
        return None
    try:
        if not compile_template(text).is_constant:
            return None
    except ComposerError:
        return None
    from composer.tokens import count_tokens  # loads the tokenizer: only for long texts

    tokens = count_tokens(text)
    return tokens if tokens > limit else None
