"""durq.worker.interrupt: an exception raised in a body's thread lands in the body, and
never in the code around it (real threads, real ``PyThreadState_SetAsyncExc``)."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

import durq
from durq.worker.interrupt import BodyGuard, exception_for


def test_a_running_body_is_interrupted_with_its_reason() -> None:
    guard = BodyGuard()
    got: list[object] = []
    started = threading.Event()

    def body() -> None:
        started.set()
        while True:
            time.sleep(0.01)

    def run() -> None:
        try:
            guard.run(body)
        except durq.Interrupted as exc:
            got.append(exc.reason)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    assert guard.interrupt("cancelled")
    thread.join(10)
    assert got == ["cancelled"]
    assert not guard.interrupt("timeout")  # nothing runs in it any more
    with pytest.raises(ValueError, match="reason must be one of"):
        guard.interrupt("because")


def test_an_interrupt_never_lands_outside_the_body() -> None:
    """Bodies that end while another thread keeps interrupting them: every raise that is
    set lands inside ``run`` (or is cleared on the way out), none in the code after it."""
    escaped: list[BaseException] = []
    stop = threading.Event()
    current: list[BodyGuard] = []

    def short_body() -> int:
        total = 0
        for i in range(200):  # a few microseconds of bytecode
            total += i
        return total

    def runner() -> None:
        try:
            for _ in range(3000):
                guard = BodyGuard()
                current[:] = [guard]
                with contextlib.suppress(durq.Interrupted):
                    guard.run(short_body)
                # the worker's own code after the body: an interruption must not land here
                for _ in range(500):
                    pass
        except durq.Interrupted as exc:  # it did: the guard failed
            escaped.append(exc)
        finally:
            stop.set()

    def interrupter() -> None:
        while not stop.is_set():
            if current:
                current[0].interrupt("timeout")

    threads = [threading.Thread(target=runner), threading.Thread(target=interrupter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert escaped == []


class _InterruptedAtFirstRelease:
    """A lock whose first release is followed at once by an interruption of the releasing
    thread: where a ``PyThreadState_SetAsyncExc`` set meanwhile lands when the real lock's
    C ``__exit__`` returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.raised = False

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        if not self.raised:
            self.raised = True
            raise exception_for("timeout")()


def test_a_raise_landing_as_the_guard_starts_leaves_no_thread_recorded() -> None:
    """The window a CI run hit once: an interrupt raised just as ``run`` releases its lock
    after recording the thread. The guard must still forget the thread (before, it stayed
    recorded, and the next raise reached the worker's code after the body)."""
    guard = BodyGuard()
    lock = _InterruptedAtFirstRelease()
    guard._lock = lock  # type: ignore[assignment]
    with pytest.raises(durq.Interrupted):
        guard.run(lambda: 1)
    assert lock.raised
    assert guard.interrupt("timeout") is False  # the guard knows the body is gone
