"""The console's routes: read-only pages over the audit log, the manifest, and (when asked) a
form that previews an instruction.

Mounted at ``/console`` by ``composer serve --console`` (below the prefix a program mounts the
server at, ``/composer/console``: links, redirects and the cookie's path follow the request's
``root_path``), or served alone by ``composer console``. Who is asking: a bearer header, as the API takes it, or the session cookie the login
form gives for a token (``sessions.py``); on a server without tokens (loopback only) everyone
is the one ``local`` principal and sees every turn. With principals, each sees only the turns
its own requests made: another's turn is ``403``.

Every page is rendered by one Jinja2 environment (autoescape on) whose every printed value,
then the whole page, passes through the manifest's ``redact``; so does the stylesheet. Pages
carry a strict Content-Security-Policy (no script at all: the charts are inline SVG drawn on
the server), refuse framing, and are never cached. Form posts must come from the console's
own origin (the ``Origin`` header, which every browser sends with a POST).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jinja2
import markupsafe
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from composer.console.sessions import COOKIE, Session, Sessions
from composer.console.source import Listing, TurnSource
from composer.console.views import (
    WINDOWS,
    compare,
    list_row,
    provider_stats,
    since,
    turn_view,
    turn_view_of_preview,
)
from composer.principal import Principal
from composer.serve.auth import PRINCIPAL_KEY
from composer.serve.limits import read_body
from composer.serve.options import CONSOLE_PREFIX
from composer.serve.principals import LOCAL_PRINCIPAL, Principals

if TYPE_CHECKING:
    from composer.manifest import Manifest
    from composer.observe.record import AuditLine

__all__ = [
    "COMPARE_CHOICES",
    "HEADERS",
    "MAX_FORM_BYTES",
    "MAX_INSTRUCTION_CHARS",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "PREFIX",
    "PREVIEWS_AT_ONCE",
    "PREVIEW_TIMEOUT_S",
    "Console",
    "Endpoint",
    "console_mount",
]

PREFIX = CONSOLE_PREFIX

HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
"""Every console answer's headers: no script, no framing, nothing kept by a cache."""

MAX_LIMIT = 200
MAX_OFFSET = 10_000
MAX_FORM_BYTES = 64 * 1024
MAX_INSTRUCTION_CHARS = 16_384
PREVIEW_TIMEOUT_S = 60.0
PREVIEWS_AT_ONCE = 2
COMPARE_CHOICES = 30
_TURN_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_HERE = Path(__file__).parent


@dataclass
class Console:
    """What the console shows and who may see it.

    ``principals`` None: an open console (a token-less loopback server, or ``composer
    console``), where the one principal ``local`` sees every turn.
    """

    source: TurnSource | None
    principals: Principals | None = None
    manifest: Manifest | None = None
    env: str | None = None
    preview: bool = False
    sessions: Sessions = field(default_factory=Sessions)
    follow: Callable[[], Manifest] | None = None
    """With ``manifest``: where the manifest serving now is read, when a server reloads it
    (``composer serve --watch``): the pages show it, the preview runs it, its secrets are
    masked."""
    hold: Callable[[], AbstractAsyncContextManager[Manifest]] | None = None
    """With ``follow``: the manifest serving now, kept open through a preview that a reload
    overtakes (``ContextService.held_manifest``)."""

    def __post_init__(self) -> None:
        self.redact: Callable[[str], str] = self._redact
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=self._finalize,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.stylesheet = self.redact((_HERE / "static" / "console.css").read_text("utf-8"))
        self.previews = asyncio.Semaphore(PREVIEWS_AT_ONCE)

    @property
    def served(self) -> Manifest | None:
        """The manifest serving now (None: the console reads an audit log only)."""
        if self.manifest is None or self.follow is None:
            return self.manifest
        return self.follow()

    def _redact(self, text: str) -> str:
        served = self.served
        return served.redact(text) if served is not None else text

    def _finalize(self, value: Any) -> Any:
        """Every printed value masked before it is escaped (a macro's markup stays markup)."""
        if isinstance(value, markupsafe.Markup):
            return markupsafe.Markup(self.redact(str.__str__(value)))
        return self.redact(value) if isinstance(value, str) else value

    # -- who is asking ------------------------------------------------------------------------

    def principal(self, request: Request) -> Principal | None:
        """The request's principal: ``local`` on an open console, else from its bearer
        header or its session cookie; None when neither names one. An authenticated one is
        put in the request's scope, as the API's authentication does, for the access log."""
        if self.principals is None:
            return LOCAL_PRINCIPAL
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return _known(request, self.principals.authenticate(value.strip().encode("latin-1")))
        cookie = request.cookies.get(COOKIE)
        session = self.sessions.check(cookie, self.principals) if cookie else None
        if session is None:
            return None
        if session.renewed is not None:
            request.state.renewed_session = session  # set on the answer by its route
        return _known(request, session.principal)

    def sees(self, principal: Principal, line: AuditLine) -> bool:
        """Whether ``principal`` may see the turn of ``line``: its own turns only."""
        return self.principals is None or line.branch.principal == principal.name

    # -- answers ------------------------------------------------------------------------------

    def page(
        self,
        request: Request,
        template: str,
        status: int = 200,
        principal: Principal | None = None,
        **context: Any,
    ) -> Response:
        html = self.templates.get_template(template).render(
            prefix=_at(request),
            nav=template.removesuffix(".html"),
            manifest_page=self.manifest is not None,
            preview_page=self.preview and self.manifest is not None,
            principal=principal,
            logout=self.principals is not None and principal is not None,
            **context,
        )
        return Response(self.redact(html), status, HEADERS, "text/html; charset=utf-8")

    def message(self, request: Request, status: int, title: str, text: str) -> Response:
        return self.page(request, "message.html", status, title=title, text=text)

    def _login_first(self, request: Request) -> Response:
        return RedirectResponse(f"{_at(request)}/login", 303, headers=HEADERS)

    # -- pages --------------------------------------------------------------------------------

    async def stylesheet_asset(self, request: Request) -> Response:
        headers = {**HEADERS, "cache-control": "max-age=3600"}
        return Response(self.stylesheet, 200, headers, "text/css; charset=utf-8")

    async def home(self, request: Request) -> Response:
        return RedirectResponse(f"{_at(request)}/turns", 303, headers=HEADERS)

    async def login_form(self, request: Request) -> Response:
        return self.page(request, "login.html", error=None)

    async def login(self, request: Request) -> Response:
        refused = _foreign_post(request)
        if refused is not None or self.principals is None:
            return refused or RedirectResponse(f"{_at(request)}/turns", 303, headers=HEADERS)
        form = await _form(request)
        if isinstance(form, Response):
            return form
        principal = _known(
            request, self.principals.authenticate(form.get("token", "").strip().encode())
        )
        if principal is None:
            return self.page(request, "login.html", 401, error="That token is not valid.")
        response = RedirectResponse(f"{_at(request)}/turns", 303, headers=HEADERS)
        value = self.sessions.open(principal, self.principals)
        self.set_session(request, response, value, int(self.sessions.ttl_s))
        return response

    def set_session(self, request: Request, response: Response, value: str, left_s: int) -> None:
        """The session cookie on ``response``: script cannot read it, no other site's page
        sends it, only the console's paths get it, and over https only https does."""
        response.set_cookie(
            COOKIE,
            value,
            max_age=left_s,
            path=_at(request),
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )

    async def logout(self, request: Request) -> Response:
        refused = _foreign_post(request)
        if refused is not None:
            return refused
        cookie = request.cookies.get(COOKIE)
        if cookie and self.principals is not None:
            self.sessions.close(cookie, self.principals)
        response = RedirectResponse(f"{_at(request)}/login", 303, headers=HEADERS)
        response.delete_cookie(COOKIE, path=_at(request), httponly=True, samesite="strict")
        return response

    async def turns(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        query = request.query_params
        limit = _number(query.get("limit"), 50, 1, MAX_LIMIT)
        offset = _number(query.get("offset"), 0, 0, MAX_OFFSET)
        window = query.get("window", "all")
        window = window if window in WINDOWS else "all"
        chosen = {
            name: query.get(name, "").strip()[:128]
            for name in ("branch", "principal", "provider", "outcome")
        }
        filtered = any(chosen.values())

        def keep(line: AuditLine) -> bool:
            return self.sees(principal, line) and _matches(line, chosen)

        listing: Listing = await self._read(
            lambda source: source.newest(
                keep if filtered else None,
                limit=limit,
                offset=offset,
                principal=self._own(principal),
                since=since(window),
            ),
            Listing([], 0),
        )
        lines, total = listing.lines, listing.total

        def page_at(start: int) -> str:
            return urlencode({**chosen, "window": window, "limit": limit, "offset": start})

        newer = page_at(max(0, offset - limit)) if offset > 0 else None
        older = page_at(offset + limit) if offset + len(lines) < total else None
        return self.page(
            request,
            "turns.html",
            principal=principal,
            rows=[list_row(line) for line in lines],
            total=total,
            unreadable=listing.unreadable,
            limit=limit,
            offset=offset,
            chosen=chosen,
            newer=newer,
            older=older,
            window=window,
            windows=list(WINDOWS),
            outcomes=_OUTCOMES,
            open=self.principals is None,
            has_log=self.source is not None,
        )

    async def turn(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        line = await self._turn(request, request.path_params["turn_id"], principal)
        if isinstance(line, Response):
            return line
        choices: Listing = await self._read(
            lambda source: source.newest(
                lambda other: self.sees(principal, other) and other.turn_id != line.turn_id,
                limit=COMPARE_CHOICES,
                principal=self._own(principal),
            ),
            Listing([], 0),
        )
        return self.page(
            request,
            "turn.html",
            principal=principal,
            line=line,
            view=turn_view(line),
            choices=[list_row(choice) for choice in choices.lines],
        )

    async def compare(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        first = await self._turn(request, request.path_params["turn_id"], principal)
        if isinstance(first, Response):
            return first
        other = request.query_params.get("with", "").strip()
        second = await self._turn(request, other, principal)
        if isinstance(second, Response):
            return second
        return self.page(
            request,
            "compare.html",
            principal=principal,
            first=first,
            second=second,
            compared=compare(first, second),
        )

    async def providers(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        window = request.query_params.get("window", "24h")
        window = window if window in WINDOWS else "24h"
        earliest = since(window)

        def count(source: TurnSource) -> Any:
            lines = source.lines(principal=self._own(principal), since=earliest)
            return provider_stats(line for line in lines if self.sees(principal, line))

        stats, turns = await self._read(count, ([], 0))
        most = max([s.turns for s in stats] or [1])
        slowest = max([s.percentile(0.95) or 0.0 for s in stats] or [0.0]) or 1.0
        return self.page(
            request,
            "providers.html",
            principal=principal,
            stats=stats,
            turns=turns,
            window=window,
            windows=list(WINDOWS),
            most=most,
            slowest=slowest,
        )

    async def manifest_page(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        manifest = self.served
        if manifest is None:
            return self.message(
                request, 404, "No manifest", "This console reads an audit log only."
            )
        from composer.inspect.explain import effective_values

        names = _environments(manifest)
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        changes = None
        if a in names and b in names:
            changes = await asyncio.to_thread(_diff_environments, manifest, a, b)
        return self.page(
            request,
            "manifest.html",
            principal=principal,
            path=str(manifest.path) if manifest.path is not None else "(in memory)",
            folder=f"{Path(manifest.path).parent}/" if manifest.path is not None else "",
            env=self.env,
            values=effective_values(manifest),
            environments=names,
            a=a,
            b=b,
            changes=changes,
        )

    async def preview_form(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        return self.page(
            request, "preview.html", principal=principal, instruction="", view=None, error=None
        )

    async def run_preview(self, request: Request) -> Response:
        principal = self.principal(request)
        if principal is None:
            return self._login_first(request)
        refused = _foreign_post(request)
        if refused is not None:
            return refused
        form = await _form(request)
        if isinstance(form, Response):
            return form
        instruction = form.get("instruction", "")
        error = None
        if not instruction.strip():
            error = "Give an instruction."
        elif len(instruction) > MAX_INSTRUCTION_CHARS:
            error = f"An instruction is at most {MAX_INSTRUCTION_CHARS} characters."
        elif self.previews.locked():
            return self.message(request, 429, "Busy", "Previews are running; try again shortly.")
        view = None
        if error is None:
            try:
                async with self.previews, asyncio.timeout(PREVIEW_TIMEOUT_S):
                    view = turn_view_of_preview(await self._preview(instruction, principal))
            except TimeoutError:
                error = f"The turn took longer than {PREVIEW_TIMEOUT_S:g} s."
        return self.page(
            request,
            "preview.html",
            400 if error else 200,
            principal=principal,
            instruction=instruction,
            view=view,
            error=error,
        )

    # -- helpers ------------------------------------------------------------------------------

    def _own(self, principal: Principal) -> str | None:
        """The principal whose turns a reader may return (None: everyone's, on an open
        console)."""
        return None if self.principals is None else principal.name

    async def _read(self, read: Callable[[TurnSource], Any], empty: Any) -> Any:
        """``read(source)`` off the event loop (a file read line by line takes a while);
        ``empty`` without an audit log. A log that cannot be read raises ``AuditReadError``
        (its message masked), which every route answers with a 503 page."""
        if self.source is None:
            return empty
        return await asyncio.to_thread(read, self.source)

    async def _turn(
        self, request: Request, turn_id: str, principal: Principal
    ) -> AuditLine | Response:
        """The turn ``turn_id`` if ``principal`` may see it, else the 404 or 403 page."""
        found: AuditLine | None = None
        if _TURN_ID.fullmatch(turn_id):
            found = await self._read(lambda source: source.find(turn_id), None)
        if found is None:
            return self.message(request, 404, "No such turn", f"No turn {turn_id!r} in the log.")
        if not self.sees(principal, found):
            return self.message(request, 403, "Not yours", "This turn is another principal's.")
        return found

    async def _preview(self, instruction: str, principal: Principal) -> Any:
        """One real turn of the served manifest for ``principal`` (its bound metadata, its
        name in the audit line), as ``composer preview`` runs it."""
        from composer.inspect.preview import run_preview
        from composer.principal import current_principal

        assert self.manifest is not None  # the route exists only with a manifest
        held = self.hold() if self.hold is not None else contextlib.nullcontext(self.served)
        scope = current_principal.set(principal)
        try:
            async with held as manifest:
                assert manifest is not None
                return await run_preview(
                    manifest,
                    instruction,
                    branch_name="console-preview",
                    branch_metadata=dict(principal.metadata),
                    close_manifest=False,
                )
        finally:
            current_principal.reset(scope)


def console_mount(console: Console) -> Mount:
    """The console's routes under ``/console``."""

    from composer.errors import AuditReadError

    def route(path: str, endpoint: Endpoint, method: str) -> Route:
        async def answer(request: Request) -> Response:
            try:
                response = await endpoint(request)
            except AuditReadError as e:
                response = console.message(request, 503, "The audit log cannot be read", str(e))
            session: Session | None = getattr(request.state, "renewed_session", None)
            if session is not None and session.renewed and "set-cookie" not in response.headers:
                # a sliding idle deadline; the lifetime from login stays as it was
                console.set_session(request, response, session.renewed, session.left_s)
            return response

        return Route(path, answer, methods=[method])

    routes = [
        route("/", console.home, "GET"),
        route("/static/console.css", console.stylesheet_asset, "GET"),
        route("/login", console.login_form, "GET"),
        route("/login", console.login, "POST"),
        route("/logout", console.logout, "POST"),
        route("/turns", console.turns, "GET"),
        route("/turns/{turn_id}", console.turn, "GET"),
        route("/turns/{turn_id}/compare", console.compare, "GET"),
        route("/providers", console.providers, "GET"),
    ]
    if console.manifest is not None:
        routes.append(route("/manifest", console.manifest_page, "GET"))
        if console.preview:
            routes.append(route("/preview", console.preview_form, "GET"))
            routes.append(route("/preview", console.run_preview, "POST"))
    return Mount(PREFIX, routes=routes)


_OUTCOMES = [
    "fired",
    "cached",
    "empty",
    "guarded",
    "over_max_tokens",
    "over_budget",
    "failed",
    "timeout",
    "not_called",
]


def _at(request: Request) -> str:
    """Where the console's pages are, as the request reached them: ``/console``, or below
    the prefix a program mounted the server at (``/composer/console``; the mount's
    ``root_path``). Its links, redirects and cookie path start there."""
    mounted: str = request.scope.get("root_path", "")
    return mounted or PREFIX


def _known(request: Request, principal: Principal | None) -> Principal | None:
    """``principal``, in the request's scope when there is one (``--access-log`` names it)."""
    if principal is not None:
        request.scope[PRINCIPAL_KEY] = principal
    return principal


def _number(given: str | None, default: int, low: int, high: int) -> int:
    """A query's number, kept within ``low..high`` (a bad one is the default)."""
    if given is None or not given.isdigit():
        return default
    return max(low, min(high, int(given)))


Endpoint = Callable[[Request], Awaitable[Response]]


def _matches(line: AuditLine, chosen: dict[str, str]) -> bool:
    """Whether the turn passes the turns page's filters (an empty one passes all)."""
    branch, who, provider, outcome = (
        chosen[k] for k in ("branch", "principal", "provider", "outcome")
    )
    if branch and branch not in (line.branch.id, line.branch.name):
        return False
    if who and who != (line.branch.principal or "-"):
        return False
    if provider and line.provider(provider) is None:
        return False
    if outcome:
        scope = [line.provider(provider)] if provider else line.providers
        return any(p is not None and p.outcome == outcome for p in scope)
    return True


def _foreign_post(request: Request) -> Response | None:
    """A form post must say it comes from this console's own page: its ``Origin`` is this
    server. (The request guard refuses a foreign one; a post without one is refused here.)"""
    origin = request.headers.get("origin", "")
    host = request.headers.get("host", "")
    parts = urlsplit(origin)
    if not host or parts.netloc.lower() != host.lower() or parts.scheme != request.url.scheme:
        return Response("a form post must come from the console's own page", 403, HEADERS)
    return None


async def _form(request: Request) -> dict[str, str] | Response:
    """An urlencoded form, bounded in size; a field given twice keeps its first value."""
    body = await read_body(request, MAX_FORM_BYTES)
    if isinstance(body, Response):
        return body
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return Response("the form must be application/x-www-form-urlencoded", 415, HEADERS)
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def _environments(manifest: Manifest) -> list[str]:
    """The environments beside the served manifest's file (its folder's ``<env>.yaml``)."""
    from composer.manifest.loader import environments

    if manifest.path is None:
        return []
    return environments(Path(manifest.path).parent)


def _diff_environments(manifest: Manifest, a: str, b: str) -> list[str]:
    """``composer diff FOLDER --env A --env B``'s lines, each side loaded reading no variable
    (so no secret of another environment is ever read)."""
    from composer.errors import ComposerError
    from composer.inspect.explain import diff_manifests
    from composer.manifest.loader import load_manifest

    folder = Path(str(manifest.path)).parent
    try:
        first = load_manifest(folder, env=a, interpolate=False)
        second = load_manifest(folder, env=b, interpolate=False)
    except ComposerError as e:
        return [f"! {e}"]
    return [change.describe() for change in diff_manifests(first, second)]
