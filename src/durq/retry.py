"""Backoff policies and ``Retry-After`` parsing.

A backoff policy answers one question: how many seconds to wait before the next
attempt, given the number of the attempt that just failed (1-based) and its error.
Policies are small frozen value objects with one method, ``delay``. All durations
are seconds as floats.

``Retry-After`` values found on errors (:func:`retry_after_of`) override the policy.
They are returned uncapped; callers apply :data:`MAX_RETRY_AFTER` (or their own
configured cap) so that a server cannot park a job for days.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, cast, runtime_checkable
from urllib.error import HTTPError

from durq.errors import ConfigError

#: The default cap on a ``Retry-After`` delay (seconds, one hour): each task's
#: ``max_retry_after`` (``@dq.task(max_retry_after=...)``; None: no cap). A longer delay
#: found on an error is cut to the cap by the worker, not by this module, and the attempt's
#: error entry says so (docs/features/snooze.md).
MAX_RETRY_AFTER = 3600.0

_MAX_DEPTH = 16  # links followed from the outermost error (which is at depth 0)
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")

DelayFn = Callable[[int, BaseException | None], float]


@runtime_checkable
class Backoff(Protocol):
    """A backoff policy: anything with a ``delay`` method of this signature."""

    def delay(self, attempt: int, error: BaseException | None) -> float:
        """Return the seconds to wait before the next attempt.

        Args:
            attempt (int): number of the attempt that just failed, 1-based.
            error (BaseException | None): the error that attempt raised, if any.

        Returns:
            float: non-negative delay in seconds.
        """
        ...


def _seconds(value: object, what: str) -> float:
    """Return ``value`` as a finite non-negative float, else raise ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what} must be finite and >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Tiers:
    """Fixed delays per attempt; the last tier repeats.

    Attributes:
        seconds (tuple[float, ...]): attempt 1 waits ``seconds[0]``, attempt 2
            ``seconds[1]``, ...; attempts past the end wait ``seconds[-1]``.

    Raises:
        ConfigError: at construction, if ``seconds`` is empty or holds a negative,
            non-finite or non-numeric value.
    """

    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if isinstance(self.seconds, str | bytes) or not isinstance(self.seconds, Sequence):
            raise ConfigError(f"tiers must be a sequence of seconds, got {self.seconds!r}")
        values = tuple(_seconds(s, "a tier") for s in self.seconds)
        if not values:
            raise ConfigError("tiers needs at least one delay")
        object.__setattr__(self, "seconds", values)

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Return the tier for ``attempt`` (attempts below 1 count as 1), in seconds."""
        return self.seconds[min(max(attempt, 1), len(self.seconds)) - 1]


@dataclass(frozen=True)
class Exponential:
    """Exponential backoff with proportional jitter.

    ``delay = min(cap, base * factor ** (attempt - 1))``, then multiplied by a
    uniform random factor in ``[1 - jitter, 1 + jitter]`` and clamped to
    ``[0, cap]``. With ``jitter=0`` the delay is deterministic.

    This is the usual "exponential backoff with jitter" (see Marc Brooker,
    "Exponential Backoff And Jitter", AWS Architecture Blog, 2015). Ours is an
    "equal-ish", proportional variant: like the blog's *Equal Jitter* it keeps a
    floor (``(1 - jitter)`` of the exponential value) so retries never collapse to
    zero, but it spreads symmetrically around that value instead of over its upper
    half, so the mean delay stays at the plain exponential curve.

    Attributes:
        base (float): delay after the first failed attempt, in seconds (>= 0).
        factor (float): growth per attempt (>= 1).
        cap (float): largest delay, in seconds (finite, >= 0).
        jitter (float): relative spread, in ``[0, 1]``.

    Raises:
        ConfigError: at construction, on a negative or non-finite value,
            ``factor < 1`` or ``jitter`` outside ``[0, 1]``.
    """

    base: float = 5.0
    factor: float = 4.0
    cap: float = 900.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        _seconds(self.base, "base")
        _seconds(self.cap, "cap")
        if _seconds(self.factor, "factor") < 1:
            raise ConfigError(f"factor must be >= 1, got {self.factor!r}")
        if _seconds(self.jitter, "jitter") > 1:
            raise ConfigError(f"jitter must be within [0, 1], got {self.jitter!r}")

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Return the jittered exponential delay for ``attempt``, in seconds (<= cap)."""
        if self.base == 0:
            return 0.0
        try:
            raw = min(self.cap, self.base * self.factor ** max(attempt - 1, 0))
        except OverflowError:
            raw = self.cap
        if self.jitter:
            raw *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return min(self.cap, max(0.0, raw))


@dataclass(frozen=True)
class Constant:
    """The same delay after every attempt.

    Attributes:
        seconds (float): the delay, in seconds.

    Raises:
        ConfigError: at construction, if ``seconds`` is negative or not finite.
    """

    seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", _seconds(self.seconds, "seconds"))

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Return :attr:`seconds`."""
        return self.seconds


@dataclass(frozen=True)
class FromCallable:
    """A backoff given as a plain function ``(attempt, error) -> seconds``.

    Attributes:
        fn (Callable[[int, BaseException | None], float]): the user's function.

    Raises:
        ConfigError: at construction if ``fn`` is not callable.
    """

    fn: DelayFn

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(f"backoff function must be callable, got {self.fn!r}")

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Call :attr:`fn`; a negative result counts as 0.

        Raises:
            ConfigError: if the function returns a non-number, NaN or infinity.
                Exceptions raised by the function itself propagate unchanged.
        """
        value = self.fn(attempt, error)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ConfigError(f"backoff function returned {value!r}, not a number of seconds")
        return _seconds(max(0.0, float(value)), "backoff function result")


def tiers(seconds: Sequence[float]) -> Tiers:
    """Build a :class:`Tiers` policy, e.g. ``tiers([5, 25, 120, 600])``.

    Args:
        seconds (Sequence[float]): delays in seconds per attempt; the last repeats.

    Raises:
        ConfigError: if ``seconds`` is empty or holds a negative or non-finite value.
    """
    try:
        values = tuple(seconds)
    except TypeError:
        raise ConfigError(f"tiers must be a sequence of seconds, got {seconds!r}") from None
    return Tiers(values)


def exponential(
    base: float = 5.0, factor: float = 4.0, cap: float = 900.0, jitter: float = 0.1
) -> Exponential:
    """Build an :class:`Exponential` policy (see it for the formula).

    Args:
        base (float): first delay in seconds (>= 0).
        factor (float): growth per attempt (>= 1).
        cap (float): largest delay in seconds (finite, >= 0).
        jitter (float): relative random spread in ``[0, 1]``.

    Raises:
        ConfigError: on a negative or non-finite value, ``factor < 1`` or
            ``jitter`` outside ``[0, 1]``.
    """
    return Exponential(base=base, factor=factor, cap=cap, jitter=jitter)


def constant(seconds: float) -> Constant:
    """Build a :class:`Constant` policy.

    Args:
        seconds (float): delay in seconds (finite, >= 0).

    Raises:
        ConfigError: if ``seconds`` is negative, not finite or not a number.
    """
    return Constant(seconds)


#: The default policy (DESIGN §5): 5 s, 20 s, 80 s, 320 s, then 900 s, each ±10 %.
DEFAULT_BACKOFF: Backoff = exponential(base=5, factor=4, cap=900, jitter=0.1)


def as_backoff(spec: Backoff | DelayFn | None) -> Backoff:
    """Turn what a user passed as ``backoff=`` into a policy.

    Args:
        spec (Backoff | Callable[[int, BaseException | None], float] | None):
            ``None`` for :data:`DEFAULT_BACKOFF`; an object with a ``delay``
            method, returned as is; or a plain function, wrapped in
            :class:`FromCallable`.

    Raises:
        ConfigError: if ``spec`` is none of these (a class is not accepted).
    """
    if spec is None:
        return DEFAULT_BACKOFF
    if not isinstance(spec, type) and callable(getattr(spec, "delay", None)):
        return cast(Backoff, spec)
    if callable(spec) and not isinstance(spec, type):
        return FromCallable(spec)
    raise ConfigError(f"backoff must be a policy, a function or None, got {spec!r}")


def parse_retry_after(value: object, now: float) -> float | None:
    """Read a ``Retry-After`` value as seconds from ``now``.

    Accepts a non-negative number of seconds (``int``/``float``, or a ``str``/
    ``bytes`` of digits with an optional decimal part), an HTTP-date string
    (RFC 9110 §10.2.3, e.g. ``"Wed, 21 Oct 2015 07:28:00 GMT"``), a
    ``datetime`` (naive ones are taken as UTC, as HTTP dates are) or a
    ``timedelta``. The result is not capped (see :data:`MAX_RETRY_AFTER`).

    Args:
        value (object): the header value or attribute.
        now (float): the current time, in epoch seconds.

    Returns:
        float | None: seconds to wait (a date in the past gives ``0.0``), or
        ``None`` when ``value`` is missing, negative or unreadable. Never raises.
    """
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
        return seconds if seconds >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        if _DELAY_SECONDS.fullmatch(text):
            seconds = float(text)
            return seconds if math.isfinite(seconds) else None
        try:
            value = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        try:
            return max(0.0, value.timestamp() - now)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _links(exc: BaseException) -> list[BaseException]:
    """Exceptions reached from ``exc``: group members, ``__cause__``, ``__context__``."""
    linked: list[BaseException] = []
    if isinstance(exc, BaseExceptionGroup):
        linked.extend(exc.exceptions)
    if exc.__cause__ is not None:
        linked.append(exc.__cause__)
    if exc.__context__ is not None and not exc.__suppress_context__:
        linked.append(exc.__context__)
    return linked


def _walk(error: BaseException) -> Iterator[BaseException]:
    """Yield ``error`` and what it links to, depth-first, once each, to depth 16."""
    seen: set[int] = set()
    stack: list[tuple[BaseException, int]] = [(error, 0)]
    while stack:
        exc, depth = stack.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        if depth < _MAX_DEPTH:
            stack.extend((link, depth + 1) for link in reversed(_links(exc)))


def _header_of(exc: BaseException) -> object:
    """The raw Retry-After header of a 429/503 HTTP error from urllib/requests/httpx."""
    status: object
    headers: Any
    if isinstance(exc, HTTPError):
        status, headers = exc.code, exc.headers
    elif _is_instance(exc, "requests", "exceptions", "HTTPError") or _is_instance(
        exc, "httpx", "HTTPStatusError"
    ):
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        headers = getattr(response, "headers", None)
    else:
        return None
    get = getattr(headers, "get", None)
    return get("Retry-After") if status in _RETRY_AFTER_STATUSES and callable(get) else None


def _is_instance(exc: BaseException, module_name: str, *path: str) -> bool:
    """``isinstance(exc, module.<path>)`` if that module is already imported, else False."""
    target: object = sys.modules.get(module_name)
    for part in path:
        target = getattr(target, part, None)
    return isinstance(target, type) and isinstance(exc, target)


def retry_after_of(error: BaseException, now: float) -> float | None:
    """Find the first ``Retry-After`` carried by an error or anything it links to.

    Walks ``error``, then (depth-first, each exception once, at most 16 links
    deep) the members of an ``ExceptionGroup``, ``__cause__`` and ``__context__``
    (unless suppressed). At each exception it looks, in order, at:

    * a ``retry_after`` attribute (``durq.Transient`` has one), read with
      :func:`parse_retry_after`;
    * ``urllib.error.HTTPError`` with status 429 or 503 and a ``Retry-After``
      header;
    * ``requests.exceptions.HTTPError`` / ``httpx.HTTPStatusError`` whose
      ``.response`` has status 429 or 503 and a ``Retry-After`` header. These
      libraries are only consulted if already imported; this never imports them.

    Args:
        error (BaseException): the error an attempt raised.
        now (float): the current time, in epoch seconds (for HTTP dates).

    Returns:
        float | None: uncapped seconds to wait, or ``None`` if nothing usable was
        found.
    """
    for exc in _walk(error):
        seconds = parse_retry_after(getattr(exc, "retry_after", None), now)
        if seconds is None:
            seconds = parse_retry_after(_header_of(exc), now)
        if seconds is not None:
            return seconds
    return None
