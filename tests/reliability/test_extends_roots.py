"""``extends`` as a way to read other files: ``/etc/shadow``, ``../``, a symlink leading out.

Whoever may edit a manifest could once name any file of the machine in ``extends``, and
``validate`` quoted it back line by line, each as an unknown key. Now an ``extends`` stays in
the folder of the manifest loaded (symlinks followed) unless ``COMPOSER_EXTENDS_ROOTS`` lists
the folder it leads to, and a file that is no manifest is reported as such at the ``extends``
line, none of it shown. The CLI runs in a subprocess, as an operator runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repofiles import put

from composer import load_manifest
from composer.errors import ManifestError

SHADOW = "toor: $6$saltsalt$hashedpassword\ndaemonx: '*:19000:0:99999:7:::'\nsecretuser: hunter2\n"
"""A password file whose lines read as YAML keys: the kind of file validate used to quote."""
LEAKS = ("toor", "saltsalt", "hashedpassword", "daemonx", "19000", "secretuser", "hunter2")

BASE = "version: 1\nproviders:\n  - {name: house, type: static, text: hi}\n"

NOT_A_MANIFEST = {
    "plain-text": "toor:x:0:0:toor:/toor:/bin/sh\nsecretuser:x:1000:1000::/home/hunter2:/bin/sh\n",
    "scalar": "hunter2\n",
    "list": "- toor\n- hunter2\n",
    "other-keys": SHADOW,
    "json": '{"secretuser": "hunter2", "toor": ["saltsalt"]}\n',
    "empty-mapping": "{}\n",
}


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``app/``, where the manifest lives, beside ``etc/shadow``; no COMPOSER_* set."""
    for name in [n for n in os.environ if n.startswith("COMPOSER_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "etc" / "shadow", SHADOW)
    (tmp_path / "app").mkdir()
    return tmp_path / "app"


def refused(path: Path, environ: dict[str, str] | None = None) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_manifest(path, environ=environ or {})
    error = caught.value
    assert len(error.errors) == 1, str(error)
    assert not any(leak in str(error) for leak in LEAKS), str(error)
    return error


def composer(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``python -m composer ARGS`` in ``cwd``, without the caller's COMPOSER_* settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSER_")}
    done = subprocess.run(
        [sys.executable, "-m", "composer", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def assert_outside(error: ManifestError, path: Path, target: str) -> None:
    assert (error.path, error.line, error.column) == (str(path), 1, 10)
    assert error.message.startswith(f'extends: "{target}" is outside "{path.parent.resolve()}"')
    assert "COMPOSER_EXTENDS_ROOTS" in error.message


def test_an_absolute_path_to_a_password_file_is_refused_unread(app: Path) -> None:
    shadow = app.parent / "etc" / "shadow"
    path = put(app / "m.yaml", f"extends: {shadow}\n")
    assert_outside(refused(path), path, str(shadow))


def test_a_dot_dot_escape_is_refused(app: Path) -> None:
    path = put(app / "m.yaml", "extends: sub/../../etc/shadow\n")
    (app / "sub").mkdir()
    assert_outside(refused(path), path, "sub/../../etc/shadow")


def test_an_escape_from_a_base_in_a_subfolder_is_refused(app: Path) -> None:
    """The folder is the manifest loaded's: a base deeper in it may not lead further out."""
    put(app / "shared" / "base.yaml", "version: 1\nextends: ../../etc/shadow\n")
    path = put(app / "m.yaml", "extends: shared/base.yaml\n")
    error = refused(path)
    assert (error.path, error.line) == (str(app / "shared" / "base.yaml"), 2)
    assert "is outside" in error.message


def test_a_symlink_inside_the_folder_that_leads_out_is_refused(app: Path) -> None:
    """Even to a valid manifest: where the file is decides, not what it holds."""
    put(app.parent / "elsewhere" / "base.yaml", BASE)
    (app / "base.yaml").symlink_to(app.parent / "elsewhere" / "base.yaml")
    path = put(app / "m.yaml", "extends: base.yaml\n")
    assert_outside(refused(path), path, "base.yaml")


def test_a_symlink_that_stays_inside_the_folder_is_followed(app: Path) -> None:
    """A Kubernetes ConfigMap mounts each file as a symlink into a hidden folder beside it."""
    put(app / "..data" / "base.yaml", BASE)
    (app / "base.yaml").symlink_to(Path("..data") / "base.yaml")
    path = put(app / "m.yaml", "extends: base.yaml\nbudget: 9\n")
    assert load_manifest(path, environ={}).budget == 9


def test_a_folder_listed_in_the_variable_may_be_extended(app: Path) -> None:
    shared = put(app.parent / "shared" / "base.yaml", BASE).parent
    path = put(app / "m.yaml", f"extends: {shared / 'base.yaml'}\nbudget: 7\n")
    assert "is outside" in refused(path).message
    roots = os.pathsep.join([str(app.parent / "nowhere"), "", str(shared)])
    manifest = load_manifest(path, environ={"COMPOSER_EXTENDS_ROOTS": roots})
    assert (manifest.budget, [p.name for p in manifest.providers]) == (7, ["house"])


@pytest.mark.parametrize("text", NOT_A_MANIFEST.values(), ids=NOT_A_MANIFEST.keys())
def test_a_file_that_is_no_manifest_is_reported_once_and_not_quoted(app: Path, text: str) -> None:
    put(app / "data.txt", text)
    path = put(app / "m.yaml", "version: 1\nextends: data.txt\n")
    error = refused(path)
    assert (error.path, error.line, error.column) == (str(path), 2, 10)
    assert error.message.startswith('extends: "data.txt" is not a manifest')


def test_an_allowed_root_does_not_make_a_password_file_a_manifest(app: Path) -> None:
    shadow = app.parent / "etc" / "shadow"
    path = put(app / "m.yaml", f"extends: {shadow}\n")
    error = refused(path, {"COMPOSER_EXTENDS_ROOTS": str(shadow.parent)})
    assert error.message.startswith(f'extends: "{shadow}" is not a manifest')


def test_validate_shows_nothing_of_a_file_outside_or_no_manifest(app: Path) -> None:
    shadow = app.parent / "etc" / "shadow"
    put(app / "m.yaml", f"extends: {shadow}\n")
    for env in ({}, {"COMPOSER_EXTENDS_ROOTS": str(shadow.parent)}):
        code, out, err = composer("validate", "app/m.yaml", cwd=app.parent, env=env)
        assert (code, out) == (1, ""), err
        assert err.count("\n") == 1, err
        # named relatively, as the manifest was: etc/ is under the working directory
        assert err.startswith('app/m.yaml:1:10: extends: "etc/shadow" is '), err
        assert not any(leak in err for leak in LEAKS), err
