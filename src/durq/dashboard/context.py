"""The state every dashboard request shares (:class:`Dashboard`): the app, the token, the
mode, the templates and the metrics registry; and how a page is rendered."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from durq.dashboard import security
from durq.dashboard.metrics import registry_for
from durq.observability.why import clock


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _cut(value: Any, limit: int = 120) -> str:
    """A value shown on a list page: JSON, cut at ``limit`` characters with an ellipsis."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: After these a long name may wrap: the parts of a dotted task, a hyphenated queue, a
#: ``host:pid:hex`` worker id, a path.
_PARTS = re.compile(r"(?<=[./_:-])")


def _breakable(value: Any) -> Markup:
    """``value`` as escaped text with a ``<wbr>`` after each ``.``, ``/``, ``_``, ``:`` and
    ``-``: a long name wraps at its parts rather than mid-word (CSS ``overflow-wrap:
    anywhere`` still breaks a part too long for its cell), and is copied whole (a
    ``<wbr>`` adds no character)."""
    return Markup("<wbr>").join(escape(part) for part in _PARTS.split(str(value)))


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


class Dashboard:
    """The state every request shares: the app, the token, the mode and the templates."""

    def __init__(self, dq: Any, token: str | None, read_only: bool) -> None:
        self.dq = dq
        self.token = token or None
        self.read_only = read_only
        self.env = Environment(
            loader=PackageLoader("durq.dashboard", "templates"),
            autoescape=select_autoescape(["html"], default=True),
        )
        self.env.filters.update(
            ago=_ago, when=clock, cut=_cut, pretty=_pretty, qs=urlencode, breakable=_breakable
        )
        self.registry = registry_for(dq)

    def signed_in(self, request: Request) -> bool:
        return security.signed_in(
            self.token,
            request.cookies.get(security.AUTH_COOKIE),
            request.headers.get("authorization"),
        )

    def render(
        self, request: Request, name: str, ctx: dict[str, Any], status: int = 200
    ) -> Response:
        csrf = request.cookies.get(security.CSRF_COOKIE) or security.new_csrf()
        can_act = not self.read_only and self.token is not None and self.signed_in(request)
        values: dict[str, Any] = {
            "csrf": csrf,
            "can_act": can_act,
            "read_only": self.read_only,
            "has_token": self.token is not None,
            "path": request.url.path,
            "flash": request.query_params.get("flash", "")[:300],
            "flash_ok": request.query_params.get("ok") == "1",
            "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        }
        values.update(ctx)
        body = self.env.get_template(name).render(**values)
        # a lone surrogate (durq stores and round-trips them in payloads, results, errors)
        # cannot be UTF-8: shown as its escape, not a 500 for every page that lists the job
        response = HTMLResponse(body.encode("utf-8", "backslashreplace"), status_code=status)
        if request.cookies.get(security.CSRF_COOKIE) != csrf:
            response.set_cookie(
                security.CSRF_COOKIE, csrf, httponly=True, samesite="strict", path="/"
            )
        return response
