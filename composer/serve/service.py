"""The context service behind both servers (HTTP and MCP): one manifest, branches by id.

A turn runs the ordinary ``prepare_turn`` on the branch's own registry, exactly as an agent
in the same process would (``attach``), and answers with the folded guidance and the report.
Every string that leaves the service has the manifest's secrets masked, as every command's
output does. The server keeps no conversation history: each request says the branch's name,
metadata and system text for that turn.

Each call is made for a ``Principal`` (the server authenticated it): its bound metadata is
merged over the branch the request states (``bind``), its branches are its own (team a's
``inc-1`` and team b's ``inc-1`` are two branches), and ``current_principal`` names it to the
engine while the turn runs (cache keys, audit lines, spans). Each branch's turns are counted
by the service's ``StateStore`` (``composer.serve.state``), so a writeback knows which turn it
belongs to: a retry of one turn's writeback stores nothing twice, the same tool result in a
later turn is stored again. By default the counts are the process's own (a count outlives its
branch's eviction); with a shared store (PostgreSQL, Redis) every replica counts in it, keeps
each branch's last name, metadata and composed text there, and so can serve any turn or
writeback of any branch with the same result.

A turn happens or it does not. It is counted in the store before any provider runs, so a
store that is down answers ``503 state_unavailable`` with no provider called and nothing
audited. A store that fails after the providers ran (keeping the composed text) answers
``503`` too, and the turn's audit line is marked ``answered: false`` (``holding_audit``): the
client retries, and its retry is the one served turn of the audit trail (the providers run
again for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar, cast

from composer._closing import AsyncCloseable
from composer.branches import BranchEntry, BranchStore
from composer.build import attach, build_registry
from composer.errors import RequestRefused, ServeError
from composer.manifest import Manifest, map_strings
from composer.observe.audit.held import holding_audit
from composer.outcomes import explain_turns
from composer.principal import Principal, current_principal
from composer.serve.models import (
    AuditSinkStatus,
    ExplanationOut,
    ManifestOut,
    Readiness,
    ReportOut,
    StateOut,
    TurnRequest,
    TurnResponse,
    WritebackRequest,
    WritebackResponse,
    WritebackResultOut,
)
from composer.serve.principals import LOCAL_PRINCIPAL, bind
from composer.serve.reloading import Reloader
from composer.serve.state import BranchRecord, ProcessState, StateStore, report_summary
from composer.serve.tenancy import check_isolation
from composer.turn import Branch, Instruction, prepare_turn, render_guidance

__all__ = ["STATE_CHECK_S", "ContextService"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

STATE_CHECK_S = 1.0
"""How long readiness trusts its last look at the state store."""


class _ServedBranch(Branch):
    """A branch kept by the server, which knows its turns (``composer.plugin.turn_key``)."""

    turn_key = ""


class ContextService(AsyncCloseable):
    """Turns, writebacks and the manifest, for any number of branches of one manifest.

    ``principals`` are every caller the server will accept; a shared store split by anything
    they do not all bind is refused here, before the first request (``check_isolation``).

    The service owns the manifest it is given: ``aclose`` (or leaving ``async with``) closes
    every branch's registry, then the manifest's shared state. With a ``reloader``
    (``composer.serve.reloading``), ``start`` loads the manifest it follows, which serves from
    then on: each branch's registry moves to a new version at its next turn.
    """

    def __init__(
        self,
        manifest: Manifest,
        *,
        env: str | None = None,
        max_branches: int = 1000,
        idle_ttl_s: float = 3600.0,
        principals: Sequence[Principal] = (LOCAL_PRINCIPAL,),
        state: StateStore | None = None,
        reloader: Reloader | None = None,
    ) -> None:
        check_isolation(manifest, principals)
        self._manifest = manifest
        self.reloader = reloader
        self.draining = False
        """SIGTERM came: readiness says ``stopping`` while the server drains."""
        self.env = env
        self.branches = BranchStore(
            self._new_branch, max_branches=max_branches, idle_ttl_s=idle_ttl_s
        )
        self.ready = False
        self.warm_up_failures: dict[str, str] = {}
        self.state: StateStore = state or ProcessState(max(100_000, 10 * max_branches))
        self.state_error: str | None = None
        self._state_checked = -STATE_CHECK_S

    @property
    def manifest(self) -> Manifest:
        """The manifest serving now: the one given, or its watcher's last good one."""
        reloader = self.reloader
        return reloader.manifest if reloader is not None and reloader.started else self._manifest

    def held_manifest(self) -> contextlib.AbstractAsyncContextManager[Manifest]:
        """The manifest serving now, kept open for the block even if a reload replaces it
        meanwhile (``ManifestWatcher.held``)."""
        reloader = self.reloader
        if reloader is not None and reloader.started:
            return reloader.watcher.held()
        return contextlib.nullcontext(self._manifest)

    def _new_branch(self, key: str) -> BranchEntry:
        branch = _ServedBranch(None)
        branch.id = key.partition("/")[2]
        reloader = self.reloader
        if reloader is not None and reloader.started:
            return BranchEntry(branch, reloader.attach(branch))
        return BranchEntry(branch, attach(branch, self._manifest))

    def drain(self) -> None:
        """SIGTERM came (``--drain-delay``): readiness says ``stopping`` from now on."""
        self.draining = True

    async def start(self, *, signals: bool = False) -> None:
        """Before the first request: with a reloader, load the manifest it follows (each
        worker its own) and, with ``signals``, reload on SIGHUP."""
        if self.reloader is not None:
            await self.reloader.start(signals=signals)

    async def warm_up(self) -> None:
        """Build what the providers can build ahead of the first turn (indexes, sessions);
        ready afterwards, whatever failed (a failure recurs, contained, in its turns)."""
        async with self.held_manifest() as manifest, build_registry(manifest) as registry:
            failures = await registry.warm_up()
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
        every = max(1.0, min(60.0, self.branches.idle_ttl_s / 2))
        sweeps = [self.branches.sweep_every(every)]
        if self.state.shared:
            sweeps.append(self._sweep_state(every))
        await asyncio.gather(*sweeps)

    async def _sweep_state(self, seconds: float) -> None:
        while True:
            try:
                await self.state.sweep()
            except Exception as e:
                logger.warning("sweeping the branch state failed (%s)", type(e).__name__)
            await asyncio.sleep(seconds)

    async def check_state(self) -> None:
        """Ask the state store whether it answers, for readiness (``state_error``); at most
        once a second, so that probes (open to anyone) never load the store."""
        now = time.monotonic()
        if not self.state.shared or now - self._state_checked < STATE_CHECK_S:
            return
        self._state_checked = now
        try:
            await self.state.check()
        except Exception as e:
            self.state_error = _failure(e)
        else:
            self.state_error = None

    def readiness(self) -> Readiness:
        ready = self.ready and self.state_error is None
        reloader = self.reloader
        return Readiness(
            status="stopping" if self.draining else "ready" if ready else "starting",
            warm_up_failures=dict(self.warm_up_failures),
            state=StateOut(
                kind=self.state.kind,
                where=self.state.describe(),
                shared=self.state.shared,
                error=self.state_error,
            ),
            audit=self._audit_status(),
            reload=reloader.status(self.manifest.redact) if reloader is not None else None,
        )

    def _audit_status(self) -> AuditSinkStatus | None:
        """The audit sink's kind and health (the observer's, once a registry made it)."""
        config = self.manifest.runtime.audit
        if config is None:
            return None
        sink = getattr(self.manifest.shared.get("observe"), "audit", None)
        if sink is None:
            kind = "postgres" if config.postgres else "stdout" if config.stdout else "file"
            return AuditSinkStatus(kind=kind, writing=None, lost=0)
        status = sink.status()
        lost = status["dropped"] + status["failed"]
        return AuditSinkStatus(kind=status["kind"], writing=status["writing"], lost=lost)

    async def turn(
        self, request: TurnRequest, principal: Principal = LOCAL_PRINCIPAL
    ) -> dict[str, Any]:
        """One turn on the request's branch of ``principal``; the TurnResponse as JSON data,
        secrets masked. ``RequestRefused`` (403) when the request states another value for a
        key bound to the principal."""
        given = request.instruction
        rendered = None
        if given.guidance and not isinstance(given.guidance, str):
            # PyYAML's dumper is slow on data: render it off the event loop, for the fold
            rendered = await asyncio.to_thread(render_guidance, given.guidance)
        instruction = Instruction(
            given.text,
            guidance=given.guidance,
            context=given.context,
            rendered_guidance=rendered,
        )
        metadata = bind(principal, request.branch.metadata)
        key = _key(principal, request.branch.id)
        async with self.branches.use(key) as entry:
            branch = entry.branch
            branch.name = request.branch.name
            branch.metadata = metadata
            branch.system = request.system
            # the turn is claimed before any provider runs: a store that is down is a 503
            # with nothing called and nothing audited
            slot = await self._stated(
                self.state.begin(principal.name, branch.id, branch.name, metadata)
            )
            cast(_ServedBranch, branch).turn_key = f"{principal.name}:{slot.key}"
            with holding_audit() as held:  # its line says whether the client got the answer
                scope = current_principal.set(principal)
                try:
                    with explain_turns(request.explain):
                        turn = await prepare_turn(branch, instruction)
                finally:
                    current_principal.reset(scope)
                    branch.messages.clear()  # no history is kept: the agent has its own
                entry.last_guidance = turn.guidance
                report = ReportOut.of(turn.report) if turn.report is not None else None
                explained = turn.report.explanations if turn.report is not None else []
                response = TurnResponse(
                    branch_id=branch.id,
                    guidance=turn.guidance,
                    report=report,
                    context=turn.context,
                    explanations=[ExplanationOut.model_validate(e.to_json()) for e in explained]
                    or None,
                )
                answer = self.masked(response.model_dump(mode="json"))
                if self.state.shared:
                    summary = report_summary(answer["report"])
                    await self._stated(
                        self.state.finish(
                            principal.name, branch.id, slot, answer["guidance"], summary
                        )
                    )
                held.answered = True
        return answer

    async def writeback(
        self, branch_id: str, request: WritebackRequest, principal: Principal = LOCAL_PRINCIPAL
    ) -> tuple[int, dict[str, Any]]:
        """Hand tool results to the branch's writeback hooks, in order, contained (ADR D7);
        the HTTP status and the answer: what each provider stored, or its masked error.

        ``200`` when every hook succeeded, ``207`` when some failed, ``503`` when all did. The
        branch is the one the request states (bound like a turn's), else the one this
        principal's last turn left; a branch the server does not know, with none stated, is
        refused (``409``) rather than written into a default namespace.
        """
        stated = request.branch
        key = _key(principal, branch_id)
        record = None
        if stated is None and self.state.shared:  # its last turn may be another replica's
            record = await self._stated(self.state.recall(principal.name, branch_id))
        if stated is None and key not in self.branches and record is None:
            raise RequestRefused(
                409,
                "unknown_branch",
                f"branch {branch_id!r} has no turn on this server (or was dropped): send its "
                "name and metadata as `branch` with the writeback",
            )
        metadata = bind(principal, stated.metadata) if stated is not None else None
        async with self.branches.use(key) as entry:
            branch = entry.branch
            if stated is not None:
                branch.name = stated.name
                branch.metadata = metadata or {}
            elif record is not None:  # as its last turn left it, on whichever replica
                branch.name = record.name
                branch.metadata = bind(principal, record.metadata)
            current = await self._stated(self.state.current(principal.name, branch_id))
            cast(_ServedBranch, branch).turn_key = f"{principal.name}:{current}"
            scope = current_principal.set(principal)
            try:
                results = await entry.registry.writeback_results(branch, request.action_responses)
            finally:
                current_principal.reset(scope)
        failed = sum(1 for result in results if result.error is not None)
        status = 200 if not failed else 503 if failed == len(results) else 207
        response = WritebackResponse(
            branch_id=branch_id,
            providers=[WritebackResultOut(**result._asdict()) for result in results],
            stored=sum(result.stored or 0 for result in results),
        )
        return status, self.masked(response.model_dump(mode="json"))

    def last_guidance(self, branch_id: str, principal: Principal = LOCAL_PRINCIPAL) -> str | None:
        """The folded text of the principal's branch's last turn (None: no such branch of
        this principal, or no text)."""
        entry = self.branches.peek(_key(principal, branch_id))
        if entry is None or entry.last_guidance is None:
            return None
        return self.manifest.redact(entry.last_guidance)

    async def last_turn(
        self, branch_id: str, principal: Principal = LOCAL_PRINCIPAL
    ) -> BranchRecord | None:
        """What is known of the principal's branch's last turn, whichever replica served it:
        the shared store's record, else (in-process state) the kept branch's."""
        if self.state.shared:
            return await self._stated(self.state.recall(principal.name, branch_id))
        entry = self.branches.peek(_key(principal, branch_id))
        if entry is None:
            return None
        return BranchRecord(
            principal=principal.name,
            branch_id=branch_id,
            name=entry.branch.name,
            metadata=dict(entry.branch.metadata),
            epoch="",
            turns=0,
            guidance=entry.last_guidance,
        )

    async def _stated(self, call: Awaitable[_T]) -> _T:
        """``call`` on the state store; a store that fails makes the request a 503."""
        try:
            return await call
        except ServeError:
            raise
        except Exception as e:
            self.state_failed(e)
            logger.warning("the branch state store failed: %s", self.state_error)
            raise RequestRefused(
                503, "state_unavailable", "the branch state store did not answer; try again"
            ) from None

    def state_failed(self, error: Exception) -> None:
        """Note that the state store failed a request (readiness says so until it answers)."""
        self.state_error = _failure(error)

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
        masked: dict[str, Any] = map_strings(data, self.manifest.redact, keys=True)
        return masked

    async def aclose(self) -> None:
        """Close every branch's registry, the state store, then the manifests' shared state
        (the reloader's too)."""
        try:
            await self.branches.aclose()
        finally:
            try:
                await self.state.aclose()
            finally:
                try:
                    if self.reloader is not None:
                        await self.reloader.aclose()
                finally:
                    await self._manifest.aclose()


def _failure(error: Exception) -> str:
    """What readiness and the log say of a store's failure: its kind, never its message (a
    driver's message may quote the DSN, and with it a password)."""
    return f"{type(error).__name__}: the state store did not answer"


def _key(principal: Principal, branch_id: str) -> str:
    """Where the principal's branch is kept: names and ids hold no ``/``."""
    return f"{principal.name}/{branch_id}"
