"""Templates are checked against the shape of what they see: an attribute that cannot exist is
a located error when the manifest loads, with the closest name that does; a template that
still fails when a turn renders it names the provider, the field and file:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from repofiles import put

from composer import Branch, Instruction, attach, load_manifest, prepare_turn
from composer.errors import ManifestError, TemplateError
from composer.plugin import TemplateShape, compile_template
from composer.templating import CONTEXT_NAMES, CONTEXT_SHAPES


def errors_of(tmp_path: Path, entry: str) -> list[str]:
    """The located errors of a manifest with one provider ``entry`` (a flow mapping)."""
    put(tmp_path / "m.yaml", f"version: 1\nproviders:\n  - {entry}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path / "m.yaml", environ={})
    return str(caught.value).splitlines()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            '{name: q, type: file_corpus, root: ".", query: "{{ instruction.txt }}"}',
            'provider "q": query: instruction has no attribute "txt" (did you mean "text"?); '
            "instruction has text, guidance, context",
        ),
        (
            "{name: w, type: static, when: \"branch.nmae == 'x'\", text: hi}",
            'provider "w": when: branch has no attribute "nmae" (did you mean "name"?); '
            "branch has id, name, metadata",
        ),
        (
            '{name: h, type: file_corpus, root: ".", template: "{% for hit in hits %}{{ hit.pth }}{% endfor %}"}',
            'provider "h": template: hit has no attribute "pth" (did you mean "path"?); '
            "hit has path, heading, text, score",
        ),
        (
            '{name: m, type: memory, template: "{{ item.contnt }}"}',
            'provider "m": template: item has no attribute "contnt" (did you mean "content"?); '
            "item has id, content, tags, metadata, score",
        ),
        (
            '{name: s, type: static, text: "{{ instruction.text.lowr() }}"}',
            'provider "s": text: instruction.text has no attribute "lowr" '
            '(did you mean "lower"?); instruction.text is a string',
        ),
        (
            '{name: r, type: static, wrap: "{{ provider.nme }} {{ text }}", text: hi}',
            'provider "r": wrap: provider has no attribute "nme" (did you mean "name"?); '
            "provider has name, type, priority",
        ),
        (
            '{name: f, type: file_corpus, root: ".", template: "{{ (hits|first).scor }}"}',
            'provider "f": template: the value has no attribute "scor" (did you mean "score"?); '
            "the value has path, heading, text, score",
        ),
    ],
)
def test_an_attribute_that_cannot_exist_is_a_located_error(
    tmp_path: Path, entry: str, message: str
) -> None:
    [line] = errors_of(tmp_path, entry)
    location, _, said = line.partition(": ")
    assert said == message
    field = message.split(": ")[1]  # the field's value is where the error points
    column = entry.index(f"{field}: ") + len(f"{field}: ") + len("  - ") + 1
    assert location == f"{tmp_path / 'm.yaml'}:3:{column}"


def test_the_line_inside_a_multi_line_template_is_given(tmp_path: Path) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - name: c
            type: static
            text: |
              one
              two {{ branch.metadata.team }}
              three {{ instruction.contxt }}
        """,
    )
    with pytest.raises(
        ManifestError,
        match=r':5:11: provider "c": text: instruction has no attribute "contxt" '
        r'\(did you mean "context"\?\).* \(template line 3\)$',
    ):
        load_manifest(tmp_path / "m.yaml", environ={})


@pytest.mark.parametrize(
    "template",
    [
        "{{ branch.metadata.team }} {{ instruction.context.ticket.id }}",  # open: any key
        "{{ instruction.nope is defined }} {{ instruction.nope | default('x') }}",  # guarded
        "{% set instruction = {'txt': 1} %}{{ instruction.txt }}",  # a name set by the template
        "{% for k, v in branch.metadata.items() %}{{ v.anything }}{% endfor %}",
        "{% for x in instruction.text.split() %}{{ x.upper() }}{% endfor %}",
        "{{ now.year }} {{ now.isoformat() }} {{ provider.name }} {{ branch.id }}",
        "{% macro m(instruction) %}{{ instruction.txt }}{% endmacro %}{{ m(1) }}",
        "{% for i in range(2) %}{{ loop.index }}{% endfor %}",
    ],
)
def test_what_may_exist_is_not_an_error(tmp_path: Path, template: str) -> None:
    put(
        tmp_path / "m.yaml",
        f'version: 1\nproviders:\n  - {{name: t, type: static, text: "{template}"}}\n',
    )
    assert load_manifest(tmp_path / "m.yaml", environ={}).providers[0].name == "t"


def test_a_plugin_declares_the_shape_of_its_names() -> None:
    """Names given no shape are open (any attribute); declared ones are checked."""
    ticket = TemplateShape.record(id=TemplateShape.of(str), title=TemplateShape.of(str))
    shapes = {**CONTEXT_SHAPES, "ticket": ticket}
    names = CONTEXT_NAMES | {"ticket", "free"}
    compile_template("{{ ticket.title }} {{ free.whatever }}", names, shapes=shapes)
    with pytest.raises(TemplateError, match=r'^ticket has no attribute "titel" \(did you mean'):
        compile_template("{{ ticket.titel }}", names, shapes=shapes)


async def test_a_run_time_failure_names_provider_field_and_place(tmp_path: Path) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - name: ticket
            type: static
            text: |
              Ticket:
              {{ instruction.context.ticket.id }}
          - name: guard
            type: static
            when: "instruction.context.level > 1"
            text: hi
        """,
    )
    manifest = load_manifest(tmp_path / "m.yaml", environ={})
    branch = Branch("sys\n")
    attach(branch, manifest)
    turn = await prepare_turn(branch, Instruction("x"))
    assert turn.report is not None
    assert turn.report.failed == ["ticket", "guard"]
    messages = {record.name: record.error for record in turn.report.outcomes}
    where = tmp_path / "m.yaml"
    assert messages["ticket"] == (
        f'provider "ticket": text ({where}:5:11), template line 2: template failed: '
        "UndefinedError: 'None' has no attribute 'ticket'"
    )
    assert messages["guard"] == (
        f'provider "guard": when ({where}:10:11): expression failed: '
        "UndefinedError: 'None' has no attribute 'level'"
    )
