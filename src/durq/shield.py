"""Holding interruptions off while a thread is inside durq's own code.

A ``def`` body past its timeout (or cancelled) gets :class:`durq.Interrupted` raised in its
thread at its next bytecode (``PyThreadState_SetAsyncExc``, :mod:`durq.worker.interrupt`).
Where that bytecode is durq's own code — a store call the body made (``ctx.progress``,
``ctx.step``, an enqueue) — the exception could land between taking a resource and the
``try`` that gives it back: the SQLite writer's turn, a pooled PostgreSQL connection. The
turn was then never handed on, and every writer of the process waited for it for good.

So the store's few entry points (``GatedTransaction``, ``gated_statement``, a
connection's set-up on SQLite; the pooled connection and its transaction on PostgreSQL)
run :func:`shielded`. The worker raises into a thread only through :func:`interrupt`,
which does not raise while the thread is shielded; it remembers the request instead, and
the thread raises it on itself as it leaves its outermost shield (where nothing is held).

Cost per shield: one lock taken twice and two dict writes; no C call unless an exception
was raised into the thread since its last shield.
"""

from __future__ import annotations

import ctypes
import threading
from types import TracebackType

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc

_lock = threading.Lock()
#: thread id -> how many shields it is inside (absent: none).
_depth: dict[int, int] = {}
#: thread id -> the exception set in it that may not have been raised yet.
_set: dict[int, type[BaseException]] = {}
#: thread id -> an exception asked for while it was shielded: raised at the shield's exit.
_deferred: dict[int, type[BaseException]] = {}
_ident = threading.get_ident


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> int:
    """Set (or with None clear) the exception pending in a thread; the threads changed."""
    return int(_set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None))


def enter() -> None:
    """Enter a shield on this thread (nestable): from now until the matching :func:`leave`
    no exception from :func:`interrupt` is raised in it. An exception set in it just
    before, and not raised yet, is cleared: the worker asks again (the timeouts service,
    every :data:`durq.worker.interrupt.RAISE_EVERY` seconds). It cannot be told from one
    already raised, which must not be raised twice."""
    tid = _ident()
    with _lock:
        if tid in _set:
            # Cleared first, then the depth raised: an exception raised here, before the
            # clear took effect, leaves the depth as it was (the caller holds nothing yet).
            del _set[tid]
            _raise_in(tid, None)
        _depth[tid] = _depth.get(tid, 0) + 1


def leave() -> None:
    """Leave a shield entered with :func:`enter`. Leaving the outermost one raises (at this
    thread's next bytecode) the exception asked for while it was shielded, if any."""
    tid = _ident()
    with _lock:
        depth = _depth[tid] - 1
        if depth:
            _depth[tid] = depth
            return
        del _depth[tid]
        if _deferred:
            exc = _deferred.pop(tid, None)
            if exc is not None:
                _set[tid] = exc
                _raise_in(tid, exc)


class shielded:
    """``with shielded():`` — :func:`enter` on entry, :func:`leave` on exit. A plain class
    (no generator frame): it is on every store call's path."""

    __slots__ = ()

    def __enter__(self) -> None:
        enter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        leave()


def is_shielded(thread_id: int) -> bool:
    """Whether the thread ``thread_id`` is inside a shield now."""
    with _lock:
        return thread_id in _depth


def interrupt(thread_id: int, exc: type[BaseException]) -> bool:
    """Raise ``exc`` in the thread ``thread_id`` at its next bytecode, or, while it is
    shielded, as it leaves its outermost shield. Returns True when raised now, False when
    held for the shield's exit (a later request replaces a held one)."""
    with _lock:
        if thread_id in _depth:
            _deferred[thread_id] = exc
            return False
        _set[thread_id] = exc
        _raise_in(thread_id, exc)
        return True


def hold(exc: type[BaseException]) -> bool:
    """From a signal handler (it runs on the thread it interrupted): while this thread is
    shielded, hold ``exc`` to be raised as it leaves its outermost shield and return True;
    False when it is not shielded (the handler raises itself). Takes no lock: the handler
    may have interrupted this thread inside :func:`enter` or :func:`leave`, which look at
    the held request only after the depth changed (a dict read or write is atomic under
    the GIL)."""
    tid = _ident()
    if tid in _depth:
        _deferred[tid] = exc
        return True
    return False


def forget(thread_id: int) -> None:
    """Drop what :func:`interrupt` asked of ``thread_id`` and clear an exception set in it
    but not raised yet: the code it was meant for is gone (the body returned)."""
    with _lock:
        _deferred.pop(thread_id, None)
        if _set.pop(thread_id, None) is not None:
            _raise_in(thread_id, None)
