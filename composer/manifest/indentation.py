"""Indentation mistakes in YAML, told as "check the indentation of line N", N the line to fix.

PyYAML words an indentation mistake as its parser sees it (``expected <block end>, but found
'?'``, ``mapping values are not allowed here``) and places it where the parser gave up, which
is not always the line that is wrong: a key dedented to column 1 inside a provider is valid
YAML on its own (a top-level key), so the error comes at the next line indented again, often
the next provider. ``diagnose`` reads the text around the parser's mark, line by line, and
names the line to fix and the indentations the lines above it open:

* a line after a complete ``key: value`` indented deeper than it, where that line itself is
  dedented below the block it was in: the dedented line is the mistake;
* the first key under a list item (``- name: a``) out of line with the item's key, while
  another item of the file has its keys where this one's are: the item line is the mistake;
* otherwise the line the parser stopped at; a tab in its indentation is named as such.

Anything else (an unclosed quote, a value holding ``": "``) is left to the parser's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Diagnosis", "diagnose"]

_INDENTATION_PROBLEMS = ("expected <block end>", "mapping values are not allowed here")
_NO_COLON = "could not find expected ':'"
_ITEM = re.compile(r"(?:-[ \t]+)+")
_COMMENT = re.compile(r"\s+#.*$")
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
"""What PyYAML counts as a line break (its marks count lines so)."""


@dataclass(frozen=True)
class Diagnosis:
    """The line to fix (1-based), the column where its text starts, and the message."""

    line: int
    column: int
    message: str


@dataclass(frozen=True)
class _Line:
    number: int  # 0-based
    dash: int  # the column of its first "-" for a list item, else where its text starts
    key: int  # where its text starts after any "- "
    text: str  # without its indentation

    @property
    def opens(self) -> bool:
        """Whether lines deeper than it may follow (``key:``, ``key: |``, ``-``)."""
        return self.block or _COMMENT.sub("", self.text).rstrip().endswith((":", "-"))

    @property
    def block(self) -> bool:
        """Whether it starts a block scalar (``key: |``): the deeper lines after it are text."""
        return bool(re.search(r"(?:^|[:-]\s+)[|>][-+0-9]*$", _COMMENT.sub("", self.text).rstrip()))


@dataclass(frozen=True)
class _Complete(_Line):
    """A block scalar's first line with its text: a value as complete as ``key: value``."""

    @property
    def opens(self) -> bool:
        return False


def diagnose(
    text: str, problem: str, line: int, column: int, context_line: int | None
) -> Diagnosis | None:
    """What to say about PyYAML's ``problem`` at 0-based ``line`` and ``column`` (with the
    line of its context, for a key without a colon), or None when it is no indentation
    mistake."""
    lines = _BREAK.split(text)
    if not 0 <= line < len(lines):
        return None
    tab = _tab_in_indentation(lines[line])
    if tab is not None and tab <= column:
        detail = "it is indented with a tab; YAML indents with spaces only"
        return Diagnosis(line + 1, tab + 1, _say(line, detail))
    if problem.startswith(_NO_COLON) and context_line is not None:
        return _no_colon(lines, context_line)
    at = _parsed(lines, line)
    if at is None or not problem.startswith(_INDENTATION_PROBLEMS):
        return None
    if problem.startswith("mapping values") and re.search(r":\s", lines[line][at.key : column]):
        return None  # a value holding ": " (quote it), not an indentation
    before = _above(lines, line)
    blamed = _dedented_before(at, before) or _item_out_of_line(at, before, lines)
    if blamed is not None:
        return blamed
    if before and before[0].opens:
        least = "at least" if at.dash != at.key else "more than"
        detail = (
            f"it is indented {_spaces(at.dash)}; what belongs to line {before[0].number + 1} "
            f"is indented {least} its key ({before[0].key})"
        )
    else:
        detail = (
            _misplaced_item(at, before) or f"it is indented {_spaces(at.dash)}; {_levels(before)}"
        )
    return Diagnosis(line + 1, at.dash + 1, _say(line, detail))


def _dedented_before(at: _Line, before: list[_Line]) -> Diagnosis | None:
    """The line above ``at`` when it is a complete value dedented below the block it was in
    and ``at`` is indented back into that block."""
    before = _texts_folded(before)
    if len(before) < 2:
        return None
    previous, earlier = before[0], before[1]
    if previous.opens or not previous.key < at.dash <= earlier.key:
        return None
    return Diagnosis(
        previous.number + 1,
        previous.dash + 1,
        _say(
            previous.number,
            f"it is indented {_spaces(previous.dash)}, less than line {earlier.number + 1} "
            f"above it ({earlier.key}), so it ends the block that line is in; yet line "
            f"{at.number + 1} below it is indented {at.dash}, as if the block went on",
        ),
    )


def _item_out_of_line(at: _Line, before: list[_Line], lines: list[str]) -> Diagnosis | None:
    """The list item just above ``at`` when ``at`` (its next key) is out of line with the
    item's key and another item's keys stand where ``at`` is: the item is the one moved."""
    if not before:
        return None
    item = before[0]
    if item.dash == item.key or not item.dash < at.dash < item.key:
        return None
    for number in range(len(lines)):
        other = _parsed(lines, number)
        if other is None or other.dash == other.key or other.number == item.number:
            continue
        following = _below(lines, number)
        if following is None or following.dash != at.dash or other.key == item.key:
            continue
        if other.dash != item.dash:
            detail = (
                f"its '-' is indented {_spaces(item.dash)}, where the item of line "
                f"{other.number + 1} has it indented {other.dash} (and its keys {at.dash}, "
                f"as line {at.number + 1} has)"
            )
        else:
            detail = (
                f"its key is indented {_spaces(item.key)}, where the item of line "
                f"{other.number + 1} has it {other.key} (one space after the '-'), as line "
                f"{at.number + 1} below it has"
            )
        return Diagnosis(item.number + 1, item.dash + 1, _say(item.number, detail))
    return None


def _misplaced_item(at: _Line, before: list[_Line]) -> str | None:
    """For a list item, how far the items of the open list nearest its indentation are."""
    if at.dash == at.key:
        return None
    ceiling = float("inf")  # the indentation below which a line is of an open block
    items: list[_Line] = []
    for line in before:
        if line.dash < ceiling:
            if line.dash != line.key:
                items.append(line)
            ceiling = line.dash
    if not items:
        return None
    nearest = min(items, key=lambda line: abs(line.dash - at.dash))
    return (
        f"its '-' is indented {_spaces(at.dash)}, the items of the list above it "
        f"{nearest.dash} (line {nearest.number + 1})"
    )


def _no_colon(lines: list[str], number: int) -> Diagnosis | None:
    at = _parsed(lines, number)
    if at is None:
        return None
    glued = re.match(r"[^:#\s]+:(?=\S)", at.text[at.key - at.dash :])
    if glued is not None:  # "key:value": a missing space, not an indentation
        return Diagnosis(
            number + 1,
            at.key + 1,
            f"line {number + 1} stands where a key goes but has no ': ': a key's ':' needs "
            f"a space after it ({glued.group()} ...)",
        )
    return Diagnosis(
        number + 1,
        at.dash + 1,
        f"line {number + 1} stands where a key goes but has no ': ' after a key; if it "
        f"continues the value above, check the indentation of line {number + 1}: a value on "
        "lines of its own is indented deeper than its key",
    )


def _say(number: int, detail: str) -> str:
    return f"check the indentation of line {number + 1}: {detail}"


def _spaces(count: int) -> str:
    return f"{count} space{'' if count == 1 else 's'}"


def _levels(before: list[_Line]) -> str:
    """The indentations a line may have at this point: those of the blocks open above it."""
    if not before:
        return "the first line of a file is not indented"
    levels: list[int] = []
    for line in before:
        for column in (line.key, line.dash):
            if not levels or column < levels[-1]:
                levels.append(column)
    shown = [str(level) for level in levels]
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
    return f"here a line is indented {listed} spaces, as the lines above it are"


def _texts_folded(before: list[_Line]) -> list[_Line]:
    """``before`` with the lines of the nearest block scalar folded into its first line."""
    deepest_above = float("inf")  # the least indentation of the lines passed: a block's text
    for index, line in enumerate(before):
        if index and line.block and deepest_above > line.key:
            return [_Complete(line.number, line.dash, line.key, line.text), *before[index + 1 :]]
        deepest_above = min(deepest_above, line.dash)
    return before


def _above(lines: list[str], number: int) -> list[_Line]:
    """The lines with content above ``number``, nearest first."""
    found = (_parsed(lines, n) for n in range(number - 1, -1, -1))
    return [line for line in found if line is not None]


def _below(lines: list[str], number: int) -> _Line | None:
    return next(
        (line for n in range(number + 1, len(lines)) if (line := _parsed(lines, n)) is not None),
        None,
    )


def _parsed(lines: list[str], number: int) -> _Line | None:
    """Line ``number`` with its columns; None when it holds nothing but a comment."""
    raw = lines[number]
    stripped = raw.lstrip(" \t")
    if not stripped or stripped.startswith("#"):
        return None
    dash = len(raw) - len(stripped)
    item = _ITEM.match(stripped)
    key = dash + (item.end() if item and item.end() < len(stripped) else 0)
    return _Line(number, dash, key, stripped)


def _tab_in_indentation(raw: str) -> int | None:
    """The column (0-based) of a tab among a line's leading blanks, if one is there."""
    blanks = len(raw) - len(raw.lstrip(" \t"))
    tab = raw.find("\t", 0, blanks)
    return tab if tab >= 0 else None
