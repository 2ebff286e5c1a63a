"""Limits: concurrency and rate per key, enforced through the database for every worker.

A task declares ``concurrency=``, ``concurrency_key=`` and ``rate_limit=``; each job's
:class:`~durq.model.limits.JobLimit` is computed at enqueue and stored on its row, and the
store's claim never starts a job whose key is at its limit. Code outside the queue takes a
slot of the same key with :meth:`durq.Durq.limit` (a *hold*: a row with a lease, so that a
crashed holder frees its slot when the lease runs out). See docs/features/limits.md.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from durq.checks import _check_name
from durq.errors import ConfigError, LimitTimeout, PayloadError
from durq.model.limits import MAX_RATE_PERIOD, JobLimit

if TYPE_CHECKING:
    from durq.model import NewJob
    from durq.store import Store

log = logging.getLogger("durq.limits")

#: Longest limit key accepted, in characters.
MAX_KEY = 200
#: Largest concurrency or rate count accepted.
MAX_COUNT = 1_000_000

_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
}  # fmt: skip
_RATE = re.compile(r"([0-9]+)/([a-z]+)")

KeyFn = Callable[[dict[str, Any]], str]


def parse_rate(text: str) -> tuple[int, float]:
    """``"10/s"`` -> ``(10, 1.0)``: N starts per second, minute or hour.

    Units: ``s``/``sec``/``second``, ``m``/``min``/``minute``, ``h``/``hour``. N is an
    integer from 1 to 1,000,000; no spaces, signs or fractions.

    Raises:
        ConfigError: anything else (the message shows the accepted form).
    """
    if not isinstance(text, str):
        raise ConfigError(f"rate_limit must be a str like '10/s', not {type(text).__name__}")
    m = _RATE.fullmatch(text)
    if m is None or m.group(2) not in _UNITS or not 1 <= int(m.group(1)) <= MAX_COUNT:
        raise ConfigError(
            f"rate_limit must be 'N/s', 'N/m' or 'N/h' with N from 1 to {MAX_COUNT} "
            f"(units s, sec, second, m, min, minute, h, hour), not {text!r}"
        )
    per = _UNITS[m.group(2)]
    assert per <= MAX_RATE_PERIOD
    return int(m.group(1)), per


def check_key(key: object, what: str = "limit key") -> str:
    """A limit key: a non-empty str of at most 200 characters that both backends store
    (:func:`durq.checks.check_storable`).

    Raises:
        ConfigError: anything else.
    """
    return _check_name(what, key, MAX_KEY)


def _check_count(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_COUNT:
        raise ConfigError(f"{what} must be an int from 1 to {MAX_COUNT}, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """A task's limit settings, validated at registration.

    Attributes:
        concurrency: at most this many of its jobs with the same key running at once.
        key: a constant key (a named limit shared with other tasks and ``Durq.limit``), a
            callable ``payload -> str`` evaluated at enqueue, or None for the task's name.
        rate: at most this many starts per ``per`` seconds per key.
        per: the rate's period in seconds.
        task: the task's name (the key when ``key`` is None).
    """

    task: str
    concurrency: int | None
    key: str | KeyFn | None
    rate: int | None
    per: float | None

    @classmethod
    def build(
        cls,
        task: str,
        concurrency: int | None,
        concurrency_key: str | KeyFn | None,
        rate_limit: str | None,
    ) -> TaskLimits | None:
        """Validate a task's options; None when it has no limit.

        Raises:
            ConfigError: a bad concurrency, key or rate, or a key without concurrency/rate.
        """
        if concurrency is not None:
            _check_count("concurrency", concurrency)
        rate, per = parse_rate(rate_limit) if rate_limit is not None else (None, None)
        if concurrency_key is not None:
            if not callable(concurrency_key):
                check_key(concurrency_key, "concurrency_key")
            if concurrency is None and rate is None:
                raise ConfigError("concurrency_key needs concurrency= or rate_limit=")
        if concurrency is None and rate is None:
            return None
        return cls(task, concurrency, concurrency_key, rate, per)

    def for_payload(self, payload: Mapping[str, Any]) -> JobLimit:
        """The job's limit: the key computed from ``payload`` now.

        Raises:
            PayloadError: the key function raised, or returned something that is not a
                non-empty str of at most 200 characters (nothing is written).
        """
        if self.key is None:
            key = self.task
        elif isinstance(self.key, str):
            key = self.key
        else:
            try:
                key = self.key(dict(payload))
            except Exception as exc:
                raise PayloadError(
                    f"concurrency_key of {self.task} failed on the payload: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            try:
                check_key(key, f"concurrency_key of {self.task} returned a key that")
            except ConfigError as exc:
                raise PayloadError(str(exc)) from None
        return JobLimit(key, self.concurrency, self.rate, self.per)


def with_limit(new: NewJob, limits: TaskLimits | None, payload: Mapping[str, Any]) -> NewJob:
    """``new`` with its limit set from the task's settings (unchanged without limits)."""
    if limits is None:
        return new
    return replace(new, limit=limits.for_payload(payload))


class StoreOwner(Protocol):
    """What a hold needs of its app: the open store (a :class:`durq.Durq` has one)."""

    @property
    def store(self) -> Store: ...


class Hold:
    """A slot of a named limit held by code outside the queue (``with dq.limit(...)``).

    Entering waits (polling, 10 ms growing to 250 ms) until the key has a free slot: jobs of
    that key in ``running`` plus live holds below ``concurrency``. While held, a daemon
    thread extends the lease every ``lease / 3`` seconds; if an extension finds the hold
    gone (its lease ran out, e.g. the process was frozen), :attr:`lost` becomes True.
    Leaving deletes the hold. A process that dies holding one frees the slot when its
    lease expires.

    Args:
        app: the Durq app (only its store is used).
        name: the limit key, shared with jobs whose ``concurrency_key`` is ``name``.
        concurrency: the most slots in use (running jobs + holds) under which this hold is
            granted (>= 1).
        lease: seconds the hold lasts without an extension (> 0; default 60).
        timeout: seconds to wait for a slot, None to wait for ever.

    Raises:
        ConfigError: bad arguments.
        LimitTimeout: no slot within ``timeout`` (on enter).
        StoreError: the database could not be used.
    """

    def __init__(
        self,
        app: StoreOwner,
        name: str,
        concurrency: int,
        *,
        lease: float = 60.0,
        timeout: float | None = None,
    ) -> None:
        self.app = app
        self.name = check_key(name, "limit name")
        self.concurrency = _check_count("concurrency", concurrency)
        if not (isinstance(lease, int | float) and 0 < lease <= 86400):
            raise ConfigError(f"lease must be seconds from 0 to 86400, not {lease!r}")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout >= 0):
            raise ConfigError(f"timeout must be None or seconds >= 0, not {timeout!r}")
        self.lease = float(lease)
        self.timeout = timeout
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.id: int | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> Hold:
        """Wait for a slot and take it (see the class). Returns self."""
        if self.id is not None:
            raise ConfigError(f"the hold on {self.name!r} is already held")
        store = self.app.store
        end = None if self.timeout is None else time.monotonic() + self.timeout
        pause = 0.01
        while True:
            hold_id = store.acquire_hold(self.name, self.concurrency, self.lease, self.holder)
            if hold_id is not None:
                break
            if end is not None and time.monotonic() + pause > end:
                raise LimitTimeout(
                    f"no free slot of limit {self.name!r} (concurrency {self.concurrency}) "
                    f"within {self.timeout} s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.25)
        self.id, self.lost = hold_id, False
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._renew, name=f"durq-hold-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.id is not None:
            hold_id, self.id = self.id, None
            self.app.store.release_hold(hold_id)

    def _renew(self) -> None:
        while not self._stop.wait(self.lease / 3):
            hold_id = self.id
            if hold_id is None:
                return
            try:
                if not self.app.store.extend_hold(hold_id, self.lease):
                    self.lost = True
                    log.warning("hold on limit %r lost: its lease ran out", self.name)
                    return
            except Exception as exc:  # noqa: BLE001 - keep trying until the lease decides
                log.warning("could not extend the hold on %r: %s", self.name, exc)

    def __enter__(self) -> Hold:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
