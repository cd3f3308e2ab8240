"""The context service behind both servers (HTTP and MCP): one manifest, branches by id.

A turn runs the ordinary ``prepare_turn`` on the branch's own registry, exactly as an agent
in the same process would (``attach``), and answers with the folded guidance and the report.
Every string that leaves the service has the manifest's secrets masked, as every command's
output does. The server keeps no conversation history: each request says the branch's name,
metadata and system text for that turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from composer.build import attach, build_registry
from composer.hooks import Writeback
from composer.manifest import Manifest
from composer.serve.branches import BranchEntry, BranchStore
from composer.serve.models import (
    ManifestOut,
    Readiness,
    ReportOut,
    TurnRequest,
    TurnResponse,
    WritebackResponse,
)
from composer.turn import Branch, Instruction, prepare_turn

__all__ = ["ContextService", "mask_strings"]

logger = logging.getLogger(__name__)


class ContextService:
    """Turns, writebacks and the manifest, for any number of branches of one manifest."""

    def __init__(
        self,
        manifest: Manifest,
        *,
        env: str | None = None,
        max_branches: int = 1000,
        idle_ttl_s: float = 3600.0,
    ) -> None:
        self.manifest = manifest
        self.env = env
        self.branches = BranchStore(
            self._new_branch, max_branches=max_branches, idle_ttl_s=idle_ttl_s
        )
        self.ready = False
        self.warm_up_failures: dict[str, str] = {}

    def _new_branch(self, branch_id: str) -> BranchEntry:
        branch = Branch(None)
        branch.id = branch_id
        return BranchEntry(branch, attach(branch, self.manifest))

    async def warm_up(self) -> None:
        """Build what the providers can build ahead of the first turn (indexes, sessions);
        ready afterwards, whatever failed (a failure recurs, contained, in its turns)."""
        registry = build_registry(self.manifest)
        try:
            failures = await registry.warm_up()
        finally:
            await registry.aclose()
        for name, error in failures.items():
            text = self.manifest.redact(f"{type(error).__name__}: {error}".splitlines()[0])
            self.warm_up_failures[name] = text
            logger.warning("warm-up of provider %r failed: %s", name, text)
        self.ready = True

    async def run_background(self) -> None:
        """Warm up, then sweep idle branches until cancelled (the servers run this beside
        their requests)."""
        try:
            await self.warm_up()
        except Exception:
            logger.warning("warm-up failed; serving anyway", exc_info=True)
            self.ready = True
        await self.branches.sweep_every(max(1.0, min(60.0, self.branches.idle_ttl_s / 2)))

    def readiness(self) -> Readiness:
        return Readiness(
            status="ready" if self.ready else "starting",
            warm_up_failures=dict(self.warm_up_failures),
        )

    async def turn(self, request: TurnRequest) -> dict[str, Any]:
        """One turn on the request's branch; the TurnResponse as JSON data, secrets masked."""
        given = request.instruction
        instruction = Instruction(given.text, guidance=given.guidance, context=given.context)
        async with self.branches.use(request.branch.id) as entry:
            branch = entry.branch
            branch.name = request.branch.name
            branch.metadata = dict(request.branch.metadata)
            branch.system = request.system
            try:
                turn = await prepare_turn(branch, instruction)
            finally:
                branch.messages.clear()  # no history is kept: the agent has its own
            entry.last_guidance = turn.guidance
        report = ReportOut.of(turn.report) if turn.report is not None else None
        response = TurnResponse(branch_id=branch.id, guidance=turn.guidance, report=report)
        return self.masked(response.model_dump(mode="json"))

    async def writeback(self, branch_id: str, action_responses: list[Any]) -> dict[str, Any]:
        """Hand tool results to the branch's writeback hooks, in order, contained (ADR D7)."""
        async with self.branches.use(branch_id) as entry:
            await entry.registry.gather_writeback(entry.branch, action_responses)
            names = [p.name for p in entry.registry.managed if Writeback in p.hooks]
        response = WritebackResponse(branch_id=branch_id, providers=names)
        return self.masked(response.model_dump(mode="json"))

    def last_guidance(self, branch_id: str) -> str | None:
        """The folded text of the branch's last turn (None: no such branch, or no text)."""
        entry = self.branches.peek(branch_id)
        if entry is None or entry.last_guidance is None:
            return None
        return self.manifest.redact(entry.last_guidance)

    def manifest_document(self) -> dict[str, Any]:
        """The effective manifest; ``Secret`` values serialise as ``***`` by themselves."""
        manifest = self.manifest
        document = ManifestOut(
            path=str(manifest.path) if manifest.path is not None else None,
            env=self.env,
            manifest=manifest.model_dump(mode="json", by_alias=True),
        )
        return self.masked(document.model_dump(mode="json"))

    def masked(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the manifest's secrets masked in every string."""
        masked: dict[str, Any] = mask_strings(data, self.manifest.redact)
        return masked

    async def aclose(self) -> None:
        """Close every branch's registry, then the manifest's shared state."""
        try:
            await self.branches.aclose()
        finally:
            await self.manifest.aclose()


def mask_strings(data: Any, redact: Callable[[str], str]) -> Any:
    """``data`` (JSON data) with ``redact`` applied to every string, keys included.

    Masking values rather than serialised text keeps the JSON valid and catches a secret that
    JSON escaping would have changed.
    """
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact(key): mask_strings(value, redact) for key, value in data.items()}
    if isinstance(data, list):
        return [mask_strings(value, redact) for value in data]
    return data
