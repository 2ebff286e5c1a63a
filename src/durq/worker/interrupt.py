"""Stopping a running ``def`` body: :class:`durq.Interrupted` raised in its thread.

``PyThreadState_SetAsyncExc`` (the technique Dramatiq's time limits use) makes a thread
raise an exception at its next Python bytecode. A blocking C call is not interrupted: a
``time.sleep(5)``, a socket read or a ``Lock.acquire`` runs to its end, and the exception
is raised as soon as it returns (measured on CPython 3.11: a ``time.sleep(3)`` interrupted
at 0.3 s raised at 3.01 s). The worker raises it again every
:data:`RAISE_EVERY` seconds until the body is gone (a body that catches it once is asked
again); the pause lets a ``finally`` block clean up before the next raise.

The guard makes sure the exception can only land inside the body: :meth:`BodyGuard.run`
records the thread while the body runs, :meth:`BodyGuard.interrupt` raises only while it
does (under the guard's lock), and on the way out the guard forgets the thread and clears
an exception that was set but not yet raised, so that none reaches the worker's own code.
While the body is inside durq's store (a ``ctx.progress``, ``ctx.step``, an enqueue) the
raise waits for the store call to end (:mod:`durq.shield`), so no lock or connection of
durq's is left taken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from durq import shield
from durq.errors import Interrupted

T = TypeVar("T")

#: Seconds between two raises into a body that has not stopped yet: long enough for a
#: ``finally`` block to clean up (it is not cut short by the next raise), short enough that
#: a body that caught the exception and went on is asked again soon.
RAISE_EVERY = 1.0

REASONS = ("timeout", "cancelled", "expired", "lease_lost")


class _Timeout(Interrupted):
    def __init__(self) -> None:
        super().__init__("timeout")


class _Cancelled(Interrupted):
    def __init__(self) -> None:
        super().__init__("cancelled")


class _Expired(Interrupted):
    def __init__(self) -> None:
        super().__init__("expired")


class _LeaseLost(Interrupted):
    def __init__(self) -> None:
        super().__init__("lease_lost")


#: The exception class raised for each reason (SetAsyncExc takes a class, not an instance).
_BY_REASON: dict[str, type[Interrupted]] = {
    "timeout": _Timeout,
    "cancelled": _Cancelled,
    "expired": _Expired,
    "lease_lost": _LeaseLost,
}


def exception_for(reason: str) -> type[Interrupted]:
    """The :class:`durq.Interrupted` subclass raised for ``reason`` (its ``reason`` set).

    Raises:
        ValueError: ``reason`` is not one of :data:`REASONS`.
    """
    try:
        return _BY_REASON[reason]
    except KeyError:
        raise ValueError(f"reason must be one of {REASONS}, not {reason!r}") from None


class BodyGuard:
    """The thread running one attempt's body, while it runs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self.raised = 0  # how many times an exception was raised into the body

    def run(self, body: Callable[[], T]) -> T:
        """Call ``body`` on this thread, interruptible by :meth:`interrupt` until it returns.

        Raises:
            Interrupted: the body was interrupted (and did not catch it); anything else the
                body raises passes through.
        """
        # CPython raises a pending async exception at its next check (a call's return, a
        # function's entry, a backward jump), not only inside the body: the thread is
        # recorded inside the try, and the clean-up loop is inline in the finally (a call
        # to a helper could take the raise at its own entry and skip the clean-up), so a
        # raise that lands after the lock's release or as the body returns is caught here
        # and the guard still forgets the thread. Before, one landing between the ``with``
        # and the ``try`` left the thread recorded, and the next raise hit the worker's code.
        try:
            with self._lock:
                self._thread = threading.get_ident()
            return body()
        finally:
            while True:
                try:
                    with self._lock:
                        thread, self._thread = self._thread, None
                    if thread is not None:
                        shield.forget(thread)  # one set or held just before: never raised
                    break
                except Interrupted:  # raised here rather than in the body: the body is done
                    continue

    def interrupt(self, reason: str) -> bool:
        """Raise :class:`durq.Interrupted` (``reason``) in the body's thread at its next
        bytecode, or, while the body is inside durq's store, as the store call ends
        (:mod:`durq.shield`). Returns False when no body runs (not started yet, or already
        returned).

        Raises:
            ValueError: ``reason`` is not one of :data:`REASONS`.
        """
        if reason not in _BY_REASON:
            raise ValueError(f"reason must be one of {REASONS}, not {reason!r}")
        with self._lock:
            if self._thread is None:
                return False
            if shield.interrupt(self._thread, _BY_REASON[reason]):
                self.raised += 1
            return True
