"""What keeps the dashboard safe to expose: the action token, CSRF, and response headers.

- Actions are POSTs; a GET on an action URL is 405 and never changes state.
- An action needs the token: an ``Authorization: Bearer <token>`` header (scripts), or the
  sign-in cookie the ``/login`` form sets (people). The cookie holds an HMAC of the token,
  not the token, and is ``HttpOnly; SameSite=Strict``.
- A browser action also needs the CSRF field: the value of the ``durq_csrf`` cookie
  (random, ``SameSite=Strict``) echoed in a hidden form field (the double-submit pattern),
  and an ``Origin`` header, when sent, naming this host.
- Every page carries a Content-Security-Policy that allows scripts only from the
  dashboard's own static file (no inline script), ``nosniff`` and ``frame-ancestors 'none'``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

AUTH_COOKIE = "durq_auth"
CSRF_COOKIE = "durq_csrf"
CSRF_FIELD = "csrf"

#: Scripts and styles only from the dashboard's own static files; no inline script.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def auth_value(token: str) -> str:
    """The sign-in cookie's value for ``token``: an HMAC, so the cookie is not the token."""
    return hmac.new(token.encode(), b"durq-dashboard-auth", hashlib.sha256).hexdigest()


def new_csrf() -> str:
    return secrets.token_urlsafe(24)


def signed_in(token: str | None, cookie: str | None, authorization: str | None) -> bool:
    """True when the request carries the token (Bearer header) or the sign-in cookie."""
    if not token:
        return False
    if authorization and authorization.startswith("Bearer "):
        return hmac.compare_digest(authorization[7:].encode(), token.encode())
    return bool(cookie) and hmac.compare_digest(str(cookie), auth_value(token))


def csrf_ok(cookie: str | None, field: str | None, bearer: bool) -> bool:
    """The double-submit check; a Bearer request (no cookie sent cross-site) passes."""
    if bearer:
        return True
    return bool(cookie) and bool(field) and hmac.compare_digest(str(cookie), str(field))


def origin_ok(origin: str | None, host: str | None) -> bool:
    """A browser's ``Origin`` header, when present, must name this host (``null`` fails)."""
    if origin is None:
        return True
    netloc = urlsplit(origin).netloc
    return bool(host) and netloc == host


def safe_next(target: str | None, default: str = "/") -> str:
    """A redirect target that stays on this site: a path starting with one ``/``."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target
