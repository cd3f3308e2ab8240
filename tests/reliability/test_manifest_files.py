"""Files composer reads that are not what they seem: a FIFO, a device, a binary or huge file,
a name no file system can open.

A manifest, a ``.env`` or a secret that is a FIFO used to hang every command, and a binary
one surfaced as a manifest error at a made-up ``:1:1``. Each is now refused at once: the
manifest with a located ``ManifestError``, composer's own settings with a ``SettingsError``
naming the file, printed by the CLI as one ``composer: ...`` line. The CLI runs in a
subprocess with a timeout, so a regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repofiles import put

from composer import load_manifest
from composer.errors import ManifestError, SettingsError
from composer.manifest.settings import MAX_SETTINGS_FILE_BYTES

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")

MANIFEST = """
version: 1
providers:
  - name: house
    type: static
    text: "hi ${GREETING:-there}"
"""

HANG = 60  # seconds: far beyond any real run, only there so that a hang fails the test


def composer(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``python -m composer ARGS`` in ``cwd`` without the caller's COMPOSER_* settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSER_")}
    done = subprocess.run(
        [sys.executable, "-m", "composer", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def assert_settings_error(code: int, out: str, err: str, *needles: str) -> None:
    """Exit 1 and exactly one ``composer: ...`` line naming the file and the problem."""
    assert (code, out) == (1, ""), err
    assert err.count("\n") == 1, err
    assert err.startswith("composer: "), err
    assert "Traceback" not in err
    assert ":1:1" not in err  # no manifest line is at fault
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working folder holding a valid ``m.yaml``, no ``.env`` and no COMPOSER_*."""
    for name in [n for n in os.environ if n.startswith("COMPOSER_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "m.yaml", MANIFEST)
    return tmp_path


# --------------------------------------------------------------------------- the manifest


@needs_fifo
def test_a_manifest_that_is_a_fifo_is_refused_without_waiting_for_a_writer(here: Path) -> None:
    os.mkfifo(here / "pipe.yaml")
    code, out, err = composer("validate", "pipe.yaml", cwd=here)
    assert (code, out) == (1, "")
    assert err == "pipe.yaml:1:1: cannot read manifest: not a regular file (a FIFO)\n"


@needs_fifo
def test_an_environment_file_that_is_a_fifo_is_refused(here: Path) -> None:
    os.mkfifo(here / "prod.yaml")
    code, _, err = composer("validate", ".", "--env", "prod", cwd=here)
    shown = os.path.join(".", "prod.yaml")
    assert code == 1
    assert err == f"{shown}:1:1: cannot read manifest: not a regular file (a FIFO)\n"


@needs_fifo
def test_an_extends_target_that_is_a_fifo_says_so(here: Path) -> None:
    os.mkfifo(here / "base.yaml")
    put(here / "over.yaml", "extends: base.yaml\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("over.yaml", environ={})
    assert (
        str(caught.value) == 'over.yaml:1:10: extends: cannot read "base.yaml": not a regular file'
    )


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("a" * 300 + ".yaml", "File name too long"),
        ("a\\0b", "embedded null byte"),
        ("\\ud800", "surrogates not allowed"),
    ],
    ids=["too-long", "nul-byte", "lone-surrogate"],
)
def test_an_extends_target_no_file_system_can_open_is_located(
    here: Path, target: str, problem: str
) -> None:
    put(here / "over.yaml", f'extends: "{target}"\n')
    with pytest.raises(ManifestError) as caught:
        load_manifest("over.yaml", environ={})
    assert str(caught.value).startswith('over.yaml:1:10: extends: cannot read "')
    assert problem in str(caught.value)


def test_a_manifest_path_too_long_to_open_is_located(here: Path) -> None:
    name = "b" * 300 + ".yaml"
    with pytest.raises(ManifestError) as caught:
        load_manifest(name, environ={})
    assert str(caught.value) == f"{name}:1:1: cannot read manifest: File name too long"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_not_read_as_a_manifest() -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest("/dev/zero", environ={})
    assert str(caught.value) == (
        "/dev/zero:1:1: cannot read manifest: not a regular file (a character device)"
    )


# --------------------------------------------------------------------------- the .env file


@needs_fifo
def test_a_dotenv_fifo_fails_every_command_at_once(here: Path) -> None:
    os.mkfifo(here / ".env")
    for command in (["validate", "m.yaml"], ["explain", "m.yaml"]):
        assert_settings_error(
            *composer(*command, cwd=here), '".env"', "not a regular file (a FIFO)"
        )


def test_a_binary_dotenv_is_named_with_its_problem(here: Path) -> None:
    (here / ".env").write_bytes(b"GREETING=\xff\xfe\x00\x01")
    assert_settings_error(*composer("validate", "m.yaml", cwd=here), '".env"', "not UTF-8")


def test_a_dotenv_with_a_nul_byte_is_binary(here: Path) -> None:
    (here / ".env").write_bytes(b"GREETING=a\x00b\n")
    with pytest.raises(SettingsError, match=r'\.env file "\.env": .*NUL byte'):
        load_manifest("m.yaml", environ={})


def test_an_oversized_dotenv_is_refused_before_it_is_parsed(here: Path) -> None:
    (here / ".env").write_text("# padding\n" * (MAX_SETTINGS_FILE_BYTES // 10 + 1))
    with pytest.raises(SettingsError, match=rf"larger than {MAX_SETTINGS_FILE_BYTES} bytes"):
        load_manifest("m.yaml", environ={})


def test_composer_env_file_naming_a_device_is_refused(here: Path) -> None:
    with pytest.raises(SettingsError, match=r'"/dev/null": not a regular file \(a character'):
        load_manifest("m.yaml", environ={"COMPOSER_ENV_FILE": "/dev/null"})


def test_a_virtualenv_folder_named_dotenv_is_not_a_dotenv_file(here: Path) -> None:
    (here / ".env" / "bin").mkdir(parents=True)
    assert load_manifest("m.yaml", environ={}).providers[0].text == "hi there"  # type: ignore[attr-defined]


def test_a_readable_dotenv_still_provides_variables(here: Path) -> None:
    (here / ".env").write_text("GREETING=friend\n")
    assert load_manifest("m.yaml", environ={}).providers[0].text == "hi friend"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the secrets folder


@pytest.fixture
def secrets(here: Path) -> Path:
    folder = here / "secrets"
    folder.mkdir()
    return folder


@needs_fifo
def test_a_secret_that_is_a_fifo_is_refused_not_taken_as_unset(here: Path, secrets: Path) -> None:
    os.mkfifo(secrets / "GREETING")
    result = composer("validate", "m.yaml", cwd=here, env={"COMPOSER_SECRETS_DIR": "secrets"})
    assert_settings_error(*result, str(Path("secrets", "GREETING")), "not a regular file")


def test_a_binary_secret_is_a_settings_error_naming_the_file(here: Path, secrets: Path) -> None:
    (secrets / "GREETING").write_bytes(b"\xff\xfe\x00")
    result = composer("validate", "m.yaml", cwd=here, env={"COMPOSER_SECRETS_DIR": "secrets"})
    assert_settings_error(*result, str(Path("secrets", "GREETING")), "not UTF-8")


def test_an_oversized_secret_is_refused(here: Path, secrets: Path) -> None:
    (secrets / "GREETING").write_bytes(b"x" * (MAX_SETTINGS_FILE_BYTES + 1))
    with pytest.raises(SettingsError, match=r"GREETING\": larger than"):
        load_manifest("m.yaml", environ={"COMPOSER_SECRETS_DIR": "secrets"})


def test_a_binary_composer_setting_in_the_secrets_folder_is_named(
    here: Path, secrets: Path
) -> None:
    (secrets / "composer_env").write_bytes(b"\xff")
    with pytest.raises(SettingsError, match=r'composer_env": not UTF-8'):
        load_manifest("m.yaml", environ={"COMPOSER_SECRETS_DIR": "secrets"})


@needs_fifo
def test_a_composer_setting_fifo_in_the_secrets_folder_is_refused(
    here: Path, secrets: Path
) -> None:
    os.mkfifo(secrets / "composer_env")
    result = composer("validate", "m.yaml", cwd=here, env={"COMPOSER_SECRETS_DIR": "secrets"})
    assert_settings_error(*result, "composer_env", "not a regular file (a FIFO)")


def test_a_readable_secret_is_still_a_variable(here: Path, secrets: Path) -> None:
    (secrets / "GREETING").write_text("pal\n")
    manifest = load_manifest("m.yaml", environ={"COMPOSER_SECRETS_DIR": "secrets"})
    assert manifest.providers[0].text == "hi pal"  # type: ignore[attr-defined]
