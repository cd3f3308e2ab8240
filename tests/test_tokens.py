"""count_tokens: o200k_base from the vendored, SHA-256-checked file; errors count 0 (ADR-0008 D3)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import marshal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netblock import BLOCK_SOCKETS

import composer
import composer.tokens
from composer.errors import TokenizerError

PUBLISHED_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def vendored_tokens() -> list[bytes]:
    """The decompressed token list shipped in composer/_data."""
    gz = resources.files("composer._data").joinpath("o200k_base.tokens.gz").read_bytes()
    tokens: list[bytes] = marshal.loads(gzip.decompress(gz))
    return tokens


def vendored_bytes() -> bytes:
    """The published rank file, rebuilt from the vendored tokens here, independently of
    ``composer.tokens``: line ``n`` is token ``n`` in base64 and its rank."""
    return b"".join(
        base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
        for rank, token in enumerate(vendored_tokens())
    )


def test_hello_world_is_two_tokens() -> None:
    """D3: count_tokens("hello world") == 2 in o200k_base."""
    assert composer.count_tokens("hello world") == 2
    assert composer.tokens.encoding().encode("hello world") == [24912, 2375]


@pytest.mark.parametrize("text", ["", None])
def test_empty_text_counts_zero(text: Any) -> None:
    """D3: an empty input counts 0."""
    assert composer.count_tokens(text) == 0


@pytest.mark.parametrize(
    "text",
    ["<|endoftext|>", "<|endofprompt|>", "some text <|endoftext|> more text"],
)
def test_special_token_text_counts_as_the_text_it_is(text: str) -> None:
    """Special-token strings count as ordinary text, as a model API reads them, never as 0.

    tiktoken refuses them by default and the error would count 0 (lionagi 0.36 does exactly
    that), letting any amount of text through a cap or budget.
    """
    enc = composer.tokens.encoding()
    with pytest.raises(ValueError, match="special token"):
        enc.encode(text)
    expected = len(enc.encode(text, disallowed_special=()))
    assert composer.count_tokens(text) == expected > 1
    assert 199999 not in enc.encode(text, disallowed_special=())


@pytest.mark.parametrize("value", [42, 3.5, b"bytes", object()], ids=repr)
def test_non_string_counts_zero(value: Any) -> None:
    """D3: a non-string the tokenizer cannot encode is contained and counts 0."""
    assert composer.count_tokens(value) == 0


def test_special_tokens_have_the_o200k_ids() -> None:
    """The special tokens of o200k_base, as tiktoken defines them."""
    enc = composer.tokens.encoding()
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]
    assert enc.encode("<|endofprompt|>", allowed_special="all") == [200018]
    assert enc.name == "o200k_base"


def test_encoding_is_built_once() -> None:
    """The encoding is loaded once and reused."""
    assert composer.tokens.encoding() is composer.tokens.encoding()
    assert composer.tokens.is_loaded()


def test_tokenizer_loads_on_first_count_only(tmp_path: Path) -> None:
    """D2: importing composer or counting an empty text loads nothing; the first real count does."""
    script = textwrap.dedent(
        """
        import json
        import composer
        states = [composer.tokens.is_loaded()]
        composer.count_tokens("")
        states.append(composer.tokens.is_loaded())
        composer.count_tokens("x")
        states.append(composer.tokens.is_loaded())
        print(json.dumps(states))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [False, False, True]


def test_vendored_file_matches_the_published_sha256() -> None:
    """The vendored tokens are o200k_base as OpenAI publishes it: the text rebuilt from them
    has the published SHA-256, and so has the one composer rebuilds for tiktoken's cache."""
    assert composer.tokens.O200K_BASE_SHA256 == PUBLISHED_SHA256
    assert hashlib.sha256(vendored_bytes()).hexdigest() == PUBLISHED_SHA256
    assert composer.tokens.vendored_o200k_base() == vendored_bytes()


class _FakeData:
    """Stands for ``resources.files("composer._data")`` with the given file bytes."""

    def __init__(self, payload: bytes | Exception) -> None:
        self.payload = payload

    def joinpath(self, name: str) -> _FakeData:
        return self

    def read_bytes(self) -> bytes:
        if isinstance(self.payload, Exception):
            raise self.payload
        return self.payload


@pytest.fixture
def unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the loaded encoding for one test; monkeypatch restores the real one after."""
    monkeypatch.setattr(composer.tokens, "_encoding", None)
    composer.tokens._count_memoised.cache_clear()  # so counting must load the encoding


def _serve(monkeypatch: pytest.MonkeyPatch, payload: bytes | Exception) -> None:
    fake = SimpleNamespace(files=lambda package: _FakeData(payload))
    monkeypatch.setattr(composer.tokens, "resources", fake)


def test_corrupted_file_fails_the_sha256_check(
    monkeypatch: pytest.MonkeyPatch, unloaded: None
) -> None:
    """The file is verified against its SHA-256 at load: two swapped ranks are refused."""
    tokens = vendored_tokens()
    tokens[0], tokens[1] = tokens[1], tokens[0]
    _serve(monkeypatch, gzip.compress(marshal.dumps(tokens, 4), compresslevel=1))
    with pytest.raises(TokenizerError, match=r"SHA-256 [0-9a-f]{64}, expected 908e97d4"):
        composer.tokens.encoding()
    assert not composer.tokens.is_loaded()
    with pytest.raises(TokenizerError):
        composer.count_tokens("hello world")


def test_truncated_file_is_a_tokenizer_error(
    monkeypatch: pytest.MonkeyPatch, unloaded: None
) -> None:
    """A gzip stream cut short (a partial download of a wheel, a full disk) is refused."""
    whole = gzip.compress(marshal.dumps(vendored_tokens(), 4), compresslevel=1)
    _serve(monkeypatch, whole[: len(whole) // 2])
    with pytest.raises(TokenizerError, match="cannot read"):
        composer.tokens.encoding()


def test_garbage_file_is_a_tokenizer_error(monkeypatch: pytest.MonkeyPatch, unloaded: None) -> None:
    """A file that is not gzip is a TokenizerError that keeps its cause."""
    _serve(monkeypatch, b"not gzip at all")
    with pytest.raises(TokenizerError, match="cannot read") as info:
        composer.tokens.encoding()
    assert isinstance(info.value.__cause__, OSError)


def test_missing_file_is_a_tokenizer_error(monkeypatch: pytest.MonkeyPatch, unloaded: None) -> None:
    """A missing data file is a TokenizerError, a ComposerError."""
    _serve(monkeypatch, FileNotFoundError("o200k_base.tokens.gz"))
    with pytest.raises(composer.ComposerError, match="cannot read"):
        composer.tokens.encoding()


# ---------------------------------------------------------------------------------------------
# Equivalence with tiktoken's own o200k_base, loaded offline from a prepared cache directory.

ORACLE = BLOCK_SOCKETS + textwrap.dedent(
    """
    import json, sys
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    print(json.dumps({"n_vocab": enc.n_vocab, "pat_str": enc._pat_str,
                      "special": enc._special_tokens}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        ids = enc.encode(request["text"], allowed_special=set(request["allowed"]),
                         disallowed_special=())
        print(json.dumps(ids), flush=True)
    """
)


class Oracle:
    """tiktoken's ``get_encoding("o200k_base")`` in a socket-blocked subprocess."""

    def __init__(self, cache_dir: Path) -> None:
        env = {"TIKTOKEN_CACHE_DIR": str(cache_dir), "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ORACLE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cache_dir,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        header = self.stdout.readline()
        assert header, "tiktoken could not load o200k_base offline from the cache"
        self.header = json.loads(header)

    def encode(self, text: str, allowed: tuple[str, ...] = ()) -> list[int]:
        self.stdin.write(json.dumps({"text": text, "allowed": list(allowed)}) + "\n")
        self.stdin.flush()
        ids: list[int] = json.loads(self.stdout.readline())
        return ids

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait()
        self.stdout.close()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    key = hashlib.sha1(O200K_URL.encode()).hexdigest()
    (cache / key).write_bytes(vendored_bytes())
    oracle = Oracle(cache)
    yield oracle
    oracle.close()
    assert oracle.proc.returncode == 0


def ours(text: str, allowed: tuple[str, ...] = ()) -> list[int]:
    return composer.tokens.encoding().encode(
        text, allowed_special=set(allowed), disallowed_special=()
    )


def test_same_definition_as_tiktoken(oracle: Oracle) -> None:
    """The vocabulary size, split pattern and special tokens are tiktoken's o200k_base."""
    enc = composer.tokens.encoding()
    assert oracle.header == {
        "n_vocab": enc.n_vocab,
        "pat_str": enc._pat_str,
        "special": enc._special_tokens,
    }


SAMPLES = [
    "hello world",
    "Hello, World! How's it going? I'm fine, they'll see, we'd know, you've won.",
    "HELLO WORLD SHOUTING'S",
    "def f(x: int) -> int:\n    return x ** 2  # square\n",
    'for (int i = 0; i < n; ++i) { printf("%d\\n", a[i]); }',
    "1 12 123 1234 12345 3.14159 -42 1e-9 0x1F 1,000,000",
    "spaces:     many      \t\ttabs\n\n\nnewlines\r\n\r\ncrlf   ",
    "   leading and trailing   ",
    "naïve café résumé Ångström façade jalapeño",
    "日本語のテキストと中文文本와 한국어 텍스트",
    "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם",
    "emoji 🚀🔥👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "math ∑∫√∞ ≠ ≤ ≥ → ←  ½ ¼",
    "<html><body class='x'>&amp;&lt;</body></html>",
    "mixed<|endoftext|>special",
    "\u200b\u00a0zero width and nbsp\ufeff",
    "a" * 500,
    "",
]


@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_token_ids_equal_tiktoken(oracle: Oracle, text: str) -> None:
    """count_tokens' encoding gives exactly tiktoken's o200k_base token ids."""
    assert ours(text) == oracle.encode(text)
    if "<|" in text:
        allowed = ("<|endoftext|>",)
        assert ours(text, allowed) == oracle.encode(text, allowed)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.text(max_size=120),
        st.lists(
            st.sampled_from(
                [
                    " ",
                    "  ",
                    "\n",
                    "\r\n",
                    "\t",
                    "0",
                    "123",
                    "4567",
                    "the",
                    "The",
                    "'s",
                    "'LL",
                    "é",
                    "ß",
                    "日本",
                    "🚀",
                    "👍🏽",
                    "<|",
                    "|>",
                    "//",
                    "==",
                    "a.b",
                    "_x",
                    "X",
                ]
            ),
            max_size=40,
        ).map("".join),
    )
)
def test_random_text_token_ids_equal_tiktoken(oracle: Oracle, text: str) -> None:
    """Random text (unicode, whitespace runs, digits, contractions) encodes as tiktoken does."""
    assert ours(text) == oracle.encode(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.text(alphabet=" \t\n\r\u00a0\u3000", max_size=300))
def test_any_text_the_tokenizer_takes_counts_exactly_as_tiktoken(text: str) -> None:
    """Counting changes nothing for text tiktoken encodes (special-token strings as text)."""
    expected = len(composer.tokens.encoding().encode(text, disallowed_special=()))
    assert composer.count_tokens(text) == expected


def test_tiktoken_gives_up_on_a_megabyte_of_spaces() -> None:
    """Why the counting below exists: the error would otherwise count 0 (ADR D3)."""
    with pytest.raises(ValueError, match=r"[Rr]egex"):
        composer.tokens.encoding().encode(" " * 1_000_000, disallowed_special=())


@pytest.mark.parametrize("unit", [" ", "\t", " \t", "\u3000", "\n", "\r\n"])
def test_a_megabyte_of_whitespace_is_never_counted_as_nothing(unit: str) -> None:
    """Text the tokenizer cannot take whole is counted in pieces, close to what its parts
    count, instead of the error's 0."""
    text = unit * (1_000_000 // len(unit))
    tenth = composer.count_tokens(text[: len(text) // 10])
    assert 9 * tenth <= composer.count_tokens(text) <= 11 * tenth


class _CountingEncoding:
    """o200k_base, counting the texts it encodes."""

    def __init__(self) -> None:
        self.real = composer.tokens.encoding()
        self.encoded: list[int] = []

    def encode(self, text: str, **options: Any) -> list[int]:
        self.encoded.append(len(text))
        return self.real.encode(text, **options)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> _CountingEncoding:
    spy = _CountingEncoding()
    monkeypatch.setattr(composer.tokens, "encoding", lambda: spy)
    monkeypatch.setattr(composer.tokens, "_count_large", composer.tokens._Memo(1 << 20, 8))
    return spy


def test_a_long_constant_block_is_counted_once(counting: _CountingEncoding) -> None:
    house_rules = "Answer in English and put the exact command first. " * 2000  # ~100k chars
    first = composer.count_tokens(house_rules)
    again = [composer.count_tokens("".join([house_rules])) for _ in range(3)]  # equal, not same
    assert again == [first] * 3
    assert first == len(counting.real.encode(house_rules))
    assert counting.encoded == [len(house_rules)]  # encoded on the first turn only


def test_the_long_text_memo_is_bounded_by_characters(counting: _CountingEncoding) -> None:
    memo = composer.tokens._count_large
    texts = [f"{n} " + "x y z " * 60_000 for n in range(5)]  # 360k characters each
    counts = [composer.count_tokens(text) for text in texts]
    assert memo.chars <= memo.max_chars
    assert len(memo) == 2  # 1 Mi characters hold two of them: the least recently used went
    assert composer.count_tokens(texts[-1]) == counts[-1]
    assert len(counting.encoded) == 5  # the newest is still remembered
    assert composer.count_tokens(texts[0]) == counts[0]
    assert len(counting.encoded) == 6  # the oldest was forgotten, and counted again
    huge = "word " * 300_000  # 1.5 Mi characters: more than the whole memo keeps
    assert composer.count_tokens(huge) == len(counting.real.encode(huge))
    assert memo.chars <= memo.max_chars
    assert huge not in memo._counts
