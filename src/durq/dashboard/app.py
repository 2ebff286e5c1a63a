"""The dashboard's Starlette application: routes, templates, headers and sign-in.

Pages read through :mod:`durq.dashboard.pages` (which reads through
:mod:`durq.observability.views` and the :class:`durq.Durq` API); actions are in
:mod:`durq.dashboard.actions`. Nothing here knows SQL.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durq.dashboard import actions, pages, security
from durq.dashboard.context import Dashboard
from durq.errors import DurqError

Handler = Callable[[Request], Awaitable[Response]]


class StoredJSON(JSONResponse):
    """JSON of stored values: a lone surrogate (durq stores and round-trips them; a running
    job's progress message may hold one) is written as its ``\\uXXXX`` escape, which JSON
    decodes back to it, instead of failing the response with ``UnicodeEncodeError``."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")


def create_app(dq: Any, *, token: str | None = None, read_only: bool = False) -> Starlette:
    """The dashboard for ``dq`` (a :class:`durq.Durq`).

    Args:
        dq: the app whose database the pages read.
        token: the token actions need; None refuses every action (pages still show).
        read_only: hide every action and refuse them (403), whatever the token.
    """
    d = Dashboard(dq, token, read_only)

    def page(build: Callable[[Dashboard, dict[str, str]], tuple[str, dict[str, Any]]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            params = {k: v for k, v in request.query_params.items() if v != ""}
            params.update(request.path_params)
            try:
                name, ctx = await run_in_threadpool(build, d, params)
            except pages.NotFound as exc:
                return d.render(request, "error.html", {"message": str(exc)}, status=404)
            except DurqError as exc:
                return d.render(request, "error.html", {"message": str(exc)}, status=400)
            return d.render(request, name, ctx)

        return endpoint

    async def metrics(_request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, d.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def healthz(_request: Request) -> Response:
        try:
            now = await run_in_threadpool(dq.store.now)
            await run_in_threadpool(dq.store.enqueued_total)
        except DurqError as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, status_code=503)
        return JSONResponse({"ok": True, "now": now})

    async def api_status(_request: Request) -> Response:
        snap = await run_in_threadpool(pages.api_status, d)
        return StoredJSON(snap)

    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        field = (form.get(security.CSRF_FIELD) or [""])[0]
        given = (form.get("token") or [""])[0]
        next_url = security.safe_next((form.get("next") or ["/"])[0])
        if not security.csrf_ok(request.cookies.get(security.CSRF_COOKIE), field, False):
            return PlainRefusal("refused: the form's CSRF field does not match (reload the page)")
        if d.token is None or not security.signed_in(d.token, None, f"Bearer {given}"):
            # a page with the navigation and the sign-in form, not a bare refusal
            message = "wrong token: nothing was signed in; try again"
            return d.render(request, "error.html", {"message": message}, status=403)
        response = RedirectResponse(next_url, status_code=303)
        response.set_cookie(
            security.AUTH_COOKIE, security.auth_value(d.token), httponly=True,
            samesite="strict", path="/",
        )  # fmt: skip
        return response

    async def logout(_request: Request) -> Response:
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(security.AUTH_COOKIE, path="/")
        return response

    routes = [
        Route("/", page(pages.overview)),
        Route("/partials/overview", page(pages.overview_partial)),
        Route("/jobs", page(pages.jobs)),
        Route("/jobs/{job_id:int}", page(pages.job)),
        Route("/failed", page(pages.failed)),
        Route("/parked", page(pages.parked)),
        Route("/batches", page(pages.batches)),
        Route("/schedules", page(pages.schedules)),
        Route("/limits", page(pages.limits)),
        Route("/workers", page(pages.workers)),
        Route("/partials/workers", page(pages.workers_partial)),
        Route("/metrics", metrics),
        Route("/healthz", healthz),
        Route("/api/status", api_status),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/actions/{verb:str}", actions.endpoint(d), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("durq.dashboard", "static")]), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)])


class SecurityHeaders:
    """ASGI middleware: every response gets :data:`durq.dashboard.security.HEADERS` (the
    Content-Security-Policy, nosniff, no framing) and a Server-Timing figure."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in security.HEADERS.items():
                    if k not in headers:
                        headers[k] = v
                headers["Server-Timing"] = f"app;dur={1000 * (time.perf_counter() - started):.1f}"
            await send(message)

        await self.app(scope, receive, with_headers)


def PlainRefusal(message: str, status: int = 403) -> Response:
    """A refusal as plain text (never HTML: nothing in it can run)."""
    return Response(message + "\n", status_code=status, media_type="text/plain")
