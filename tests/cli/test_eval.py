"""``composer eval``: the team's labelled questions measured against the manifests, alone, side
by side (environments, folders, git revisions), gated by floors, as JSON and JUnit."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from repofiles import CONFIGS

from composer.cli import main
from composer.inspect.documents import EvalDocument

QUESTIONS = str(CONFIGS / "questions.yaml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def document(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, EvalDocument]:
    code, out, _ = run(capsys, *args, "--json")
    return code, EvalDocument.model_validate_json(out)


def test_the_bundled_questions_print_the_documented_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = document(capsys, QUESTIONS)
    assert code == 0
    assert doc.version == 1
    assert doc.k == 10
    assert doc.questions >= 20
    assert set(doc.providers) == {"runbooks", "team-memory"}
    for measures in [*doc.providers.values(), doc.overall]:
        for value in measures.model_dump().values():
            assert 0 <= value <= 1
    runbooks = doc.providers["runbooks"]
    # top_k 2 under a 600-token cap: every labelled passage ranks in the first 10, not all reach
    assert runbooks.recall == 1.0
    assert 0 < runbooks.injected_recall < 1
    assert doc.problems == []
    assert doc.compared is None


def test_the_table_names_each_provider_and_the_overall_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, QUESTIONS, "--k", "5")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("23 questions, k=5")
    header = next(line for line in lines if line.startswith("provider"))
    assert "nDCG@5" in header
    assert "injected recall" in header
    assert [line.split()[0] for line in lines[lines.index(header) + 1 :]] == [
        "runbooks",
        "team-memory",
        "overall",
        "tokens",
    ]
    assert lines[-1].startswith("tokens admitted per question: ")


def test_a_floor_fails_the_run_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, QUESTIONS, "--min", "runbooks.injected_recall=1")
    assert code == 1
    assert "below the floor: runbooks.injected_recall >= 1: got 0." in out
    code, out, _ = run(
        capsys, QUESTIONS, "--min", "overall.recall=0.9", "--min", "runbooks.mrr=0.5"
    )
    assert code == 0
    assert "below the floor" not in out
    code, out, _ = run(capsys, QUESTIONS, "--min", "status.ndcg=0.1")
    assert code == 1
    assert "no question labels a provider named 'status'" in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("runbooks", "expected PROVIDER.MEASURE=VALUE"),
        ("runbooks.precision=0.5", 'no measure "precision"'),
        ("runbooks.ndcg=high", '"high" is not a number'),
        ("runbooks.ndcg=2", "from 0 to 1"),
    ],
)
def test_a_malformed_floor_is_a_usage_error(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, QUESTIONS, "--min", spec)
    assert code == 2
    assert message in err


def test_two_environments_side_by_side_with_deltas(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = document(capsys, QUESTIONS, "--env", "dev", "--env", "prod")
    assert code == 0
    assert doc.compared is not None
    assert doc.delta is not None
    dev, prod = doc.compared
    assert (dev.label, prod.label) == ("env dev", "env prod")
    # prod takes 3 runbook passages where dev takes 2: more of the labelled ones reach the model
    change = doc.delta["runbooks"]
    assert change.injected_recall > 0
    assert change.injected_recall == pytest.approx(
        prod.providers["runbooks"].injected_recall - dev.providers["runbooks"].injected_recall,
        abs=1e-6,
    )
    assert doc.providers == prod.providers  # the document's figures are the second side's


def test_two_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    shutil.copytree(CONFIGS, other, ignore=shutil.ignore_patterns("*.sqlite*"))
    base = other / "base.yaml"
    base.write_text(base.read_text().replace("    top_k: 2\n", "    top_k: 1\n"))
    code, out, err = run(capsys, QUESTIONS, str(other))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("runbooks     injected recall"))
    assert row.split()[-1].startswith("-")  # one passage a turn: fewer labelled ones reach it


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    )


def test_two_revisions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    shutil.copytree(CONFIGS, root / "configs", ignore=shutil.ignore_patterns("*.sqlite*"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "configs")
    git(root, "commit", "-q", "-m", "first")
    base = root / "configs" / "base.yaml"
    base.write_text(base.read_text().replace("    top_k: 2\n", "    top_k: 4\n"))
    git(root, "commit", "-q", "-am", "four passages")
    monkeypatch.chdir(root)
    code, doc = document(capsys, "configs/questions.yaml", "--rev", "HEAD~1..HEAD")
    assert code == 0
    assert doc.compared is not None
    assert doc.delta is not None
    assert [side.label for side in doc.compared] == ["HEAD~1", "HEAD"]
    assert doc.delta["runbooks"].injected_recall > 0
    assert doc.delta["runbooks"].ndcg == 0  # the ranking itself did not change
    _, out, _ = run(capsys, "configs/questions.yaml", "--rev", "HEAD~1..HEAD")
    assert "HEAD~1 -> HEAD" in out


def test_junit_has_a_case_per_provider_with_its_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "eval.xml"
    code, _, _ = run(capsys, QUESTIONS, "--junit", str(report), "--min", "runbooks.mrr=0.99")
    assert code == 1
    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"runbooks", "team-memory", "overall"}
    assert cases["runbooks"].find("failure") is not None
    assert cases["team-memory"].find("failure") is None
    names = [p.get("name") for p in cases["overall"].iter("property")]
    assert names == ["ndcg", "recall", "mrr", "injected_recall", "relevant_token_share"]


def test_mistakes_in_the_file_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(CONFIGS, tmp_path / "c", ignore=shutil.ignore_patterns("*.sqlite*"))
    bad = tmp_path / "c" / "bad.yaml"
    bad.write_text(
        "manifest: .\nenv: dev\nquestions:\n"
        "  - instruction: x\n    relevant: {runbooks: {a.md: 0}}\n"
        "  - instruction: y\n    relevant: {nowhere: [a.md]}\n"
    )
    code, _, err = run(capsys, str(bad))
    assert code == 1
    assert f"{bad}:5:15: questions[0].relevant:" in err
    assert "a gain must be above 0" in err
    bad.write_text(
        "manifest: .\nenv: dev\nquestions:\n  - instruction: y\n    relevant: {nowhere: [a.md]}\n"
    )
    code, _, err = run(capsys, str(bad))
    assert code == 1
    assert f'{bad}:5:16: no provider "nowhere"' in err


def test_an_environment_that_does_not_load_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(CONFIGS, tmp_path / "c", ignore=shutil.ignore_patterns("*.sqlite*"))
    questions = tmp_path / "c" / "questions.yaml"
    questions.write_text(
        questions.read_text().replace("  STATUS_TOKEN: placeholder-for-eval\n", "  OTHER: x\n")
    )
    code, _, err = run(capsys, str(questions), "--env", "prod")
    assert code == 1
    assert err.count("environment prod does not load") == 1
    assert 'STATUS_TOKEN" is not set' in err


def test_json_on_a_usage_error_prints_nothing_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, QUESTIONS, "--k", "0", "--json")
    assert code == 2
    assert out == ""
    assert "--k must be at least 1" in err
    code, out, err = run(capsys, QUESTIONS, "--env", "dev", "--env", "prod", "--rev", "HEAD")
    assert code == 2
    assert json.dumps(out) == '""'
