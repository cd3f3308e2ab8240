"""Admission beyond ADR-0008, each part opt-in: dedup across providers, fill instead of drop,
and the explanation of every candidate.

The manifest's registry (``composer.build``) hands a turn here instead of admitting it the
ADR's way only when the turn wanted rankings (``runtime.dedup``, ``runtime.admission: fill``,
``runtime.explain``, or ``composer.outcomes.explain_turns``). With dedup off and ADR admission
the result is the ADR's to the letter (the same blocks, lists and outcomes; a test holds it),
plus the explanations.

- **dedup** (``exact`` or ``near``): providers are taken by priority as the budget takes them;
  a candidate (a ranked passage or memory item) whose text was admitted already, by a
  higher-priority provider or earlier in the same block, is removed and the block re-rendered
  without it before it is counted; a provider that does not rank loses the paragraphs that
  repeat. Texts are compared normalised (``words``: case folded, punctuation dropped,
  whitespace collapsed); ``exact`` asks for equal words, ``near`` also for a Jaccard similarity
  of their 3-word shingles of at least ``NEAR`` (0.8). Deterministic, no model.
- **fill**: a ranking provider whose block does not fit what is left of the budget is refitted
  to it (its best whole candidates, as its own ``fit`` does for its cap) instead of being
  skipped; it fires, and its explanation says ``refitted``. Other providers keep the ADR's rule.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from composer.outcomes import Candidate, Explanation, Outcome, ProviderOutcome, Ranking, Turn
from composer.registry import Call, ProviderReport

__all__ = [
    "NEAR",
    "SHINGLE",
    "Admission",
    "Dedup",
    "Offered",
    "Seen",
    "Verdict",
    "admit",
    "by_priority",
    "paragraphs",
    "ranked_report",
    "similarity",
    "words",
]

logger = logging.getLogger("composer.registry")

Dedup = Literal["exact", "near"]

NEAR = 0.8
"""``near`` dedup: two texts are one when the Jaccard similarity of their sets of 3-word
shingles (``SHINGLE``) is at least this."""

SHINGLE = 3
"""Words per shingle; a text of fewer words is one shingle of all of them."""

_WORD = re.compile(r"\w+")
_BREAK = re.compile(r"(\n[ \t]*\n\s*)")  # a blank line, kept by split as a separator


def words(text: str) -> list[str]:
    """``text`` normalised for comparison: case folded, punctuation and whitespace dropped."""
    return _WORD.findall(text.casefold())


def _shingles(found: Sequence[str]) -> frozenset[tuple[str, ...]]:
    if len(found) < SHINGLE:
        return frozenset([tuple(found)])
    return frozenset(tuple(found[i : i + SHINGLE]) for i in range(len(found) - SHINGLE + 1))


def _jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    if not a or not b or min(len(a), len(b)) < NEAR * max(len(a), len(b)):
        return 0.0  # the smaller set alone cannot reach NEAR
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def similarity(a: str, b: str) -> float:
    """The ``near`` measure of two texts: Jaccard similarity of their 3-word shingle sets
    (1.0 for equal normalised words, 0.0 when either has no word)."""
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return 0.0
    sa, sb = _shingles(wa), _shingles(wb)
    common = len(sa & sb)
    return common / (len(sa) + len(sb) - common)


def paragraphs(text: str) -> list[str]:
    """The paragraphs of ``text`` (split at blank lines)."""
    return [part for part in _BREAK.split(text)[::2] if part.strip()]


_Origin = tuple[str, str | None]  # (provider, candidate id or None)


class Seen:
    """The texts admitted so far this turn, each with the provider (and candidate) it came
    from: a whole candidate or block, and each of its paragraphs."""

    def __init__(self, mode: Dedup) -> None:
        self.mode = mode
        self._keys: dict[str, _Origin] = {}
        self._shingles: list[tuple[frozenset[tuple[str, ...]], _Origin]] = []

    def match(self, text: str) -> _Origin | None:
        """Where an equal (or, ``near``, a nearly equal) text was admitted; None if nowhere."""
        found = words(text)
        if not found:
            return None
        hit = self._keys.get(" ".join(found))
        if hit is not None or self.mode != "near":
            return hit
        mine = _shingles(found)
        for theirs, origin in self._shingles:
            if _jaccard(mine, theirs) >= NEAR:
                return origin
        return None

    def add(self, text: str, provider: str, candidate: str | None) -> None:
        origin = (provider, candidate)
        for part in dict.fromkeys([text, *paragraphs(text)]):
            found = words(part)
            if not found:
                continue
            key = " ".join(found)
            if key in self._keys:
                continue
            self._keys[key] = origin
            if self.mode == "near":
                self._shingles.append((_shingles(found), origin))


@dataclass
class Offered:
    """One provider's non-empty result, as admission sees it."""

    index: int
    """Its registration position."""
    name: str
    priority: int
    max_tokens: int | None
    text: str
    ranking: Ranking | None
    rewrap: Callable[[str], str]
    """The engine's ``wrap`` around a block admission re-rendered (identity without one)."""


Verdict = Literal["kept", "over_max_tokens", "over_budget", "empty"]


@dataclass
class Admission:
    """What admission made of one offered result."""

    text: str | None
    tokens: int | None
    verdict: Verdict
    explanation: Explanation


def admit(
    offered: Sequence[Offered],
    budget: int,
    *,
    dedup: Dedup | None,
    fill: bool,
    count_tokens: Callable[[str], int],
) -> tuple[list[Admission], int]:
    """Each offered result's admission (aligned with ``offered``) and the tokens used.

    By priority (stable, so registration order among equals), as ADR-0008 D3: dedup against
    what was admitted before, count, the provider's own cap (``max_tokens`` by truthiness),
    then ``total + tokens <= budget``, or with ``fill`` a refit to what is left.
    """
    seen = Seen(dedup) if dedup is not None else None
    results: list[Admission | None] = [None] * len(offered)
    taken: list[str] = []
    total = 0
    for position in by_priority(offered):
        item = offered[position]
        ranking = item.ranking
        candidates = None if ranking is None else [replace(c) for c in ranking.candidates]
        explanation = Explanation(item.name, "fired", candidates=candidates)
        text: str | None = item.text
        if seen is not None:
            text = _deduplicated(item, candidates, seen, explanation)
        if not text:
            explanation.outcome = "empty"
            results[position] = Admission(None, None, "empty", explanation)
            continue
        tokens = count_tokens(text)
        explanation.tokens = tokens
        cap = item.max_tokens
        if cap and tokens > cap:  # ADR D3's per-provider check, after dedup
            explanation.outcome = "over_max_tokens"
            explanation.needed, explanation.cap = tokens, cap
            _lose(candidates)
            results[position] = Admission(text, tokens, "over_max_tokens", explanation)
            continue
        left = budget - total
        if tokens > left and fill and ranking is not None and ranking.refit is not None:
            refitted = _refit(item, ranking, candidates, left, count_tokens)
            if refitted is not None:
                explanation.needed, explanation.left, explanation.refitted = tokens, left, True
                text, tokens = refitted
                explanation.tokens = tokens
        if total + tokens <= budget:
            total += tokens
            taken.append(item.name)
            if seen is not None:
                _remember(item, text, candidates, seen)
            results[position] = Admission(text, tokens, "kept", explanation)
            continue
        explanation.outcome = "over_budget"
        explanation.needed, explanation.left, explanation.taken_by = tokens, left, list(taken)
        _lose(candidates)
        results[position] = Admission(text, tokens, "over_budget", explanation)
    return [r for r in results if r is not None], total


def _lose(candidates: list[Candidate] | None) -> None:
    for candidate in candidates or ():
        if candidate.fate == "admitted":
            candidate.fate = "lost_with_block"


def _deduplicated(
    item: Offered, candidates: list[Candidate] | None, seen: Seen, explanation: Explanation
) -> str | None:
    """The block without what was admitted already (None: nothing left); the candidates'
    fates and, for a plain block, its dropped paragraphs (as candidates) say what went."""
    ranking = item.ranking
    if candidates is not None and ranking is not None and ranking.render is not None:
        own = Seen(seen.mode)
        dropped = False
        for candidate in candidates:
            if candidate.fate != "admitted":
                continue
            origin = seen.match(candidate.text) or own.match(candidate.text)
            if origin is None:
                own.add(candidate.text, item.name, candidate.id)
                continue
            candidate.fate = "duplicate"
            candidate.duplicate_of, candidate.duplicate_of_id = origin
            dropped = True
        if not dropped:
            return item.text
        kept = [i for i, c in enumerate(candidates) if c.fate == "admitted"]
        if not kept:
            return None
        try:
            return item.rewrap(ranking.render(kept))
        except Exception:  # its template failed on the smaller set: keep the block as it was
            logger.warning("context provider %r: re-render after dedup failed", item.name)
            for candidate in candidates:
                if candidate.fate == "duplicate":
                    candidate.fate = "admitted"
                    candidate.duplicate_of = candidate.duplicate_of_id = None
            return item.text
    text, removed = _without_repeats(item.text, item.name, seen)
    if removed:
        explanation.candidates = (explanation.candidates or []) + removed
    return text


def _without_repeats(text: str, name: str, seen: Seen) -> tuple[str | None, list[Candidate]]:
    """A plain block without its paragraphs that were admitted already (or repeat an earlier
    one of its own): the text left (None: nothing) and each removed paragraph."""
    parts = _BREAK.split(text)  # paragraph, separator, paragraph, ...
    own = Seen(seen.mode)
    removed: list[Candidate] = []
    out: list[str] = []
    for n in range(0, len(parts), 2):
        paragraph = parts[n]
        origin = seen.match(paragraph) or own.match(paragraph)
        if origin is None:
            own.add(paragraph, name, None)
            if out:
                out.append(parts[n - 1])
            out.append(paragraph)
            continue
        provider, candidate = origin
        number = n // 2 + 1
        removed.append(
            Candidate(
                f"paragraph {number}", None, "duplicate", paragraph, None, provider, candidate
            )
        )
    if not removed:
        return text, []
    left = "".join(out)
    return (left if left.strip() else None), removed


def _refit(
    item: Offered,
    ranking: Ranking,
    candidates: list[Candidate] | None,
    left: int,
    count_tokens: Callable[[str], int],
) -> tuple[str, int] | None:
    """The block refitted to ``left`` tokens, and its count; None when nothing fits (the
    provider is then skipped as the ADR has it)."""
    if candidates is None or ranking.refit is None or left <= 0:
        return None
    pool = [i for i, c in enumerate(candidates) if c.fate in ("admitted", "cut_to_fit")]
    if not pool:
        return None
    try:
        fitted = ranking.refit(pool, left)
        if fitted is None:
            return None
        text = item.rewrap(fitted[0])
    except Exception:
        logger.warning("context provider %r: refit failed", item.name, exc_info=True)
        return None
    tokens = count_tokens(text)
    if tokens > left or (item.max_tokens and tokens > item.max_tokens):
        return None
    chosen = set(fitted[1])
    for i in pool:
        candidates[i].fate = "admitted" if i in chosen else "cut_to_fit"
    return text, tokens


def _remember(item: Offered, text: str, candidates: list[Candidate] | None, seen: Seen) -> None:
    """What an admitted block adds to what later providers are compared with."""
    ranking = item.ranking
    if candidates is not None and ranking is not None and ranking.render is not None:
        for candidate in candidates:
            if candidate.fate == "admitted":
                seen.add(candidate.text, item.name, candidate.id)
        return
    seen.add(text, item.name, None)


def ranked_report(
    entries: Sequence[Any],
    calls: Sequence[Call],
    turn: Turn,
    budget: int,
    *,
    dedup: Dedup | None,
    fill: bool,
    count_tokens: Callable[[str], int],
    ranking_of: Callable[[Any], Ranking | None],
    rewrap_of: Callable[[Any], Callable[[str], str]],
    describe_error: Callable[[BaseException], str],
) -> ProviderReport:
    """The report of one turn whose rankings were wanted: the ADR registry's report, with
    ``admit`` in place of the ADR's admission and one ``Explanation`` per entry.

    ``entries`` are the registry's (``provider``, ``priority``, ``max_tokens``, ``name``),
    ``calls`` what each gave; ``ranking_of(entry)`` is the ranking its provider reported this
    turn, ``rewrap_of(entry)`` the engine's wrap of its re-rendered block.
    """
    notes = turn.notes
    degraded_by = turn.degraded
    failed: list[str] = []
    outcomes: list[ProviderOutcome | None] = [None] * len(calls)
    explanations: list[Explanation | None] = [None] * len(calls)
    offered: list[Offered] = []
    for index, entry in enumerate(entries):
        text, error, ms = calls[index]
        provider = entry.provider
        if error is not None:
            failed.append(entry.name)
            kind: Outcome = "timeout" if isinstance(error, TimeoutError) else "failed"
            outcomes[index] = ProviderOutcome(
                entry.name, kind, None, ms, type(error).__name__, describe_error(error)
            )
            continue
        ranking = None if id(provider) in degraded_by else ranking_of(entry)
        if not text:
            outcome: Outcome = "guarded" if notes.get(id(provider)) == "guarded" else "empty"
            outcomes[index] = ProviderOutcome(entry.name, outcome, None, ms)
            candidates = None if ranking is None else list(ranking.candidates)
            explanations[index] = Explanation(entry.name, outcome, candidates=candidates)
            continue
        offered.append(
            Offered(
                index,
                entry.name,
                entry.priority,
                entry.max_tokens,
                text,
                ranking,
                rewrap_of(entry),
            )
        )

    admissions, total = admit(offered, budget, dedup=dedup, fill=fill, count_tokens=count_tokens)
    blocks: list[str] = []
    fired: list[dict[str, Any]] = []
    over_cap: list[str] = []
    over_budget: list[tuple[int, str]] = []  # (place in the budget's order, name)
    degraded: list[dict[str, str]] = []
    for place, position in enumerate(by_priority(offered)):
        if admissions[position].verdict == "over_budget":
            over_budget.append((place, offered[position].name))
    for item, admission in zip(offered, admissions, strict=True):
        index, name = item.index, item.name
        ms = calls[index][2]
        explanation = admission.explanation
        explanations[index] = explanation
        verdict, tokens = admission.verdict, admission.tokens
        if verdict == "over_max_tokens":  # as ADR D3: before any notice is considered
            outcomes[index] = ProviderOutcome(name, verdict, tokens, ms)
            over_cap.append(name)
            continue
        failure = degraded_by.get(id(entries[index].provider))
        if failure is not None:  # its notice: admitted or not, the outcome says it failed
            kind, cause = failure
            reason = describe_error(cause)
            degraded.append({"provider_name": name, "reason": reason})
            explanation.outcome = kind
            if verdict == "kept":
                assert admission.text is not None
                blocks.append(admission.text)
                fired.append({"provider_name": name, "tokens": tokens})
            outcomes[index] = ProviderOutcome(name, kind, tokens, ms, type(cause).__name__, reason)
            continue
        if verdict == "empty":  # dedup left nothing of it
            outcomes[index] = ProviderOutcome(name, "empty", None, ms)
        elif verdict == "kept":
            assert admission.text is not None
            blocks.append(admission.text)
            fired.append({"provider_name": name, "tokens": tokens})
            cached = notes.get(id(entries[index].provider)) == "cached"
            kept: Outcome = "cached" if cached else "fired"
            explanation.outcome = kept
            outcomes[index] = ProviderOutcome(name, kept, tokens, ms)
        else:
            outcomes[index] = ProviderOutcome(name, "over_budget", tokens, ms)
    for index, entry in enumerate(entries):
        if explanations[index] is None:  # failed or timed out
            record = outcomes[index]
            assert record is not None
            explanations[index] = Explanation(entry.name, record.outcome)
    skipped = over_cap + [name for _, name in sorted(over_budget)]
    return ProviderReport(
        blocks,
        fired,
        skipped,
        failed,
        turn.id,
        budget,
        total,
        [o for o in outcomes if o is not None],
        degraded,
        [e for e in explanations if e is not None],
    )


def by_priority(offered: Sequence[Offered]) -> list[int]:
    """Positions in ``offered`` in the order the budget takes them: descending priority,
    registration order among equals (ADR-0008 D3's stable sort)."""
    return sorted(range(len(offered)), key=lambda i: offered[i].priority, reverse=True)
