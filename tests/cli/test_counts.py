"""A count is printed with its noun in the right number: ``1 provider``, never ``1 providers``."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.cli.main import main


def test_validate_says_one_provider(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders: [{name: r, type: static, text: x}]\n")
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: valid; 1 provider (1 enabled), budget 2000\n"
