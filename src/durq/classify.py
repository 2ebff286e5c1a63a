"""Decide whether a task's error is worth retrying.

:func:`classify` walks the error and everything it links to and returns a
:class:`Classification`: ``transient`` (retry, if attempts are left) or
``permanent`` (fail now). Task signals (:class:`durq.Permanent`,
:class:`durq.Transient`) decide first, then the user's rules, then a built-in
table of well-known network, HTTP and SQLite errors. ``requests`` and ``httpx``
errors are recognised only if those libraries are already imported; this module
never imports them.
"""

from __future__ import annotations

import errno
import http.client
import re
import socket
import sqlite3
import ssl
import sys
import urllib.error
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from durq.errors import ConfigError, Permanent, Transient

TRANSIENT = "transient"
PERMANENT = "permanent"
_KINDS = (TRANSIENT, PERMANENT)
_MAX_DEPTH = 16  # links followed from the outermost error, as in durq.retry

#: A user function: return TRANSIENT, PERMANENT, or None for "no opinion".
Classifier = Callable[[BaseException], str | None]

_Verdict = tuple[str, str] | None  # (kind, reason) or no opinion
_Judge = Callable[[BaseException], _Verdict]


def _check_kind(kind: object, what: str) -> str:
    if kind not in _KINDS:
        raise ConfigError(f"{what} must be {TRANSIENT!r} or {PERMANENT!r}, got {kind!r}")
    return str(kind)


def _text(exc: BaseException) -> str:
    """``str(exc)``, or "" if the exception's ``__str__`` itself fails."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break classification
        return ""


def describe(exc: BaseException) -> str:
    """``str(exc)`` for error history; never raises (a broken ``__str__`` is reported as such)."""
    try:
        return str(exc)
    except BaseException:  # noqa: BLE001 - whatever __str__ raises, the worker goes on
        return f"<{type(exc).__name__}: str() failed>"


@dataclass(frozen=True)
class Classification:
    """The verdict on one error.

    Attributes:
        kind (str): :data:`TRANSIENT` or :data:`PERMANENT`.
        reason (str): short machine-readable reason, e.g. ``"durq.Permanent"``,
            ``"http_404"``, ``"connection_reset"``, ``"timeout"``, ``"dns"``,
            ``"sqlite_busy"``, ``"rule:<text>"`` or ``"unclassified"``.
        retry_after (float | None): seconds to wait, if known. :func:`classify`
            leaves it ``None``; callers fill it from :func:`durq.retry.retry_after_of`.

    Raises:
        ConfigError: at construction, if ``kind`` is not a known kind.
    """

    kind: str
    reason: str
    retry_after: float | None = None

    def __post_init__(self) -> None:
        _check_kind(self.kind, "kind")


@dataclass(frozen=True)
class Rule:
    """A user rule: errors of some types and/or matching a pattern are ``kind``.

    When both ``types`` and ``pattern`` are set, both must match.

    Attributes:
        kind (str): :data:`TRANSIENT` or :data:`PERMANENT`.
        types (tuple[type[BaseException], ...]): matched with ``isinstance``.
        pattern (str | None): regular expression searched, case-insensitively,
            in ``str(exc)``, the type's name and its ``module.qualname``.
        reason (str): label reported as ``"rule:<reason>"``; defaults to the
            pattern or the type names.

    Raises:
        ConfigError: at construction, on an unknown ``kind``, a ``types`` entry
            that is not an exception class, an invalid regular expression, or
            when neither ``types`` nor ``pattern`` is given.
    """

    kind: str
    types: tuple[type[BaseException], ...] = ()
    pattern: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        _check_kind(self.kind, "rule kind")
        types = (self.types,) if isinstance(self.types, type) else tuple(self.types)
        for cls in types:
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise ConfigError(f"rule types must be exception classes, got {cls!r}")
        object.__setattr__(self, "types", types)
        if self.pattern is None and not types:
            raise ConfigError("a rule needs types, a pattern, or both")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except (re.error, TypeError) as exc:
                raise ConfigError(f"bad rule pattern {self.pattern!r}: {exc}") from None

    @property
    def label(self) -> str:
        """The text after ``rule:`` in a :class:`Classification` this rule makes."""
        return self.reason or self.pattern or ",".join(t.__name__ for t in self.types)

    def matches(self, exc: BaseException) -> bool:
        """Whether ``exc`` (a BaseException) matches this rule. Never raises."""
        if self.types and not isinstance(exc, self.types):
            return False
        if self.pattern is None:
            return True
        cls = type(exc)
        texts = (_text(exc), cls.__name__, f"{cls.__module__}.{cls.__qualname__}")
        return any(re.search(self.pattern, text, re.IGNORECASE) for text in texts)


def rule(
    kind: str,
    *,
    types: type[BaseException] | Sequence[type[BaseException]] = (),
    pattern: str | None = None,
    reason: str = "",
) -> Rule:
    """Build a :class:`Rule`, e.g. ``rule(PERMANENT, pattern="quota exceeded")``.

    Args:
        kind (str): :data:`TRANSIENT` or :data:`PERMANENT`.
        types (type[BaseException] | Sequence[type[BaseException]]): exception
            class(es) to match.
        pattern (str | None): regular expression searched case-insensitively in
            the message and the type name.
        reason (str): label for the classification's reason.

    Raises:
        ConfigError: on an unknown ``kind``, a non-exception type, a bad pattern,
            or neither ``types`` nor ``pattern``.
    """
    return Rule(kind, (types,) if isinstance(types, type) else tuple(types), pattern, reason)


# ---- the built-in table --------------------------------------------------------------------

_TRANSIENT_STATUSES = frozenset({408, 425, 429})
_PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 410, 422})
_UNREACHABLE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN})
_SQLITE_BUSY = re.compile(r"database (?:table )?is (?:locked|busy)", re.IGNORECASE)


def _status(code: object) -> _Verdict:
    """HTTP status: 408/425/429/5xx transient, 400/401/403/404/410/422 permanent."""
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    if code in _TRANSIENT_STATUSES or 500 <= code <= 599:
        return TRANSIENT, f"http_{code}"
    return (PERMANENT, f"http_{code}") if code in _PERMANENT_STATUSES else None


def _response_status(exc: BaseException) -> _Verdict:
    return _status(getattr(getattr(exc, "response", None), "status_code", None))


def _fixed(kind: str, reason: str) -> _Judge:
    return lambda exc: (kind, reason)


def _wrapper(reason: str) -> _Judge:
    """Client-library transport errors: transient, unless a certificate failed to verify."""

    def judge(exc: BaseException) -> _Verdict:
        if "CERTIFICATE_VERIFY_FAILED" in _text(exc):
            return PERMANENT, "ssl_cert_verify"
        return TRANSIENT, reason

    return judge


def _url_error(exc: BaseException) -> _Verdict:
    reason = getattr(exc, "reason", None)
    inner = _builtin(reason) if isinstance(reason, BaseException) else None
    return inner or _wrapper("url_error")(exc)


def _sqlite(exc: BaseException) -> _Verdict:
    name = getattr(exc, "sqlite_errorname", None) or ""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or _SQLITE_BUSY.search(_text(exc)):
        return TRANSIENT, "sqlite_busy"
    return None


def _unreachable(exc: BaseException) -> _Verdict:
    return (
        (TRANSIENT, "network_unreachable") if getattr(exc, "errno", None) in _UNREACHABLE else None
    )


_TypeRef = type[BaseException] | tuple[str, str]  # a class, or (module, attribute) looked up lazily

#: A TypeError raised by a call that does not fit the function's signature.
_CALL_MISMATCH = re.compile(
    r"\(\) (takes \d+|got an unexpected keyword|got multiple values|missing \d+ required|"
    r"takes no arguments|takes from \d+|takes exactly|argument after \*)"
)


def _call_mismatch(exc: BaseException) -> _Verdict:
    if _CALL_MISMATCH.search(str(exc)):
        return PERMANENT, "programming_error"
    return None


#: (exception type, judge). The FIRST entry whose type matches decides, even when its
#: judge has no opinion (so a 418 HTTPError is not caught by the URLError entry).
_TABLE: tuple[tuple[_TypeRef, _Judge], ...] = (
    # Programming errors: the same code fails the same way on every attempt, so retrying
    # them only delays the failure (and its alert). Overridable: a task's or the app's
    # ``classify=`` rules are tried before this table, e.g.
    # ``rule(TRANSIENT, types=ImportError)`` for a plugin installed while jobs wait.
    (NameError, _fixed(PERMANENT, "programming_error")),  # and UnboundLocalError
    (AttributeError, _fixed(PERMANENT, "programming_error")),
    (ImportError, _fixed(PERMANENT, "programming_error")),  # and ModuleNotFoundError
    (TypeError, _call_mismatch),
    (("requests", "HTTPError"), _response_status),
    (("httpx", "HTTPStatusError"), _response_status),
    (("httpx", "UnsupportedProtocol"), lambda e: None),  # a bad URL: retrying cannot help
    (("httpx", "LocalProtocolError"), lambda e: None),  # our request was malformed
    (("requests", "Timeout"), _wrapper("timeout")),
    (("requests", "ConnectionError"), _wrapper("connection")),
    (("requests", "ChunkedEncodingError"), _wrapper("connection_dropped")),
    (("httpx", "TimeoutException"), _wrapper("timeout")),
    (("httpx", "NetworkError"), _wrapper("connection")),
    (("httpx", "RemoteProtocolError"), _wrapper("connection_dropped")),
    (("httpx", "TransportError"), _wrapper("transport")),
    (urllib.error.HTTPError, lambda e: _status(getattr(e, "code", None))),
    (urllib.error.URLError, _url_error),
    (sqlite3.OperationalError, _sqlite),
    (ssl.SSLCertVerificationError, _fixed(PERMANENT, "ssl_cert_verify")),
    (ssl.SSLError, _fixed(TRANSIENT, "ssl")),
    (http.client.RemoteDisconnected, _fixed(TRANSIENT, "connection_dropped")),
    (http.client.IncompleteRead, _fixed(TRANSIENT, "connection_dropped")),
    (http.client.BadStatusLine, _fixed(TRANSIENT, "connection_dropped")),
    (socket.gaierror, _fixed(TRANSIENT, "dns")),
    (socket.herror, _fixed(TRANSIENT, "dns")),
    (ConnectionResetError, _fixed(TRANSIENT, "connection_reset")),
    (ConnectionRefusedError, _fixed(TRANSIENT, "connection_refused")),
    (ConnectionAbortedError, _fixed(TRANSIENT, "connection_aborted")),
    (BrokenPipeError, _fixed(TRANSIENT, "broken_pipe")),
    (ConnectionError, _fixed(TRANSIENT, "connection")),
    (TimeoutError, _fixed(TRANSIENT, "timeout")),  # socket.timeout is TimeoutError
    (OSError, _unreachable),
)

_LAZY_MODULES = {"requests": "requests.exceptions", "httpx": "httpx"}


def _resolve(ref: _TypeRef) -> type | None:
    """The class ``ref`` names, or None if its library has not been imported."""
    if isinstance(ref, type):
        return ref
    module = sys.modules.get(_LAZY_MODULES[ref[0]])
    cls = getattr(module, ref[1], None)
    return cls if isinstance(cls, type) else None


def _builtin(exc: BaseException) -> _Verdict:
    for ref, judge in _TABLE:
        cls = _resolve(ref)
        if cls is not None and isinstance(exc, cls):
            return judge(exc)
    return None


# ---- the walk ------------------------------------------------------------------------------


def _judge(exc: BaseException, rules: Sequence[Rule | Classifier]) -> _Verdict:
    """The verdict on ``exc`` alone: durq signals, then user rules, then the table."""
    if isinstance(exc, Permanent):
        return PERMANENT, "durq.Permanent"
    if isinstance(exc, Transient):
        return TRANSIENT, "durq.Transient"
    for user_rule in rules:
        if isinstance(user_rule, Rule):
            if user_rule.matches(exc):
                return user_rule.kind, f"rule:{user_rule.label}"
            continue
        kind = user_rule(exc)
        if kind is not None:
            name = getattr(user_rule, "__qualname__", type(user_rule).__qualname__)
            return _check_kind(kind, f"classifier {name} result"), f"rule:{name}"
    return _builtin(exc)


def _decide(
    exc: BaseException, rules: Sequence[Rule | Classifier], depth: int, seen: set[int]
) -> _Verdict:
    if depth > _MAX_DEPTH or id(exc) in seen:
        return None
    seen.add(id(exc))
    verdict = _judge(exc, rules)
    if verdict is None and isinstance(exc, BaseExceptionGroup):
        members = [_decide(m, rules, depth + 1, seen) for m in exc.exceptions]
        found = [v for v in members if v is not None]
        verdict = next((v for v in found if v[0] == PERMANENT), found[0] if found else None)
    links = [exc.__cause__, None if exc.__suppress_context__ else exc.__context__]
    for link in links:
        if verdict is None and link is not None:
            verdict = _decide(link, rules, depth + 1, seen)
    return verdict


def classify(
    error: BaseException, rules: Sequence[Rule | Classifier] = (), default: str = TRANSIENT
) -> Classification:
    """Classify an error raised by a task as transient or permanent.

    1. Walk: the error itself first; if it is an ``ExceptionGroup`` /
       ``BaseExceptionGroup``, its members; then ``__cause__``; then
       ``__context__`` (unless ``__suppress_context__``). Depth-first, each
       exception at most once (by id, so cause cycles terminate), following at
       most 16 links from ``error``.
    2. At each exception, in order: ``durq.Permanent`` → permanent;
       ``durq.Transient`` → transient; the user's ``rules`` in order (first
       match wins); then the built-in table (network errors, timeouts, DNS, TLS
       except certificate failures, urllib/requests/httpx HTTP statuses
       408/425/429/5xx transient and 400/401/403/404/410/422 permanent, SQLite
       busy/locked; programming errors — ``NameError``, ``AttributeError``,
       ``ImportError`` and a ``TypeError`` from a call that does not fit the
       function's signature — permanent, reason ``programming_error``).
    3. The first exception in walk order with a verdict decides, so the
       outermost wins: ``Permanent`` raised from a ``ConnectionResetError`` is
       permanent, a ``RuntimeError`` wrapping one is transient. For a group
       without a verdict of its own: permanent if any member is, else transient
       if any member is, else the walk goes on to the group's cause/context.
    4. Nothing matched: ``Classification(default, "unclassified")``.

    Args:
        error (BaseException): the error an attempt raised.
        rules (Sequence[Rule | Classifier]): user rules and functions returning
            ``TRANSIENT``, ``PERMANENT`` or ``None`` (no opinion).
        default (str): the kind of unclassified errors.

    Returns:
        Classification: kind and reason; ``retry_after`` is left ``None``.

    Raises:
        ConfigError: if ``default`` is not a kind, a ``rules`` entry is neither a
            :class:`Rule` nor callable, or a classifier returns anything other
            than ``TRANSIENT``, ``PERMANENT`` or ``None``. Exceptions raised by a
            classifier function propagate unchanged.
    """
    _check_kind(default, "default")
    for entry in rules:
        if not isinstance(entry, Rule) and not callable(entry):
            raise ConfigError(f"rules must be Rule objects or callables, got {entry!r}")
    verdict = _decide(error, tuple(rules), 0, set())
    return Classification(*verdict) if verdict else Classification(default, "unclassified")
