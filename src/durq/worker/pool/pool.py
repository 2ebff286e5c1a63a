"""ProcessPool: run ``def`` task bodies in N long-lived child processes.

The worker claims, heartbeats and records outcomes exactly as with threads; only the
body runs elsewhere. Each of the pool's N slots is one parent thread owning one child:
it takes an attempt from the pool's queue, sends the job down the child's pipe and waits
for the :class:`~durq.worker.pool.protocol.Done` (one write and one read per job each
way), watching meanwhile the task's timeout, an :meth:`ProcessPool.interrupt` and the
child's memory. An attempt whose body must stop gets SIGTERM to its child's whole
process group, SIGKILL after ``kill_grace`` seconds; its outcome is handed on only once
the child is reaped, so the worker's slot (and the job's lease, heartbeated) stays
taken until the body is really gone. A dead child is replaced before its slot takes
another job. See docs/features/pools.md.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from durq.errors import ConfigError
from durq.model import Outcome
from durq.observability import events
from durq.worker.pool.children import Child, describe_exit, locate
from durq.worker.pool.protocol import ChildDied, rss_bytes

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.executor import Executor
    from durq.worker.state import Attempt

log = logging.getLogger("durq.worker")

#: Event: a child ended while it ran a job (or was stopped by a timeout, a cancel, the
#: memory limit) and was replaced.
POOL_CHILD_REPLACED = "pool_child_replaced"
#: Event: a child reached ``max_jobs_per_child`` or ``max_memory_per_child`` after a job
#: and was swapped for a new one.
POOL_CHILD_RECYCLED = "pool_child_recycled"

#: Seconds between the checks a slot makes while its child runs a job (timeout, interrupt,
#: memory); a finished job is seen at once, not at the next check.
WATCH_TICK = 0.05
#: Tries to start a replacement child before the pool stops the worker.
SPAWN_TRIES = 5

MB = 1024 * 1024


class _Slot:
    """One parent thread and the child it owns; ``current`` is the attempt it runs."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.child: Child | None = None
        self.current: Attempt | None = None
        self.reason: str | None = None  # why the body is being stopped, once it is
        self.signalled_at = 0.0
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


class ProcessPool:
    """N child processes running the bodies of a worker's ``def`` tasks.

    Args:
        app: the worker's app (a child imports the same app from its module).
        executor: the worker's executor, for outcomes made in the parent (timeouts, a
            dead child).
        size: the number of children (the worker's concurrency).
        on_done: called with ``(attempt, outcome)`` once a body has ended and its child
            is reaped if it had to go (from the slot's thread).
        on_crash: called with the error when no replacement child can be started.
        max_jobs_per_child: jobs a child runs before it is replaced (None: no limit).
        max_memory_per_child: MB of resident memory a child may hold (None: no limit):
            measured after each job (over it: the child is replaced, the job keeps its
            outcome) and every ``WATCH_TICK`` while a job runs (over it: the child is
            killed and the job retried or failed, as when the OOM killer strikes).
        kill_grace: seconds between SIGTERM and SIGKILL when a body is stopped.
        spec: ``module:attr`` the children import (default: found with :func:`locate`).

    Raises:
        ConfigError: a limit below 1, or ``kill_grace`` below 0.
    """

    def __init__(
        self,
        app: Registry,
        executor: Executor,
        size: int,
        on_done: Callable[[Attempt, Outcome], None],
        on_crash: Callable[[BaseException], None],
        *,
        max_jobs_per_child: int | None = None,
        max_memory_per_child: float | None = None,
        kill_grace: float = 1.0,
        spec: str | None = None,
    ) -> None:
        if max_jobs_per_child is not None and max_jobs_per_child < 1:
            raise ConfigError(f"max_jobs_per_child must be >= 1, not {max_jobs_per_child}")
        if max_memory_per_child is not None and not max_memory_per_child > 0:
            raise ConfigError(f"max_memory_per_child must be > 0 MB, not {max_memory_per_child}")
        if not kill_grace >= 0:
            raise ConfigError(f"kill_grace must be >= 0 seconds, not {kill_grace}")
        self.app = app
        self.executor = executor
        self.size = size
        self.max_jobs_per_child = max_jobs_per_child
        self.max_memory = None if max_memory_per_child is None else max_memory_per_child * MB
        self.kill_grace = kill_grace
        self._spec = spec
        self._on_done = on_done
        self._on_crash = on_crash
        self._queue: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self._slots = [_Slot(i) for i in range(size)]
        self._lock = threading.Lock()
        self._closing = False
        self._url = ""
        self._offset = 0.0
        #: The sync task names the children can run (known once :meth:`start` returned).
        self.tasks: frozenset[str] = frozenset()
        #: Children replaced so far (died, killed, recycled).
        self.replaced = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the N children (each from its slot's own thread, which it then serves)
        and wait until all have imported the app.

        Raises:
            ConfigError: the app cannot be located or a child could not import it.
        """
        spec = self._spec or locate(self.app)
        self._spec = spec
        self._url = self.app.url
        self._offset = self.app.store.now() - time.time()
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=self._serve, args=(slot,), name=f"durq-pool-{slot.index}", daemon=True
            )
            slot.thread.start()
        for slot in self._slots:
            slot.ready.wait()
        errors = [s.error for s in self._slots if s.error is not None]
        if errors:
            self.close()
            raise ConfigError(str(errors[0]))
        first = self._slots[0].child
        self.tasks = first.tasks if first is not None else frozenset()

    def runs(self, task: str) -> bool:
        """Whether a job of ``task`` runs in a child (a ``def`` task the child knows)."""
        return task in self.tasks

    def submit(self, attempt: Attempt) -> None:
        """Queue an attempt for the next free child (the worker's slots bound how many)."""
        self._queue.put(attempt)

    def pids(self) -> list[int]:
        """The pids of the live children."""
        return [s.child.pid for s in self._slots if s.child is not None]

    def interrupt(self, job_id: int, reason: str) -> bool:
        """Stop the body of job ``job_id``: SIGTERM to its child's process group, SIGKILL
        after ``kill_grace``, the child replaced. Its outcome (``timed_out`` with the limit
        for ``"timeout"``, else a failure of kind ``reason``: ``"cancelled"``,
        ``"expired"``) goes to ``on_done`` only after the child is reaped.

        Returns:
            True if a child was running that job (and is now being stopped).
        """
        for slot in self._slots:
            current = slot.current
            if current is not None and current.job.id == job_id:
                return self._signal(slot, current, reason)
        return False

    def close(self) -> None:
        """Stop every child: a running body gets SIGTERM, then SIGKILL after
        ``kill_grace``; idle children are asked to exit. Returns once all are reaped.
        Attempts still queued are handed to ``on_done`` unrun (the worker drops them)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        for slot in self._slots:
            current = slot.current
            if current is not None:
                self._signal(slot, current, "shutdown")
        for _ in self._slots:
            self._queue.put(None)
        for slot in self._slots:
            if slot.thread is not None and slot.thread is not threading.current_thread():
                slot.thread.join(self.kill_grace + 10.0)
        while True:
            try:
                attempt = self._queue.get_nowait()
            except queue.Empty:
                break
            if attempt is not None:
                self._unrun(attempt)

    # -- one slot -------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> bool:
        """Give ``slot`` a new child; False (after telling ``on_crash``) if none starts."""
        pause = 0.1
        for tries in range(1, SPAWN_TRIES + 1):
            try:
                slot.child = Child(self._spec or "", self._url, self._offset)
                return True
            except Exception as exc:  # noqa: BLE001 - retried, then the worker stops
                if not slot.ready.is_set() or tries == SPAWN_TRIES or self._closing:
                    slot.error = exc
                    if slot.ready.is_set() and not self._closing:
                        self._on_crash(exc)
                    return False
                log.warning("durq pool: could not start a child (%s); retrying", exc)
                time.sleep(pause)
                pause *= 2
        return False

    def _serve(self, slot: _Slot) -> None:
        ok = self._spawn(slot)
        slot.ready.set()
        if not ok:
            return
        while True:
            attempt = self._queue.get()
            if attempt is None or self._closing:
                if attempt is not None:
                    self._unrun(attempt)
                break
            if slot.child is None and not self._spawn(slot):
                self._unrun(attempt)
                break
            try:
                self._run(slot, attempt)
            except BaseException as exc:
                log.exception("durq pool: error outside the task")
                self._on_crash(exc)
                break
            if slot.child is None and not self._closing:
                self._spawn(slot)  # back to N children before the next job
        if slot.child is not None:
            slot.child.stop(self.kill_grace)
            slot.child = None

    def _signal(self, slot: _Slot, attempt: Attempt, reason: str) -> bool:
        with self._lock:
            child = slot.child
            if slot.current is not attempt or child is None:
                return False
            if slot.reason is None:
                slot.reason = reason
                slot.signalled_at = time.monotonic()
        child.signal_group(signal.SIGTERM)  # SIGKILL follows from the slot's watch
        return True

    def _run(self, slot: _Slot, attempt: Attempt) -> None:
        child = slot.child
        assert child is not None
        job = attempt.job
        task = self.app.tasks[job.task]
        with self._lock:
            slot.current, slot.reason = attempt, None
        deadline = None if task.timeout is None else time.monotonic() + task.timeout
        done = None
        died = False
        try:
            child.send(job)
        except OSError:
            died = True
        while not died:
            try:
                done = child.wait_done(WATCH_TICK)
            except EOFError:
                died = True
                break
            if done is not None:
                break
            now = time.monotonic()
            if slot.reason is None:
                if deadline is not None and now >= deadline:
                    self._signal(slot, attempt, "timeout")
                elif self.max_memory is not None and rss_bytes(child.pid) > self.max_memory:
                    self._signal(slot, attempt, "memory")
            if slot.reason is not None and now >= slot.signalled_at + self.kill_grace:
                break  # SIGTERM did not end it: reap() SIGKILLs the group
        reason = slot.reason
        if done is not None and reason is None:
            outcome = done.outcome
            self._maybe_recycle(slot, child, done.rss)
        else:
            rss = rss_bytes(child.pid)
            code = child.reap()  # the body is gone before its outcome is handed on
            slot.child = None
            self.replaced += 1
            outcome = self._stopped_outcome(attempt, reason, code, rss)
            events.emit(
                POOL_CHILD_REPLACED,
                logging.WARNING if reason in (None, "memory") else logging.INFO,
                id=job.id,
                task=job.task,
                pid=child.pid,
                exit=describe_exit(code),
                reason=reason or "died",
            )
        with self._lock:
            slot.current, slot.reason = None, None
        self._on_done(attempt, outcome)

    def _stopped_outcome(
        self, attempt: Attempt, reason: str | None, code: int, rss: int
    ) -> Outcome:
        job = attempt.job
        task = self.app.tasks[job.task]
        if reason == "timeout":
            return self.executor.timed_out(job, task.timeout or 0.0)
        if reason in ("cancelled", "expired", "shutdown"):
            message = f"the body was stopped ({reason}); its child ended by {describe_exit(code)}"
            return self.executor.failed(job, "Interrupted", message, reason)
        if reason == "memory":
            limit = (self.max_memory or 0) / MB
            message = (
                f"worker child died: killed at {rss / MB:.0f} MB, over max_memory_per_child "
                f"{limit:g} MB"
            )
        else:
            message = f"worker child died: {describe_exit(code)}"
        return self.executor.errored(job, task, ChildDied(message))

    def _maybe_recycle(self, slot: _Slot, child: Child, rss: int) -> None:
        why = None
        if self.max_jobs_per_child is not None and child.jobs >= self.max_jobs_per_child:
            why = f"ran {child.jobs} jobs (max_jobs_per_child)"
        elif self.max_memory is not None and rss > self.max_memory:
            why = f"holds {rss / MB:.0f} MB (max_memory_per_child {self.max_memory / MB:g} MB)"
        if why is None:
            return
        with self._lock:
            slot.child = None
        child.stop(self.kill_grace)
        self.replaced += 1
        events.emit(POOL_CHILD_RECYCLED, pid=child.pid, jobs=child.jobs, reason=why)

    def _unrun(self, attempt: Attempt) -> None:
        """An attempt the pool will not run (it is closing or cannot start a child): a
        transient failure, never run; at shutdown the worker drops it (it was abandoned
        and is given back)."""
        job = attempt.job
        died = ChildDied("the worker's process pool closed before the job started")
        self._on_done(attempt, self.executor.errored(job, self.app.tasks[job.task], died))
