"""Blocks that fit their caps: whole items, best first, never a cut item.

ADR-0008 D3 drops a block over its provider's ``max_tokens`` whole. A provider that returns
several items (passages, memory hits) knows that cap, so it can choose instead: the best items
whose rendered block stays within ``max_tokens`` (counted with the registry's tokenizer) and
within the provider's own character cap on rendering. The registry's rule is unchanged; it
simply never has to drop such a block. With fitting off a provider returns every item and
the registry decides, as the ADR says.

When the engine wants this turn's ranking (``composer.plugin.ranking_wanted``: the manifest
asks for dedup, fill or explanations), ``ranked`` also reports what the provider considered,
best first, each item's fate as the provider decided it (``admitted``, ``cut_to_fit``, and the
near misses the provider found past ``top_k`` or under ``min_score``), with the block's
``render`` and a ``refit`` that fits the best of them to what the budget has left.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence
from typing import NamedTuple

from composer.plugin import (
    BuildContext,
    Candidate,
    Fate,
    ProviderConfig,
    ProviderError,
    Ranking,
    Render,
    RenderLimits,
    TemplateError,
    compile_template,
    count_tokens,
    explaining,
    ranking_wanted,
    report_ranking,
)

__all__ = [
    "BLOCK_CHARS",
    "MAX_BLOCK_CHARS",
    "RENDER_LIMITS",
    "Item",
    "Render",
    "packed",
    "ranked",
    "wrap_reserve",
]

BLOCK_CHARS = 100_000
"""The default character cap on a rendered block (the template sandbox's own default)."""

MAX_BLOCK_CHARS = 1_000_000
"""The hard ceiling on that cap: no setting renders a longer block."""

RENDER_LIMITS = RenderLimits(output_chars=MAX_BLOCK_CHARS)
"""Blocks render up to the ceiling, so a block over its cap is measured, not cut short."""

# The names a manifest's `wrap` template sees (composer.manifest's WRAP_NAMES).
_WRAP_NAMES = frozenset({"provider", "text", "nonce"})
# Tokens the wrap may add where its text meets the block (a merge at each edge).
_WRAP_SLACK = 4


def wrap_reserve(config: ProviderConfig, context: BuildContext) -> int:
    """Tokens the engine's ``wrap`` (the provider's own, else ``runtime.wrap``) adds around a
    block, which is counted against ``max_tokens`` too: the most over a few random nonces."""
    wrap = config.wrap or context.manifest.runtime.wrap
    if not wrap:
        return 0
    template = compile_template(wrap, _WRAP_NAMES)
    provider = {"name": config.name, "type": config.type, "priority": config.priority}
    sizes = [
        count_tokens(
            template.render({"provider": provider, "text": "", "nonce": secrets.token_hex(8)})
        )
        for _ in range(4)
    ]
    return max(sizes) + _WRAP_SLACK


def _too_long(label: str, size: int, cap: int, setting: str, advice: str) -> ProviderError:
    """The render-cap failure: the cap, the size reached, and the setting to change."""
    if cap >= MAX_BLOCK_CHARS:
        fix = f"the ceiling of every block; lower `{setting}`"
    else:
        fix = f"raise `{setting}` (at most {MAX_BLOCK_CHARS:,}) {advice}".rstrip()
    return ProviderError(
        f"{label}: the rendered block is {size:,} characters, over the {cap:,}-character "
        f"render cap; {fix}"
    )


def packed(
    count: int,
    render: Render,
    *,
    max_tokens: int | None,
    max_chars: int,
    fit: bool,
    label: str,
    setting: str,
    advice: str = "",
) -> tuple[str | None, list[int]]:
    """The block of ``count`` ranked items, fitted to ``max_tokens`` and ``max_chars``, and
    the indices of the items it holds (best first).

    All items when they fit. Otherwise, with ``fit``, the best items that fit: each is
    estimated alone, added best first while the estimate fits (a later, smaller one may still
    fit), and the result is rendered and counted; while it does not fit, the lowest-ranked
    item is dropped. None when not even the best item fits ``max_tokens``; a ProviderError
    naming ``setting`` when it alone is over ``max_chars`` (or, without ``fit``, when the
    whole block is). ``max_tokens`` None or 0 is no token cap (ADR-0008 D3).
    """
    token_cap = max_tokens or None

    def fits(text: str) -> bool:
        if len(text) > max_chars:
            return False
        return token_cap is None or count_tokens(text) <= token_cap

    full: str | None = None
    try:
        full = render(range(count))
    except TemplateError:
        if not fit:
            raise
    if full is not None:
        if fits(full):
            return full, list(range(count))
        if not fit:
            if len(full) > max_chars:
                raise _too_long(label, len(full), max_chars, setting, advice)
            return full, list(range(count))  # over max_tokens: the registry skips it (ADR D3)
    try:
        base = _size(render([]), token_cap)
    except TemplateError:  # a template that needs an item (``hits[0]``): estimate from 0
        base = (0, 0)
    chosen: list[int] = []
    used = base
    for i in range(count):
        single = render([i])
        cost = _minus(_size(single, token_cap), base)
        if i == 0 and len(single) > max_chars:
            raise _too_long(label, len(single), max_chars, setting, advice)
        if _within(_plus(used, cost), token_cap, max_chars):
            chosen.append(i)
            used = _plus(used, cost)
    while chosen:
        text = render(chosen)
        if fits(text):
            return text, chosen
        chosen.pop()
    return None, []


class Item(NamedTuple):
    """One ranked item: its stable id, its score (None: unscored) and the text dedup compares."""

    id: str
    score: float | None
    text: str


def ranked(
    provider: object,
    count: int,
    render: Render,
    items: Callable[[], Sequence[Item]],
    *,
    near: Sequence[tuple[Item, Fate]] = (),
    max_tokens: int | None,
    reserve: int = 0,
    max_chars: int,
    fit: bool,
    label: str,
    setting: str,
    advice: str = "",
) -> str | None:
    """The block of the provider's ``count`` results (best first), fitted as ``packed``
    fits it; when the engine wants rankings, the ranking is reported too.

    ``items()`` describes the results (made only then: a turn that wants no ranking pays
    nothing for it); ``render`` takes indices into them followed by ``near`` (the near misses,
    each with its fate, found only while the turn explains itself). ``max_tokens`` is the
    provider's cap less ``reserve``, the tokens the engine's ``wrap`` may add.
    """
    text: str | None = None
    chosen: list[int] = []
    if count:  # none: no block, but the near misses may still be explained
        text, chosen = packed(
            count,
            render,
            max_tokens=max_tokens,
            max_chars=max_chars,
            fit=fit,
            label=label,
            setting=setting,
            advice=advice,
        )
    if not ranking_wanted():
        return text
    fitted = functools.partial(
        packed, max_chars=max_chars, label=label, setting=setting, advice=advice
    )
    held = set(chosen)
    candidates = [
        Candidate(item.id, item.score, "admitted" if i in held else "cut_to_fit", item.text)
        for i, item in enumerate(items())
    ]
    candidates += [Candidate(item.id, item.score, fate, item.text) for item, fate in near]
    if explaining():
        for candidate, tokens in zip(candidates, _costs(len(candidates), render), strict=True):
            candidate.tokens = tokens

    def refit(indices: Sequence[int], tokens: int) -> tuple[str, list[int]] | None:
        cap = tokens - reserve
        if max_tokens:
            cap = min(cap, max_tokens)
        if cap < 1:
            return None
        subset = list(indices)
        block, held = fitted(
            len(subset),
            lambda picked: render([subset[i] for i in picked]),
            max_tokens=cap,
            fit=True,
        )
        return None if block is None else (block, [subset[i] for i in held])

    report_ranking(provider, Ranking(candidates, render, refit))
    return text


def _costs(count: int, render: Render) -> list[int | None]:
    """What each item adds to a block: its block alone less the empty block (the frame)."""
    try:
        frame = count_tokens(render([]))
    except TemplateError:  # a template that needs an item
        frame = 0
    costs: list[int | None] = []
    for i in range(count):
        try:
            costs.append(max(count_tokens(render([i])) - frame, 0))
        except TemplateError:
            costs.append(None)
    return costs


_Size = tuple[int, int]  # (tokens or 0 when there is no token cap, characters)


def _size(text: str, token_cap: int | None) -> _Size:
    return (count_tokens(text) if token_cap is not None else 0, len(text))


def _plus(a: _Size, b: _Size) -> _Size:
    return (a[0] + b[0], a[1] + b[1])


def _minus(a: _Size, b: _Size) -> _Size:
    return (a[0] - b[0], a[1] - b[1])


def _within(size: _Size, token_cap: int | None, max_chars: int) -> bool:
    return size[1] <= max_chars and (token_cap is None or size[0] <= token_cap)
