"""The curated facade: composer.__all__ is exactly the public API of design.md, sorted."""

from __future__ import annotations

import composer

# Update this literal set when a public name is added on purpose (design.md "Public API").
EXPECTED = {
    "Branch",
    "ComposerError",
    "ContextProvider",
    "ContextProviderRegistry",
    "Instruction",
    "Manifest",
    "ManifestError",
    "ManifestWatcher",
    "PreparedTurn",
    "ProviderError",
    "ProviderReport",
    "TemplateError",
    "attach",
    "build_registry",
    "count_tokens",
    "load_manifest",
    "prepare_turn",
}


def test_all_is_exactly_the_expected_names() -> None:
    assert set(composer.__all__) == EXPECTED


def test_all_is_sorted_without_duplicates() -> None:
    assert composer.__all__ == sorted(composer.__all__)
    assert len(composer.__all__) == len(set(composer.__all__))


def test_every_exported_name_exists() -> None:
    missing = [name for name in composer.__all__ if not hasattr(composer, name)]
    assert missing == []


def test_exported_names_live_in_composer() -> None:
    """Every export is composer's own object, not a re-export of a third-party one."""
    for name in composer.__all__:
        module = getattr(getattr(composer, name), "__module__", "")
        assert module.startswith("composer."), (name, module)
