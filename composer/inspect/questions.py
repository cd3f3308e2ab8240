"""A file of the team's own labelled questions, for ``composer eval``.

It names its manifest and environment as a test file does (``manifest: .``, ``env:``), and
holds questions, each an instruction (with optional system text and branch) and, per
provider, the passages that should reach the model: a list of labels (each of gain 1) or a
mapping of label to gain, for graded judgements (``composer.inspect.metrics`` says how a label
names a passage, a file or a memory item). Read as located YAML, like a manifest: a mistake
is reported as ``file:line:col``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator

from composer.inspect.expectations import BranchSpec, Recorded
from composer.inspect.preview import DEFAULT_SYSTEM
from composer.manifest import StrictModel
from composer.manifest.validation_errors import locate, validate_file
from composer.manifest.yamlnodes import Node

__all__ = ["Labels", "Question", "QuestionFile", "Questions", "load_questions"]

Labels = list[str] | dict[str, float]
"""A provider's relevant passages: labels (each of gain 1), or label -> gain."""


class Question(StrictModel):
    """One labelled question."""

    name: str | None = Field(None, description="How reports name it (default: its instruction).")
    env: str | None = Field(None, description="The environment, over the file's.")
    instruction: str = Field(min_length=1, description="The user turn.")
    system: str | None = Field(
        DEFAULT_SYSTEM,
        description="The branch's system text (default: a stand-in; null: none, ADR-0008 D4).",
    )
    branch: BranchSpec = Field(
        default_factory=BranchSpec, description="`name` and `metadata` templates see."
    )
    responses: dict[str, str | Recorded] = Field(
        default_factory=dict,
        description="By provider name: the text it returns instead of doing its work (as in "
        "a test file), so that a question never calls the network.",
    )
    relevant: dict[str, Labels] = Field(
        min_length=1,
        description=(
            "By provider name, the passages that should reach the model: `path#Title > "
            "Section`, a bare `path` (any passage of the file) or a memory item's id; a list "
            "(each of gain 1) or a mapping of label to a gain above 0."
        ),
    )

    @field_validator("relevant")
    @classmethod
    def _labels(cls, relevant: dict[str, Labels]) -> dict[str, Labels]:
        for name, labels in relevant.items():
            if not labels:
                raise ValueError(f'"{name}": no passage labelled')
            for label in labels:
                if not label.strip():
                    raise ValueError(f'"{name}": an empty label')
            if isinstance(labels, dict) and any(gain <= 0 for gain in labels.values()):
                raise ValueError(f'"{name}": a gain must be above 0 (leave an unjudged one out)')
        return relevant

    def gains(self, provider: str) -> dict[str, float]:
        """Label -> gain of ``provider``'s relevant passages."""
        labels = self.relevant[provider]
        return dict(labels) if isinstance(labels, dict) else dict.fromkeys(labels, 1.0)

    @property
    def title(self) -> str:
        return self.name or self.instruction


class QuestionFile(StrictModel):
    """A file of labelled questions, and the manifest they are asked of."""

    manifest: str = Field(".", description="The manifest file or folder, relative to this file.")
    env: str | None = Field(None, description="The environment: <manifest folder>/<env>.yaml.")
    variables: dict[str, str] = Field(
        default_factory=dict,
        description="Values for ${VAR}; no other source is read unless --from-environment.",
    )
    questions: list[Question] = Field(min_length=1, description="The labelled questions.")


@dataclass(frozen=True)
class Questions:
    """A question file as read: the located tree (to place a message) and the model."""

    display: str
    folder: Path
    tree: Node
    model: QuestionFile

    def where(self, *keys: str | int, key: bool = False) -> str:
        """``file:line:col`` of the value at ``keys`` (with ``key``, of its key)."""
        mark = locate(self.tree, keys, key_of_last=key)[0]
        return f"{mark.display}:{mark.line}:{mark.column}"

    @property
    def manifest_path(self) -> Path:
        return self.folder / self.model.manifest


def load_questions(path: str) -> Questions:
    """The question file at ``path``; every mistake in it is a located ``ManifestError``."""
    tree, _, model = validate_file(path, QuestionFile)
    return Questions(path, Path(path).absolute().parent, tree, model)
