"""The fair SQLite writer: one queue for the write lock per database file and process, and
precedence for heartbeats and outcomes across processes.

SQLite has one write lock per database and no queue for it: a writer that finds it taken
sleeps in its busy handler (1, 2, 5 … 100 ms) and tries again, so a producer that commits
back to back wins nearly every race, and a heartbeat could wait longer than a short lease
(the job then ran twice; once a known limit in docs/guarantees.md, proved fixed by
tests/integration/test_fair_writer.py).

Two parts, both taken before ``BEGIN IMMEDIATE``:

- **In the process**, writers of one database wait in one queue (:class:`Turns`): first
  come, first served, except that *urgent* writers (the heartbeat's lease extensions, the
  claimer's outcomes, give-backs) go before every ordinary one. Only one connection per
  process then contends for SQLite's lock at a time.
- **Across processes**, a ticket file beside the database (``<file>-durq-gate``) is locked
  with ``flock``: an urgent writer holds it exclusively from before its ``BEGIN`` until its
  ``COMMIT``; an ordinary writer passes through it (a shared lock taken and
  dropped at once) before its own ``BEGIN``. While an urgent writer waits, ordinary ones
  of every process stop at the gate, so the urgent one gets SQLite's lock as soon as the
  transaction in progress ends. An ordinary writer waits at most :data:`MAX_GATE_WAIT` for
  the gate (a stopped or frozen process holding it cannot stop the others), and a process
  that dies drops its ``flock`` with it.

Where the ticket file cannot be created (a read-only directory), only the in-process queue
applies.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator

#: Seconds an ordinary writer waits at the cross-process gate before going on regardless.
MAX_GATE_WAIT = 0.25
#: Seconds an urgent writer tries to close the gate before going on without it.
MAX_CLOSE_WAIT = 1.0
_POLL = 0.0005


class Turns:
    """A lock with a queue: urgent waiters first, then the others, each in arrival order.
    The lock is handed directly to the next waiter on release."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = False
        self._urgent: collections.deque[threading.Event] = collections.deque()
        self._normal: collections.deque[threading.Event] = collections.deque()

    def acquire(self, urgent: bool, timeout: float, front: bool = False) -> bool:
        """Wait for the turn up to ``timeout`` seconds; False when it did not come.
        ``front``: at the head of its line (a writer that stepped aside, see
        :meth:`step_aside`)."""
        with self._lock:
            if not self._held:
                self._held = True
                return True
            mine = threading.Event()
            line = self._urgent if urgent else self._normal
            if front:
                line.appendleft(mine)
            else:
                line.append(mine)
        if mine.wait(timeout):
            return True
        with self._lock:
            if mine.is_set():  # handed over just as the wait ended
                return True
            line.remove(mine)
            return False

    def urgent_waiting(self) -> bool:
        return bool(self._urgent)

    def step_aside(self, timeout: float) -> bool:
        """An ordinary holder still waiting for SQLite's lock lets the urgent waiters go
        first, then takes its turn back at the head of the ordinary line."""
        self.release()
        return self.acquire(False, timeout, front=True)

    def release(self) -> None:
        with self._lock:
            line = self._urgent or self._normal
            if line:
                line.popleft().set()  # still held: it passes straight to the next
            else:
                self._held = False


class WriteGate:
    """The gate of one database file in this process (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.turns = Turns()
        self.path = f"{path}-durq-gate"
        self._fd: int | None = None
        self._opened = False

    def _file(self) -> int | None:
        """The ticket file, opened (created) at the first write; None where it cannot be."""
        if not self._opened:
            self._opened = True
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                self._fd = None  # read-only directory: the in-process queue only
        return self._fd

    @contextlib.contextmanager
    def turn(self, urgent: bool, timeout: float) -> Iterator[bool]:
        """Hold this process's turn while the body takes SQLite's lock and writes.

        Yields False when the turn did not come within ``timeout`` seconds (the caller
        raises ``StoreBusy``). An urgent writer keeps the ticket file locked for the whole
        body, so ordinary writers of other processes wait at the gate meanwhile.
        """
        closed = self.enter(urgent, timeout)
        if closed is None:
            yield False
            return
        try:
            yield True
        finally:
            self.leave(closed)

    def enter(self, urgent: bool, timeout: float) -> bool | None:
        """:meth:`turn` without a generator (the enqueue hot path): wait for the turn up to
        ``timeout`` seconds, then close (urgent) or pass the gate. None when the turn did
        not come; else whether the gate was closed, for :meth:`leave`."""
        if not self.turns.acquire(urgent, timeout):
            return None
        try:
            if self._file() is None:
                return False  # no ticket file here: the in-process queue only
            if urgent:
                return self._close_gate()
            self._pass_gate()
            return False
        except BaseException:
            self.turns.release()
            raise

    def leave(self, closed: bool) -> None:
        """End a turn taken with :meth:`enter` (``closed``: what it returned)."""
        try:
            if closed and self._fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.turns.release()

    def close(self) -> None:
        """Close the ticket file (a store on this file was closed), once no writer of this
        process is at the gate; a later write opens it again. An open file for writing
        would keep its filesystem from being remounted read-only or unmounted."""
        got = self.turns.acquire(True, 5.0)
        try:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd = None
            self._opened = False
        finally:
            if got:
                self.turns.release()

    def _close_gate(self) -> bool:
        assert self._fd is not None
        return _flock_within(self._fd, fcntl.LOCK_EX, MAX_CLOSE_WAIT)

    def _pass_gate(self) -> bool:
        assert self._fd is not None
        try:  # the open gate (nearly always): one try, no clock read
            fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            passed = True
        except BlockingIOError:
            passed = _flock_within(self._fd, fcntl.LOCK_SH, MAX_GATE_WAIT)
        except OSError:
            passed = False
        if passed:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            return True
        return False


def _flock_within(fd: int, mode: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        except OSError:
            return False


_gates: dict[str, WriteGate] = {}
_gates_lock = threading.Lock()


def gate_for(path: str) -> WriteGate:
    """The one gate of ``path`` (by its real path) in this process."""
    key = os.path.realpath(path)
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = WriteGate(path)
        return gate
