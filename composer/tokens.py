"""Token counting with o200k_base, loaded from the file vendored in this package (ADR-0008 D3).

``tiktoken.get_encoding("o200k_base")`` downloads its rank file at run time, which fails on a
machine without internet; here its tokens ship in ``composer/_data``, checked before use. It is
read once, on the first count, so that an empty registry never loads it (ADR D2).

The vendored form is the published file's tokens, base64-decoded, in rank order (line ``n`` of
the file is token ``n``), as one ``marshal``-ed list of bytes, gzip-compressed. Reading it is a
few C calls (about 40 ms) where parsing the published text took 100 ms of every cold start.
``vendored_o200k_base`` rebuilds the published text from it and checks the SHA-256 OpenAI
publishes, which a test holds, so the tokens are exactly o200k_base's. To make the file from
a published ``o200k_base.tiktoken``::

    tokens = [base64.b64decode(line.split()[0]) for line in text.splitlines()]
    gzip.compress(marshal.dumps(tokens, 4), 9, mtime=0)
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import marshal
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources

import tiktoken

from composer.errors import TokenizerError

__all__ = [
    "O200K_BASE_SHA256",
    "O200K_TOKENS_SHA256",
    "SHORT_TEXT_CHARS",
    "count_short_text",
    "count_tokens",
    "encoding",
    "is_loaded",
    "vendored_o200k_base",
]

O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""The SHA-256 OpenAI publishes for ``o200k_base.tiktoken``."""
O200K_TOKENS_SHA256 = "908e97d4505e390d828457d6ed3ae44a87fd5a8e70d739d64d4b36f9d4d7c9ab"
"""The SHA-256 of the vendored tokens (the decompressed ``marshal`` data)."""
_DATA_FILE = "o200k_base.tokens.gz"
_VOCABULARY = 199998

# The split pattern and special tokens of o200k_base, as tiktoken_ext.openai_public defines them.
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def _vendored_tokens() -> list[bytes]:
    """The vendored tokens in rank order, decompressed and checked against their SHA-256."""
    try:
        raw = gzip.decompress(resources.files("composer._data").joinpath(_DATA_FILE).read_bytes())
    except (OSError, EOFError, zlib.error) as e:
        raise TokenizerError(f"cannot read the vendored {_DATA_FILE}: {e}") from e
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_TOKENS_SHA256:
        raise TokenizerError(
            f"{_DATA_FILE} has SHA-256 {digest}, expected {O200K_TOKENS_SHA256}; reinstall composer"
        )
    tokens = marshal.loads(raw)
    if not isinstance(tokens, list) or len(tokens) != _VOCABULARY:
        raise TokenizerError(f"{_DATA_FILE} is not a list of {_VOCABULARY} tokens")
    return tokens


def vendored_o200k_base() -> bytes:
    """The published o200k_base rank file (``token rank`` lines), rebuilt from the vendored
    tokens and checked against the SHA-256 OpenAI publishes: for tiktoken's own cache."""
    raw = b"".join(
        b"%s %d\n" % (binascii.b2a_base64(token, newline=False), rank)
        for rank, token in enumerate(_vendored_tokens())
    )
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_BASE_SHA256:
        raise TokenizerError(
            f"the rebuilt o200k_base has SHA-256 {digest}, expected {O200K_BASE_SHA256}"
        )
    return raw


def _read_ranks() -> dict[bytes, int]:
    """Each token's rank: its place in the vendored list."""
    tokens = _vendored_tokens()
    return dict(zip(tokens, range(len(tokens)), strict=True))


def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, built from the vendored file on first use."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                _encoding = tiktoken.Encoding(
                    name="o200k_base",
                    pat_str=_PAT_STR,
                    mergeable_ranks=_read_ranks(),
                    special_tokens=_SPECIAL_TOKENS,
                )
    return _encoding


def is_loaded() -> bool:
    """Whether the tokenizer has been loaded in this process (ADR D2: an empty gather loads none)."""
    return _encoding is not None


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in o200k_base, as LionAGI's ``TokenCalculator.tokenize`` counts them.

    Falsy text counts 0 without loading anything; an encoding error (a non-string) is
    contained and counts 0 (ADR D3). Special-token text such as ``<|endoftext|>`` is counted as
    the ordinary text a model API reads it as (``disallowed_special=()``), so it cannot pass a
    cap or the budget as 0 tokens; lionagi 0.36 counts such text as 0.
    """
    if not text:
        return 0
    if type(text) is str:
        if len(text) <= SHORT_TEXT_CHARS:
            return _count_memoised(text)
        return _count_large(text)
    return _count(text)


SHORT_TEXT_CHARS = 1 << 13
"""Texts up to this long are remembered by ``functools.lru_cache`` (its C lookup is the
fastest for the short blocks most turns hold); longer ones by ``_Memo``, bounded by the
characters it keeps."""


def _count(text: str) -> int:
    encode = encoding().encode  # a missing or corrupt vendored file is not a count of 0
    try:
        return len(encode(text, disallowed_special=()))
    except Exception:
        if type(text) is not str:
            return 0  # not text at all: the ADR's contained error (D3)
        return _count_in_pieces(encode, text)


_PIECE_CHARS = 1 << 16
"""Pieces of a text the tokenizer refused at once: small enough for its pattern's limits."""


def _count_in_pieces(encode: Callable[..., list[int]], text: str) -> int:
    """Count a text the tokenizer cannot take whole (its split pattern gives up on a huge run of
    whitespace) as pieces cut where a run of text meets whitespace, halving a piece that still
    fails, so a budget never takes a megabyte as nothing; only what the tokenizer refuses
    character by character counts 0, the ADR's contained error."""
    total = 0
    for piece in _pieces(text, _PIECE_CHARS):
        try:
            total += len(encode(piece, disallowed_special=()))
        except Exception:
            # one character the tokenizer still refuses is its error, and counts 0 (ADR D3)
            total += _count_in_pieces(encode, piece) if len(piece) > 1 else 0
    return total


def _pieces(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters (half of it, at least two pieces),
    each cut moved back to just before a whitespace character that follows a non-space one,
    where one can be found nearby, so the pieces tokenize as the whole would."""
    size = max(1, min(size, len(text) // 2 or 1))
    pieces: list[str] = []
    start = 0
    while len(text) - start > size:
        cut = start + size
        for at in range(cut, max(start + 1, cut - 1024), -1):
            if text[at].isspace() and not text[at - 1].isspace():
                cut = at
                break
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


@functools.lru_cache(maxsize=4096)
def _count_memoised(text: str) -> int:
    """The same text is counted once: static blocks recur every turn, on every branch."""
    return _count(text)


class _Memo:
    """A long text is counted once too: a constant block (house rules, a
    service catalogue) recurs every turn on every branch, and counting 10k tokens costs
    milliseconds where a lookup costs a microsecond. Bounded by the characters it keeps (the
    least recently used texts go first), so large texts cannot grow it without limit."""

    def __init__(self, max_chars: int, max_texts: int) -> None:
        self.max_chars, self.max_texts = max_chars, max_texts
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        with self._lock:
            known = self._counts.get(text)
            if known is not None:
                self._counts.move_to_end(text)
                return known
        tokens = _count(text)  # outside the lock: another thread's count need not wait
        if len(text) > self.max_chars:
            return tokens
        with self._lock:
            if text not in self._counts:
                self._counts[text] = tokens
                self._chars += len(text)
                while self._chars > self.max_chars or len(self._counts) > self.max_texts:
                    dropped, _ = self._counts.popitem(last=False)
                    self._chars -= len(dropped)
        return tokens

    def cache_clear(self) -> None:
        """Forget every count (named as ``functools.lru_cache`` names it)."""
        with self._lock:
            self._counts.clear()
            self._chars = 0

    @property
    def chars(self) -> int:
        """Characters of the texts remembered."""
        return self._chars

    def __len__(self) -> int:
        return len(self._counts)


_count_large = _Memo(max_chars=1 << 25, max_texts=1024)
"""At most 32 Mi characters of long texts (and 1024 of them) remembered."""

count_short_text: Callable[[str], int] = _count_memoised
"""``count_tokens`` of a non-empty ``str`` of at most ``SHORT_TEXT_CHARS`` characters, called
without ``count_tokens``' own frame: the registry counts every block of every turn, and for
a gather of small blocks that frame is a tenth of the cost."""
