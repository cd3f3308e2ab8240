"""A standing fuzz suite: whole manifests, mutated as trees, through ``composer.load_manifest``.

``tests/manifest/test_manifest_property.py`` mutates the characters of small seeds read with two
test-only types. This suite mutates real manifests as trees: the bundled ``configs/`` (every
installed provider type, ``extends`` chains) and a few written here. Keys are deleted,
duplicated, renamed and retyped; scalars swapped for lists and maps; odd unicode inserted;
values nested deeper than the limit; numbers made huge; raw YAML (tags, anchors, aliases,
merge keys) spliced in; ``${VAR}`` fed odd values; and the ``.env`` and secret files a manifest
reads fuzzed too.

The only outcomes allowed are a ``Manifest`` (which ``explain``, ``diff`` and ``validate``'s
checks can then describe) or a ``ManifestError`` whose every line is located and printable,
and a ``SettingsError`` only when a settings file is what is broken. Never another exception,
and never the loader's catch-all "cannot load manifest (...)", which means something
unexpected escaped a validator.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repofiles import CONFIGS

from composer import load_manifest
from composer.catalog import ProviderTypes
from composer.errors import ManifestError, SettingsError
from composer.inspect.checks import manifest_warnings
from composer.inspect.explain import diff_manifests, explain_lines
from composer.manifest import Manifest
from composer.manifest.settings import MAX_SETTINGS_FILE_BYTES
from composer.manifest.yamlnodes import MAX_DEPTH, printable

TYPES = ProviderTypes.installed()
LOCATED = re.compile(r"[^\n]*:\d+:\d+: \S[^\n]*")
CATCH_ALL = "cannot load manifest ("

FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- seeds

Files = dict[str, str]

BUNDLED: Files = {p.name: p.read_text(encoding="utf-8") for p in CONFIGS.glob("*.yaml")}

FULL = """
version: 1
budget: 900
runtime: {gather: concurrent, timeout_s: 2.5, wrap: "<{{ provider.name }}>{{ text }}</x>"}
providers:
  - name: rules
    type: static
    priority: 9
    when: "'x' in instruction.text"
    cache: {ttl_s: 30, key: "{{ instruction.text }}", max_entries: 8}
    text: "Rules for {{ branch.name }} ${A}"
  - name: notes
    type: memory
    source: {jsonl: memory.jsonl}
    query: {text: "{{ instruction.text }}", tags: [a, "${A}"], filters: {k: 1}, limit: 2}
    template: "- {{ item.content }}"
    writeback: {tags: [t], metadata: {m: [1, 2.5, null]}}
  - name: api
    type: http
    max_tokens: 50
    request:
      method: POST
      url: "${URL:-http://127.0.0.1:9}/q"
      json: {q: "{{ instruction.text }}", n: [1, {deep: true}]}
      headers: {X-Token: "${TOKEN}"}
      allowed_hosts: [127.0.0.1]
    response: {template: "{{ json }}"}
  - name: off
    type: static
    enabled: false
    text: "${NEVER_SET}"
"""
CHAIN: Files = {
    "base.yaml": "version: 1\nbudget: 10\nproviders:\n  - {name: p, type: static, text: hi}\n",
    "mid.yaml": "extends: ${BASE:-base.yaml}\nproviders:\n  - {name: p, priority: 3}\n",
    "over.yaml": "extends: mid.yaml\nbudget: 20\nproviders:\n  - {name: q, type: static, text: x}\n",
}
SEEDS: list[tuple[Files, str]] = [
    *((BUNDLED, entry) for entry in ("base.yaml", "dev.yaml", "prod.yaml", "staging.yaml")),
    ({"full.yaml": FULL}, "full.yaml"),
    (CHAIN, "over.yaml"),
]

ENVIRON = {
    "A": "alpha",
    "TOKEN": "tok-123456",
    "STATUS_TOKEN": "st-987654",
    "COMPOSER_ENV_FILE": os.path.join("@ROOT@", "none.env"),  # not the working folder's .env
}

# --------------------------------------------------------------------------- odd values

ODD_TEXT = st.text(
    st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp", "Co", "So", "Mn", "Lo"])
    | st.sampled_from(["\u202e", "\x85", "\ufeff", "\U0001f600", "$", "{", "}"]),
    min_size=1,
    max_size=8,
)
ODD_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "${",
        "${A",
        "${}",
        "${1X}",
        "$${A}",
        "${A:-}",
        "${UNSET}",
        "{{",
        "{%",
        "{{ x.__class__ }}",
        "\ud800",
        "a\x00b",
        "../../etc/passwd",
        "/",
        "~",
        "NaN",
        "1e999",
        "0x1F",
        "yes",
        "null",
    ]
)
HUGE = st.sampled_from(
    [
        "1" + "0" * 5000,
        "-" + "9" * 4400,
        "1e99999",
        "-.inf",
        ".nan",
        "0o777777777777777777777",
        str(2**63),
        str(-(2**64)),
        "0x" + "f" * 40,
        "1_000",
        "+12",
        "-0",
        "00007",
    ]
)
RAW_YAML = st.sampled_from(
    [
        "!!python/object:os.system",
        "!!binary aGk=",
        "&a [1, *a]",
        "*nowhere",
        "{<<: {a: 1}}",
        "!!set {a, b}",
        "!!omap [a: 1]",
        "? [a]\n: b",
        "!!float 1",
        "!str x",
        "[[[[[[[]]]]]]]",
        "{a: 1, a: 2}",
        "'unterminated",
        "[1, 2",
        "- - - -",
        "|\n  block",
        ">-",
        "%YAML 1.1",
    ]
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), ODD_TEXT, ODD_STRINGS)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT | SCALARS, inner, max_size=3)
    ),
    max_leaves=8,
)


@dataclass(frozen=True)
class Raw:
    """Text spliced into the dumped YAML as it is (a placeholder is dumped, then replaced);
    unequal to any string, so as a key it can repeat one."""

    text: str


def nested(depth: int, leaf: Any, as_map: bool) -> Any:
    for _ in range(depth):
        leaf = {"k": leaf} if as_map else [leaf]
    return leaf


# --------------------------------------------------------------------------- tree mutations


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``data`` (the root too), parents before children."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths(value, (*prefix, index))
    return found


def replaced(data: Any, path: tuple[Any, ...], change: Callable[[Any], Any]) -> Any:
    """A copy of ``data`` with the value at ``path`` replaced by ``change(value)``."""
    if not path:
        return change(data)
    head, *rest = path
    if isinstance(data, dict):
        return {k: replaced(v, tuple(rest), change) if k == head else v for k, v in data.items()}
    return [replaced(v, tuple(rest), change) if i == head else v for i, v in enumerate(data)]


@st.composite
def mutation(draw: st.DrawFn, value: Any) -> Any:
    """``value`` changed one way: retyped, wrapped, unwrapped, made odd, huge or raw YAML,
    nested past the depth limit; or one of its keys or items deleted, renamed or duplicated."""
    kind = draw(
        st.sampled_from(
            ["retype", "wrap", "unwrap", "odd", "huge", "raw", "deep", "delete", "rename", "dup"]
        )
    )
    if kind == "retype":
        return draw(VALUES)
    if kind == "wrap":
        return draw(
            st.sampled_from(
                [[value], {"value": value}, {value: value} if _hashable(value) else [[value]]]
            )
        )
    if kind == "unwrap":
        if isinstance(value, dict) and value:
            return next(iter(value.values()))
        if isinstance(value, list) and value:
            return value[0]
        return draw(st.sampled_from([[], {}]))
    if kind == "odd":
        text = value if isinstance(value, str) else str(value)
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + draw(ODD_TEXT | ODD_STRINGS) + text[cut:]
    if kind == "huge":
        return Raw(draw(HUGE))
    if kind == "raw":
        return Raw(draw(RAW_YAML))
    if kind == "deep":
        depth = draw(st.integers(MAX_DEPTH - 4, MAX_DEPTH + 4))
        return nested(
            depth, value if not isinstance(value, dict | list) else 1, draw(st.booleans())
        )
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value, key=str)))
        if kind == "delete":
            return {k: v for k, v in value.items() if k != key}
        if kind == "rename":
            name = str(key)
            new = draw(
                st.sampled_from([name.upper(), name + "s", f" {name}", name[:-1]]) | ODD_TEXT
            )
            return {new if k == key else k: v for k, v in value.items()}
        return {**value, Raw(str(key)): value[key]}  # "dup": the key again, once dumped
    if isinstance(value, list) and value:
        index = draw(st.integers(0, len(value) - 1))
        if kind == "delete":
            return value[:index] + value[index + 1 :]
        return [*value[: index + 1], value[index], *value[index + 1 :]]
    return draw(VALUES)


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def dump(data: Any, *, flow: bool, ascii_only: bool) -> str:
    """``data`` as YAML; each ``Raw`` spliced in as written (a key may repeat that way)."""
    raws: list[str] = []

    def swap(node: Any) -> Any:
        if isinstance(node, Raw):
            raws.append(node.text)
            return f"fuzzraw{len(raws) - 1}z"
        if isinstance(node, dict):
            return {swap(k): swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    text = yaml.safe_dump(
        swap(data),
        default_flow_style=flow,
        allow_unicode=not ascii_only,
        sort_keys=False,
        width=2**16,
    )
    for index, raw in enumerate(raws):
        text = text.replace(f"fuzzraw{index}z", raw)
    return text


@st.composite
def mutated_seed(draw: st.DrawFn) -> tuple[Files, str]:
    """A seed's files with one to three tree mutations in one of them (often the entry)."""
    files, entry = draw(st.sampled_from(SEEDS))
    target = draw(st.sampled_from([entry, entry, *sorted(files)]))
    data = yaml.safe_load(files[target])
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(data)))
        data = replaced(data, where, lambda value: draw(mutation(value)))
    text = dump(data, flow=draw(st.booleans()), ascii_only=draw(st.booleans()))
    return {**files, target: text}, entry


# --------------------------------------------------------------------------- the oracle


def load(
    files: Files, entry: str, environ: Mapping[str, str], extra: Mapping[str, bytes] = {}
) -> Manifest | ManifestError | SettingsError:
    """Write ``files`` (and ``extra``) to a fresh folder and load ``entry``; the outcome."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "corpus").mkdir()
        (root / "memory.jsonl").write_text('{"content": "x"}\n', encoding="utf-8")
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        for name, data in extra.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        environ = {k: v.replace("@ROOT@", folder) for k, v in environ.items()}
        try:
            return load_manifest(root / entry, environ=environ, types=TYPES)
        except (ManifestError, SettingsError) as e:  # anything else fails the test
            return e


def check(outcome: Manifest | ManifestError | SettingsError, *, settings_fuzzed: bool) -> None:
    """A described Manifest, or located printable errors; a SettingsError only if allowed."""
    if isinstance(outcome, SettingsError):
        assert settings_fuzzed, outcome
        return
    if isinstance(outcome, ManifestError):
        assert outcome.errors
        for line in str(outcome).splitlines():
            assert LOCATED.fullmatch(line), line
            assert printable(line) == line, line
            assert CATCH_ALL not in line, line
        return
    assert isinstance(outcome, Manifest)
    assert explain_lines(outcome)
    manifest_warnings(outcome)
    assert diff_manifests(outcome, outcome) == []


# Values as os.environ holds them, lone surrogates included (its spelling of bytes that are not
# UTF-8): such a secret must be masked like any other.
ENV_VALUES = st.dictionaries(
    st.sampled_from(["A", "TOKEN", "URL", "BASE", "STATUS_URL", "STATUS_TOKEN"]),
    ODD_TEXT | ODD_STRINGS | st.sampled_from(["base.yaml", "mid.yaml", "http://[::1", "\udcff"]),
    max_size=3,
)

# --------------------------------------------------------------------------- the tests


def test_every_seed_loads_unmutated() -> None:
    """The seeds are valid, so a mutation is what any error is about."""
    for files, entry in SEEDS:
        outcome = load(files, entry, ENVIRON)
        assert isinstance(outcome, Manifest), outcome
        check(outcome, settings_fuzzed=False)


@settings(FUZZ, max_examples=250)
@given(seed=mutated_seed(), environ=ENV_VALUES)
def test_tree_mutations_of_real_manifests(seed: tuple[Files, str], environ: dict[str, str]) -> None:
    files, entry = seed
    check(load(files, entry, {**ENVIRON, **environ}), settings_fuzzed=False)


@settings(FUZZ, max_examples=100)
@given(document=st.dictionaries(ODD_TEXT | SCALARS, VALUES, max_size=5), flow=st.booleans())
def test_random_documents_with_odd_keys_and_values(document: dict[Any, Any], flow: bool) -> None:
    text = dump({"version": 1, **document}, flow=flow, ascii_only=False)
    check(load({"m.yaml": text}, "m.yaml", ENVIRON), settings_fuzzed=False)


SETTINGS_BYTES = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"TOKEN=a\x00b\n", b"\xef\xbb\xbfTOKEN=bom\n", b"TOKEN='unclosed\n", b"=\n"]),
    st.just(b"#" * (MAX_SETTINGS_FILE_BYTES + 1)),
)


@settings(FUZZ, max_examples=80)
@given(data=SETTINGS_BYTES, where=st.sampled_from(["dotenv", "secret"]))
def test_fuzzed_settings_files_fail_only_as_settings_errors(data: bytes, where: str) -> None:
    """A .env or secret file is read whatever it holds; only undecodable, NUL-holding or oversized
    content is a SettingsError, and it names the file."""
    extra = {"fuzzed.env": data} if where == "dotenv" else {"secrets/TOKEN": data}
    environ = {k: v for k, v in ENVIRON.items() if k != "TOKEN"}
    environ["COMPOSER_ENV_FILE" if where == "dotenv" else "COMPOSER_SECRETS_DIR"] = os.path.join(
        "@ROOT@", "fuzzed.env" if where == "dotenv" else "secrets"
    )
    outcome = load({"full.yaml": FULL}, "full.yaml", environ, extra)
    check(outcome, settings_fuzzed=True)
    assert isinstance(outcome, SettingsError) == unusable(data), (outcome, data[:80])
    if isinstance(outcome, SettingsError):
        assert ("fuzzed.env" if where == "dotenv" else "TOKEN") in str(outcome)


def unusable(data: bytes) -> bool:
    """What composer refuses in a settings file: not UTF-8, a NUL byte, over the size limit."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\x00" in data or len(data) > MAX_SETTINGS_FILE_BYTES


def test_a_dump_round_trips_raw_text() -> None:
    """The harness itself: ``Raw`` text lands in the document as written, keys may repeat."""
    text = dump({"a": Raw("1" + "0" * 30), Raw("a"): [Raw("*x")]}, flow=True, ascii_only=True)
    assert text == "{a: 1000000000000000000000000000000, a: [*x]}\n"
    assert paths({"a": [1, {"b": 2}]}) == [(), ("a",), ("a", 0), ("a", 1), ("a", 1, "b")]
