"""Where attempts run: a pool of daemon threads for ``def`` tasks, one event loop for
``async def`` tasks.

Threads are daemons so that a shutdown past its grace period is not held up by a task
that will not return (its job has been given back and fenced by then).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("durq.worker")


class ThreadRunner:
    """A fixed pool of daemon threads running submitted callables in FIFO order."""

    def __init__(self, size: int) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._loop, name=f"durq-task-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        self._queue.put(fn)

    def _loop(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is None:
                return
            try:
                fn()
            except BaseException:  # a pool thread must outlive any one job
                log.exception("durq task thread: unexpected error outside the task")

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


class AsyncRunner:
    """One asyncio event loop on a daemon thread, started on first use.

    The loop stamps :attr:`beat` every :data:`TICK` seconds; :meth:`blocked_for` says how
    long it has gone without (a body blocking the loop: ``time.sleep`` in ``async def``).
    """

    #: Seconds between the loop's liveness stamps.
    TICK = 0.05

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self.beat = time.monotonic()

    def _tick(self) -> None:
        self.beat = time.monotonic()
        assert self._loop is not None
        self._loop.call_later(self.TICK, self._tick)

    def blocked_for(self, now: float) -> float:
        """Seconds the loop has not run its callbacks (``now``: monotonic); 0.0 when it
        runs, or was never started."""
        if self._loop is None or not self._loop.is_running():
            return 0.0
        return max(0.0, now - self.beat - self.TICK)

    def cancel(self, task: asyncio.Task[Any]) -> None:
        """Cancel ``task`` on the loop (thread-safe; it takes effect when the loop runs)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(task.cancel)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self.beat = time.monotonic()
        loop.call_soon(self._tick)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    def submit(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if self._loop is None:
            threading.Thread(target=self._run, name="durq-async", daemon=True).start()
            self._ready.wait()
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(make(), self._loop)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
