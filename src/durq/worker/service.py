"""Service: a background loop of the worker, on its own thread, supervised.

Any exception that escapes a service's ``run`` stops the whole worker with the
service's name and the traceback logged, and a non-zero exit (never a silent hang).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from durq.errors import StoreBusy, StoreError, StoreFull, StoreUnavailable
from durq.observability import events


class Supervisor(Protocol):
    def crashed(self, service: str, exc: BaseException) -> None: ...


class Service:
    """Base of the worker's loops. Subclasses implement :meth:`run` and poll :attr:`stopping`."""

    name = "service"

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if asked to stop meanwhile."""
        return self._stop.wait(seconds)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"durq-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Ask the loop to stop and wait for it (up to ``timeout`` seconds)."""
        self._stop.set()
        self.wake()
        t = self._thread
        # a thread not started yet (a stop while the worker starts) finds the stop set at
        # its first sleep; joining it would raise
        if t is not None and t is not threading.current_thread() and t.ident is not None:
            t.join(timeout)

    def wake(self) -> None:
        """Interrupt a wait early (subclasses with their own wake-ups override)."""

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the supervisor
            self.supervisor.crashed(self.name, exc)

    def run(self) -> None:
        raise NotImplementedError


def passing(exc: BaseException) -> bool:
    """Store errors a loop waits out instead of stopping the worker."""
    if isinstance(exc, StoreBusy | StoreUnavailable | StoreFull):
        return True
    return isinstance(exc, StoreError) and (
        "disk is full" in str(exc) or "disk i/o" in str(exc).lower()
    )


def wait_reason(exc: BaseException) -> str:
    """What a :func:`passing` error says of the store, for ``store_busy``'s ``reason``:
    ``full`` (the disk or the database file is full), ``unavailable`` (the server or its
    session went away), ``io`` (a disk I/O error) or ``busy`` (the write lock is taken)."""
    text = str(exc).lower()
    if isinstance(exc, StoreFull) or "disk is full" in text or "disk full" in text:
        return "full"
    if isinstance(exc, StoreUnavailable):
        return "unavailable"
    if "disk i/o" in text:
        return "io"
    return "busy"


def store_waiting(loop: str, exc: BaseException) -> None:
    """Log ``store_busy`` (WARNING) for a :func:`passing` error that ``loop`` waits out:
    the loop's name, the error's text and its :func:`wait_reason`."""
    events.emit(
        events.STORE_BUSY, logging.WARNING, loop=loop, reason=wait_reason(exc), error=str(exc)
    )


def waiting_out(
    step: Callable[[], object], what: str, stop: threading.Event, limit: float = 60.0
) -> None:
    """Run ``step`` (a start-up call on a store already reached once) and, while it fails
    with an error a loop would wait out (:func:`passing`: a session the server cut, a busy
    or full database), log ``store_busy`` and run it again, 0.1 s doubling to 2 s apart.

    Raises:
        The last error once ``limit`` seconds have passed or ``stop`` was set meanwhile;
        at once any error that is not :func:`passing`.
    """
    deadline = time.monotonic() + limit
    pause = 0.1
    while True:
        try:
            step()
            return
        except Exception as exc:
            if not passing(exc) or time.monotonic() >= deadline:
                raise
            store_waiting(what, exc)
            if stop.wait(pause):
                raise
            pause = min(pause * 2, 2.0)
