"""What ``composer init`` writes: a team's first manifests, ready to validate, preview and test.

The folder holds a base manifest with one provider of each local type (a fixed text, a
runbook corpus, a SQLite team memory seeded from a JSONL file) and an audit log
(``turns.jsonl``, so ``composer serve --console`` shows turns from the first one), a dev and a
prod overlay, a small example corpus, the memory seed, a ``tests.yaml`` of expected turns and a
``questions.yaml`` of labelled questions (``composer eval``).
Everything runs offline as written: ``composer validate DIR --all-envs``, ``composer preview
DIR --env dev`` and ``composer test DIR/tests.yaml`` pass on a new machine. Nothing is
overwritten and nothing outside the folder is written (``composer.inspect.write_inside``): a file
that exists already, or a symbolic link on the way, stops the scaffold before anything is
written (``force`` replaces a file, or a link at a file's place, never what a link points to).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from composer.inspect.write_inside import write_inside

__all__ = ["FILES", "scaffold"]

_BASE = """\
# yaml-language-server: $schema=manifest.schema.json
# What every environment shares; dev.yaml and prod.yaml overlay it (`extends: base.yaml`).
# Paths are relative to this file. Higher priority is admitted first under the budget;
# blocks are rendered in the order written here.
version: 1
budget: 1000
# One JSON line per turn (each provider's outcome and tokens, the budget used; no text):
# `composer audit list turns.jsonl`, `composer console turns.jsonl`, `composer serve --console`.
runtime:
  audit: {path: turns.jsonl}
providers:
  - name: house-rules          # a fixed text, the same every turn
    type: static
    priority: 100
    stable: true
    text: |
      House rules for {team}: put the exact command first and say when a step is risky.

  - name: runbooks             # the runbook passages closest to the question
    type: file_corpus
    priority: 50
    max_tokens: 400
    root: corpus
    include: ["**/*.md"]
    query: "{{ instruction.text }}"
    top_k: 2
    template: |-
      Relevant runbook passages:
      {% for hit in hits %}[{{ hit.path }}{% if hit.heading %} > {{ hit.heading }}{% endif %}]
      {{ hit.text }}
      {% endfor %}

  - name: team-memory          # what the team noted before, ranked by relevance
    type: memory
    priority: 40
    max_tokens: 200
    source: {sqlite: memory.sqlite, seed: memory.jsonl}
    query: {text: "{{ instruction.text }}", limit: 3}
    header: "Notes from earlier incidents:"
"""

_DEV = """\
# yaml-language-server: $schema=manifest.overlay.schema.json
# Development: the base as it is, offline.
extends: base.yaml
"""

_PROD = """\
# yaml-language-server: $schema=manifest.overlay.schema.json
# Production: a larger budget and more runbook context. To share the team memory between
# machines, switch its source to PostgreSQL here:
#   - name: team-memory
#     source: {postgres: {dsn: "${MEMORY_DSN}"}, seed: memory.jsonl}
extends: base.yaml
budget: 2000
providers:
  - name: runbooks
    max_tokens: 800
    top_k: 3
"""

_DISK = """\
# Disk almost full

## Symptoms
The `disk_usage` alert fires above 90 %, or writes fail with "No space left on device".

## First steps
1. Find the largest folders with `du -xh / | sort -h | tail -20`.
2. Rotate or delete old logs under `/var/log` (never the current file of a running service).
3. If the volume keeps filling, grow it before it reaches 100 %.
"""

_RESTART = """\
# Restarting a service

## When
A service is unhealthy after a deploy and a rollback is not possible.

## How
Restart one instance at a time with `systemctl restart <service>` and wait for its health
check before the next one; never restart every instance at once.
"""

_SEED = """\
{"id": "n1", "content": "The disk of the build server filled up on 2026-11-03 because old Docker images were never pruned.", "tags": ["disk"]}
{"id": "n2", "content": "Restarting every api instance at once caused a 4 minute outage; restart one at a time.", "tags": ["restart"]}
"""

_TESTS = """\
# yaml-language-server: $schema=tests.schema.json
# Expected turns: `composer test tests.yaml`. Each test runs one real turn of an environment.
manifest: .
tests:
  - name: a disk question brings the disk runbook and the team's note
    env: dev
    instruction: "The disk is almost full on the build server, what do I do?"
    expect:
      providers:
        house-rules: {outcome: fired}
        runbooks: {fired: true, tokens: "<= 400"}
        team-memory: {fired: true}
      text:
        contains:
          - "House rules for {team}:"
          - "[runbooks/disk-full.md"
          - "Docker images were never pruned"
  - name: a restart question brings the restart runbook
    env: prod
    instruction: "How do I restart the service after a bad deploy?"
    expect:
      providers:
        runbooks: {fired: true}
      text:
        contains: "[runbooks/restart.md"
"""

_QUESTIONS = """\
# yaml-language-server: $schema=questions.schema.json
# Questions the team's agent is asked, with the passages that should reach it, per provider:
# `composer eval questions.yaml` measures the context each gets (add your own; CI can gate on
# them with --min, e.g. --min runbooks.recall=0.8).
manifest: .
env: dev
questions:
  - instruction: "The disk is almost full on the build server, what do I do?"
    relevant:
      runbooks: ["runbooks/disk-full.md#Disk almost full > First steps"]
      team-memory: [n1]
  - instruction: "Which alert fires when a disk fills up?"
    relevant:
      runbooks: ["runbooks/disk-full.md#Disk almost full > Symptoms"]
  - instruction: "How do I restart a service safely after a bad deploy?"
    relevant:
      runbooks: ["runbooks/restart.md#Restarting a service > How"]
      team-memory: [n2]
"""

_GITIGNORE = """\
# The team memory database, made on first use from memory.jsonl.
memory.sqlite
memory.sqlite-*
# The audit log of every turn run here, and its rotated files.
turns.jsonl
turns.jsonl.*
"""

FILES: dict[str, str] = {
    "base.yaml": _BASE,
    "dev.yaml": _DEV,
    "prod.yaml": _PROD,
    "corpus/runbooks/disk-full.md": _DISK,
    "corpus/runbooks/restart.md": _RESTART,
    "memory.jsonl": _SEED,
    "tests.yaml": _TESTS,
    "questions.yaml": _QUESTIONS,
    ".gitignore": _GITIGNORE,
}
"""Every file the scaffold writes, by path relative to its folder (``{team}`` replaced)."""


def scaffold(
    folder: Path,
    *,
    team: str = "the ops team",
    force: bool = False,
    also: Mapping[str, str] | None = None,
) -> list[Path]:
    """Write the scaffold, then ``also`` (more files by relative path), into ``folder`` (made
    if missing); the files written, in order.

    A file that exists already stops it before anything is written, unless ``force``; so does
    a symbolic link on the way to any of them, ``force`` or not. That, or a file it cannot
    write, is a ``ComposerError``.
    """
    files = {name: text.replace("{team}", team) for name, text in FILES.items()}
    return write_inside(folder, {**files, **(also or {})}, replace=force)
