"""ProcessPool: run ``def`` task bodies in N long-lived child processes.

The worker claims, heartbeats and records outcomes exactly as with threads; only the
body runs elsewhere. One parent thread (the pool's loop) owns every child: it sends each
child the jobs submitted (the one it runs, and the next behind a short one, so a child
never waits for a round trip between short jobs), reads the outcomes from all the pipes
with one ``poll``, and watches the tasks' timeouts, :meth:`ProcessPool.interrupt` and
the children's memory. One thread for all children keeps the per-job cost to a share of
a pickle, a write and a read each way (a child's jobs go in one write, its outcomes come
back several to a write), with no thread hand-off in the parent.

An attempt whose body must stop gets SIGTERM to its child's whole process group, SIGKILL
after ``kill_grace`` seconds; its outcome is handed on only once the child is reaped, so
the worker's slot (and the job's lease, heartbeated) stays taken until the body is really
gone. A dead child is replaced at once (the new one starts without blocking the loop).
See docs/features/pools.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from durq.errors import ConfigError
from durq.model import Outcome
from durq.observability import events
from durq.worker.pool.children import Child, describe_exit, locate
from durq.worker.pool.protocol import (
    EXIT,
    ChildDied,
    Done,
    Failed,
    Ready,
    Returned,
    Stop,
    TakeBack,
    rss_bytes,
)
from durq.worker.pool.slot import (
    HOLD,
    MB,
    MEMORY_TICK,
    TAKE_BACK_AFTER,
    WATCH_TICK,
    Slot,
    free_slot,
    stopped_outcome,
    take_back_waiting,
    wait_ms,
)

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

#: Seconds a new child gets to import the app and say it is ready.
START_TIMEOUT = 60.0
#: Failed starts in a row before the pool gives up and stops the worker.
SPAWN_TRIES = 5


class ProcessPool:
    """N child processes running the bodies of a worker's ``def`` tasks.

    Args:
        app: the worker's app (a child imports the same app from its module).
        executor: the worker's executor, for outcomes made in the parent (timeouts, a
            dead child).
        size: the number of children (the worker's concurrency).
        on_done: called with ``(attempt, outcome)`` once a body has ended and its child
            is reaped if it had to go (from the pool's thread).
        on_crash: called with the error when no replacement child can be started.
        max_jobs_per_child: jobs a child runs before it is replaced (None: no limit).
        max_memory_per_child: MB of resident memory a child may hold (None: no limit):
            measured after each job (over it: the child is replaced, the job keeps its
            outcome) and every ``MEMORY_TICK`` while a job runs (over it: the child's
            group is SIGKILLed at once, as by the OOM killer, and the job retried or failed
            with the size read then).
        kill_grace: seconds between SIGTERM and SIGKILL when a body is stopped.
        spec: ``module:attr`` the children import (default: found with :func:`locate`).
        on_short: called with True when the bodies run have become short (a mean under
            ``HOLD``: the worker may then hand the pool a next job per child, which waits
            in the child behind the one it runs) and with False when they no longer are.
        on_unstarted: called (from the pool's thread, or from :meth:`drain`) with the
            attempts that never started once :meth:`drain` was called: those not sent yet
            and those taken back from the children. The worker gives them back to the
            queue without spending an attempt. None: they are settled as at :meth:`close`.

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
        on_short: Callable[[bool], None] | None = None,
        on_unstarted: Callable[[list[Attempt]], None] | None = None,
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
        self._on_short = on_short
        self._on_unstarted = on_unstarted
        self._mean_run: float | None = None  # seconds, a moving mean of the bodies' runs
        self._short = False
        self._slots = [Slot(i) for i in range(size)]
        self._lock = threading.Lock()  # guards the fields below, shared with other threads
        self._pending: deque[Attempt] = deque()  # submitted, not yet sent to a child
        self._held: set[tuple[int, int]] = set()  # Attempt.key of each submitted, not done
        self._requests: list[tuple[tuple[int, int], str]] = []  # interrupts for the loop
        self._closing = False
        self._draining = False  # drain() was called: no job starts any more
        self._drained = False  # the loop has asked the children for their waiting jobs
        self._polling = False  # the loop sleeps (or is about to) in poll
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._by_fd: dict[int, Slot | Child] = {}  # a retired child is reaped at its EOF
        self._retired: list[tuple[Child, float]] = []  # (child, SIGKILL at)
        self._forgotten: set[int] = set()  # fds closed since the last poll
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._start_error: str | None = None
        self._url = ""
        self._offset = 0.0
        self._ticked = 0.0
        #: The sync task names the children can run (known once :meth:`start` returned).
        self.tasks: frozenset[str] = frozenset()
        #: Children replaced so far (died, killed, recycled).
        self.replaced = 0

    # -- the worker's side ----------------------------------------------------------------

    def start(self) -> None:
        """Start the N children and wait until all have imported the app.

        Raises:
            ConfigError: the app cannot be located or a child could not import it.
        """
        self._spec = self._spec or locate(self.app)
        self._url = self.app.url
        self._offset = self.app.store.now() - time.time()
        self._thread = threading.Thread(target=self._run, name="durq-pool", daemon=True)
        self._thread.start()  # it starts the children: a child dies with the thread that
        self._started.wait()  # started it (PR_SET_PDEATHSIG), so they are all the loop's
        if self._start_error is not None:
            self.close()
            raise ConfigError(self._start_error)

    def runs(self, task: str) -> bool:
        """Whether a job of ``task`` runs in a child (a ``def`` task the child knows)."""
        return task in self.tasks

    def submit(self, attempt: Attempt) -> None:
        """Hand an attempt to the next free child (the worker's slots bound how many)."""
        with self._lock:
            closing, draining = self._closing, self._draining
            if not closing and not draining:
                self._pending.append(attempt)
                self._held.add(attempt.key)
            wake, self._polling = self._polling, False
        if draining and not closing:
            self._unstarted([attempt])
            return
        if closing:
            self._unrun(attempt)
            return
        if wake:  # the loop sleeps in poll; when it does not, it sees the job on its own
            self._wake()

    def pids(self) -> list[int]:
        """The pids of the live children."""
        return [s.child.pid for s in self._slots if s.child is not None]

    def interrupt(self, job_id: int, token: int, reason: str) -> bool:
        """Stop the body of the attempt of job ``job_id`` under lease ``token`` (int; no
        other attempt of that job): SIGTERM to its child's process group, SIGKILL after
        ``kill_grace``, the child replaced. Its outcome (``timed_out`` with the limit
        for ``"timeout"``, else a failure of kind ``reason``: ``"cancelled"``,
        ``"expired"``, ``"lease_lost"``) goes to ``on_done`` only after the child is
        reaped. A job that has not started yet (here, or waiting behind another in a
        child) is taken back and never runs; its outcome is the same.

        Returns:
            True if the pool holds that attempt (it is then being stopped), else False.
        """
        with self._lock:
            if (job_id, token) not in self._held or self._closing:
                return False
            self._requests.append(((job_id, token), reason))
        self._wake()
        return True

    def drain(self) -> None:
        """Start no job any more (the worker is stopping): the attempts not sent to a child
        go to ``on_unstarted`` now, the children are asked for the jobs waiting behind the
        one they run (:class:`TakeBack`), which go there as they come back. Running bodies
        go on; :meth:`close` stops them. Idempotent."""
        with self._lock:
            if self._draining or self._closing:
                return
            self._draining = True
            left, self._pending = list(self._pending), deque()
        self._unstarted(left)
        self._wake()

    def _unstarted(self, attempts: list[Attempt]) -> None:
        """Attempts that will never start here while draining: to ``on_unstarted``."""
        with self._lock:
            self._held.difference_update(a.key for a in attempts)
        if attempts and self._on_unstarted is not None:
            self._on_unstarted(attempts)
        elif attempts:
            for attempt in attempts:
                self._unrun(attempt)

    def _back(self, attempts: list[Attempt]) -> None:
        """Attempts that never started in a child: pending again for the next free child,
        or, once draining, handed back to the worker."""
        with self._lock:
            draining = self._draining
            if not draining:
                self._pending.extendleft(reversed(attempts))
        if draining:
            self._unstarted(attempts)

    def close(self) -> None:
        """Stop every child: a running body gets SIGTERM, then SIGKILL after
        ``kill_grace``; idle children are asked to exit. Returns once all are reaped.
        Attempts not started are handed to ``on_done`` unrun (the worker drops them)."""
        with self._lock:
            self._closing = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.kill_grace + 30.0)
        with contextlib.suppress(OSError):
            os.close(self._wake_w)
            os.close(self._wake_r)

    def _wake(self) -> None:
        if threading.current_thread() is not self._thread:
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._wake_w, b"w")

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            for slot in self._slots:
                self._spawn(slot)
            while True:
                with self._lock:
                    requests, self._requests = self._requests, []
                    closing, draining = self._closing, self._draining
                if closing:
                    break
                for key, reason in requests:
                    self._interrupt(key, reason)
                if draining and not self._drained:  # what waits in the children comes back
                    self._drained = take_back_waiting(self._slots)
                stuck = False if draining else self._assign()
                self._forgotten.clear()
                with self._lock:  # a submit from now on writes to the wake-up pipe
                    # jobs that wait for a free child wait for a pipe too: no spinning
                    self._polling = (stuck or not self._pending) and not self._requests
                    wait = wait_ms(self._slots, bool(self._retired)) if self._polling else 0
                ready = self._poller.poll(wait)
                self._polling = False
                for fd, _ in ready:
                    if fd in self._forgotten:  # closed meanwhile (its number may be reused)
                        continue
                    if fd == self._wake_r:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        continue
                    owner = self._by_fd.get(fd)
                    if isinstance(owner, Slot):
                        self._read(owner)
                    elif owner is not None:
                        self._reap_retired(owner)
                now = time.monotonic()
                if now - self._ticked >= WATCH_TICK:
                    self._ticked = now
                    self._tick(now)
        except BaseException as exc:
            log.exception("durq pool: the pool's loop failed")
            if self._started.is_set():
                self._on_crash(exc)
            else:
                self._start_error = f"{type(exc).__name__}: {exc}"
        finally:
            self._started.set()
            self._shutdown()

    def _spawn(self, slot: Slot) -> None:
        slot.respawn_at = None
        try:
            child = Child(self._spec or "", self._url, self._offset, self.max_memory is not None)
        except OSError as exc:
            self._spawn_failed(slot, f"could not start a pool child: {exc}")
            return
        slot.child = child
        self._by_fd[child.fd] = slot
        self._poller.register(child.fd, select.POLLIN)

    def _forget(self, child: Child) -> int:
        """Reap ``child`` (its whole group SIGKILLed) and stop watching its pipe."""
        self._by_fd.pop(child.fd, None)
        self._forgotten.add(child.fd)
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(child.fd)
        return child.reap()

    def _spawn_failed(self, slot: Slot, message: str) -> None:
        child, slot.child = slot.child, None
        if child is not None:
            self._forget(child)
        if not self._started.is_set():
            self._start_error = message
            with self._lock:
                self._closing = True
            return
        slot.failures += 1
        if slot.failures >= SPAWN_TRIES:
            self._on_crash(ConfigError(f"{message} ({slot.failures} tries)"))
            return
        log.warning("durq pool: %s; retrying", message)
        slot.respawn_at = time.monotonic() + 0.1 * 2**slot.failures

    def _assign(self) -> bool:
        """Send pending attempts: first to children holding nothing, then behind short
        ones; each child's share goes in one write. Returns True when attempts are left
        that no child can take now (the loop then sleeps until a pipe or a tick)."""
        batches: dict[Slot, list[Attempt]] = {}
        stuck = False
        while True:
            with self._lock:
                if not self._pending:
                    break
            slot = free_slot(self._slots, time.monotonic())
            if slot is None:
                stuck = True
                break
            with self._lock:
                attempt = self._pending.popleft()
            self._sent(slot, attempt)
            batches.setdefault(slot, []).append(attempt)
        for slot, attempts in batches.items():
            self._send(slot, attempts)
        return stuck

    def _sent(self, slot: Slot, attempt: Attempt) -> None:
        """Count ``attempt`` as sent to ``slot``'s child (written by :meth:`_send`)."""
        child = slot.child
        assert child is not None
        slot.sent.append(attempt)
        child.jobs += 1
        if len(slot.sent) == 1:
            self._new_head(slot, time.monotonic())
        if self.max_jobs_per_child is not None and child.jobs >= self.max_jobs_per_child:
            slot.retiring = f"ran {child.jobs} jobs (max_jobs_per_child)"

    def _send(self, slot: Slot, attempts: list[Attempt]) -> None:
        """Write the attempts :meth:`_sent` to ``slot``'s child in one message."""
        child = slot.child
        assert child is not None
        try:
            child.send_jobs([a.job for a in attempts])
        except OSError:  # the child is gone: these jobs never reached it
            for attempt in attempts:
                slot.sent.remove(attempt)
            self._back(attempts)
            self._ended(slot)

    def _new_head(self, slot: Slot, now: float) -> None:
        """The first attempt in ``slot.sent`` has started."""
        head = slot.sent[0]
        timeout = self.app.tasks[head.job.task].timeout
        slot.head_since = now
        slot.deadline = None if timeout is None else now + timeout
        slot.reason = None
        reason = slot.doomed.pop(head.key, None)
        if reason is not None:  # interrupted while it waited: it stops as soon as it starts
            self._signal(slot, reason)

    def _read(self, slot: Slot) -> None:
        child = slot.child
        if child is None:
            return
        try:
            messages = child.receive()
        except EOFError:
            if child.ready:
                self._ended(slot)
            else:
                self._spawn_failed(slot, f"pool child {child.pid} ended while starting")
            return
        for msg in messages:
            if slot.child is not child:  # ended or recycled by an earlier message
                return
            self._message(slot, child, msg)

    def _message(
        self, slot: Slot, child: Child, msg: list[Done] | Returned | Ready | Failed
    ) -> None:
        if not child.ready:
            try:
                child.hello(msg)
            except ConfigError as exc:
                self._spawn_failed(slot, str(exc))
                return
            slot.failures = 0
            self.tasks = child.tasks
            if all(s.child is not None and s.child.ready for s in self._slots):
                self._started.set()
            return
        if isinstance(msg, list):
            for done in msg:
                self._done(slot, done)
            if slot.dying:
                self._ended(slot)
            elif slot.retiring and not slot.sent:
                self._recycle(slot)
        elif isinstance(msg, Returned):
            slot.asked_back = False
            # the head too may come back: it became the head when the job before it
            # ended, but the child had not started it yet when the TakeBack came
            back = [a for a in slot.sent if a.key in msg.keys]
            head = slot.sent[0] if slot.sent else None
            for attempt in back:
                slot.sent.remove(attempt)
            if slot.sent and slot.sent[0] is not head:
                self._new_head(slot, time.monotonic())
            elif not slot.sent:
                slot.deadline = None
            self._requeue(slot, back)

    def _done(self, slot: Slot, done: Done) -> None:
        """The head's body returned in the child. If it was being stopped, it ended on its
        own first: it keeps its outcome, and the child (signalled) goes once the outcomes
        in hand are read; what it held after is sent to other children."""
        head = slot.sent.pop(0)
        self._ran(time.monotonic() - slot.head_since)
        if head.key != (done.outcome.job_id, done.outcome.lease_token):
            raise RuntimeError(f"pool child answered for job {done.outcome.job_id}, not {head.key}")
        if slot.reason is not None:
            slot.dying, slot.reason = True, None
        if slot.sent:
            self._new_head(slot, time.monotonic())
        else:
            slot.deadline = None
        if self.max_memory is not None and done.rss > self.max_memory and not slot.retiring:
            slot.retiring = (
                f"holds {done.rss / MB:.0f} MB (max_memory_per_child {self.max_memory / MB:g} MB)"
            )
        self._finish(head, done.outcome)

    def _ran(self, seconds: float) -> None:
        """Track how long bodies run; tell the worker when they turn short or long."""
        mean = self._mean_run
        self._mean_run = seconds if mean is None else 0.9 * mean + 0.1 * seconds
        short = self._mean_run < HOLD
        if short != self._short:
            self._short = short
            if self._on_short is not None:
                self._on_short(short)

    def _finish(self, attempt: Attempt, outcome: Outcome) -> None:
        with self._lock:
            self._held.discard(attempt.key)
        self._on_done(attempt, outcome)

    def _requeue(self, slot: Slot, attempts: list[Attempt]) -> None:
        """Attempts that never started in ``slot``'s child go back for any free child
        (those interrupted meanwhile are settled, never run)."""
        keep = []
        for attempt in attempts:
            reason = slot.doomed.pop(attempt.key, None)
            if reason is None:
                keep.append(attempt)
            else:
                self._finish(attempt, self._stopped_outcome(attempt, reason, None, 0))
        self._back(keep)

    def _ended(self, slot: Slot) -> None:
        """The child died or is being killed: reap it, then settle the head (the body is
        gone now), send what waited behind it to other children, and start a new one."""
        child = slot.child
        assert child is not None
        rss, slot.rss = slot.rss, 0
        code = self._forget(child)
        slot.child = None
        sent, slot.sent = slot.sent, []
        reason, slot.reason = slot.reason, None
        dying, slot.dying = slot.dying, False
        slot.deadline, slot.asked_back, slot.retiring = None, False, ""
        self.replaced += 1
        if sent and not dying:
            self._ran(time.monotonic() - slot.head_since)
        if not self._closing:
            self._spawn(slot)
        if dying and reason is None:  # stopped for a body that had ended: the jobs after
            self._requeue(slot, sent)  # it go to other children (at least once)
            return
        if not sent:
            return
        head = sent[0]
        self._requeue(slot, sent[1:])
        events.emit(
            POOL_CHILD_REPLACED,
            logging.WARNING if reason in (None, "memory") else logging.INFO,
            id=head.job.id,
            task=head.job.task,
            pid=child.pid,
            exit=describe_exit(code),
            reason=reason or "died",
        )
        self._finish(head, self._stopped_outcome(head, reason, code, rss))

    def _signal(self, slot: Slot, reason: str) -> None:
        """Start stopping the head's body: SIGTERM now, SIGKILL from :meth:`_tick`."""
        if slot.reason is None and slot.child is not None:
            slot.reason = reason
            slot.signalled_at = time.monotonic()
            with contextlib.suppress(OSError):  # the reason first: the body is told why
                slot.child.send(Stop(reason))
            slot.child.signal_group(signal.SIGTERM)

    def _interrupt(self, key: tuple[int, int], reason: str) -> None:
        with self._lock:
            for attempt in self._pending:
                if attempt.key == key:
                    self._pending.remove(attempt)
                    break
            else:
                attempt = None
        if attempt is not None:
            self._finish(attempt, self._stopped_outcome(attempt, reason, None, 0))
            return
        for slot in self._slots:
            for i, attempt in enumerate(slot.sent):
                if attempt.key != key:
                    continue
                if i == 0:
                    self._signal(slot, reason)
                elif slot.child is not None:
                    slot.doomed[key] = reason
                    with contextlib.suppress(OSError):
                        slot.child.send(TakeBack((key,)))
                return

    def _tick(self, now: float) -> None:
        """Timeouts, kills due, memory, take-backs, recycling, starts due or overdue."""
        for slot in self._slots:
            child = slot.child
            if child is None:
                if slot.respawn_at is not None and now >= slot.respawn_at:
                    self._spawn(slot)
                continue
            if not child.ready:
                if now - child.started > START_TIMEOUT:
                    self._spawn_failed(slot, f"pool child {child.pid} did not start in time")
                continue
            if not slot.sent:
                if slot.retiring:
                    self._recycle(slot)
                continue
            if slot.reason is None:
                if slot.deadline is not None and now >= slot.deadline:
                    self._signal(slot, "timeout")
                elif (
                    self.max_memory is not None
                    and not slot.retiring
                    and now - slot.memory_at >= MEMORY_TICK
                ):
                    slot.memory_at = now
                    rss = rss_bytes(child.pid)
                    if rss > self.max_memory:  # as the OOM killer would, before it does:
                        slot.reason, slot.rss = "memory", rss  # the size it was found at
                        self._ended(slot)  # SIGKILL to the group at once, reaped, replaced
                        continue
            elif now >= slot.signalled_at + self.kill_grace:
                self._ended(slot)  # SIGTERM did not end it: reaping SIGKILLs the group
                continue
            if (
                len(slot.sent) > 1
                and not slot.asked_back
                and now - slot.head_since >= TAKE_BACK_AFTER
            ):
                slot.asked_back = True  # a long body: what waits behind it goes elsewhere
                with contextlib.suppress(OSError):
                    child.send(TakeBack(tuple(a.key for a in slot.sent[1:])))
        for child, kill_at in list(self._retired):
            if now >= kill_at:
                self._reap_retired(child)

    def _recycle(self, slot: Slot) -> None:
        """Swap a child that reached a limit (and holds no job) for a new one; the old one
        is asked to exit and reaped at its EOF (SIGKILLed after ``kill_grace``)."""
        child = slot.child
        assert child is not None
        why, slot.retiring = slot.retiring, ""
        slot.child = None
        with contextlib.suppress(OSError):
            child.send(EXIT)
        self._by_fd[child.fd] = child
        self._retired.append((child, time.monotonic() + self.kill_grace))
        self.replaced += 1
        events.emit(POOL_CHILD_RECYCLED, pid=child.pid, jobs=child.jobs, reason=why)
        self._spawn(slot)

    def _reap_retired(self, child: Child) -> None:
        self._retired = [(c, t) for c, t in self._retired if c is not child]
        self._forget(child)

    def _shutdown(self) -> None:
        """Stop every child (SIGTERM to the busy ones' groups, EXIT to the idle ones),
        SIGKILL what is left after ``kill_grace``, reap all, then settle what they held."""
        with self._lock:
            self._closing = True
        live = [s for s in self._slots if s.child is not None]
        for slot in live:
            assert slot.child is not None
            if slot.sent:
                slot.reason = slot.reason or "shutdown"
                slot.child.signal_group(signal.SIGTERM)
            else:
                with contextlib.suppress(OSError):
                    slot.child.send(EXIT)
        deadline = time.monotonic() + self.kill_grace
        for slot in live:
            assert slot.child is not None
            slot.child.exited(max(0.0, deadline - time.monotonic()))
            self._ended(slot)
        for child, _ in list(self._retired):
            self._reap_retired(child)
        with self._lock:
            left, self._pending = list(self._pending), deque()
        for attempt in left:
            self._unrun(attempt)

    # -- outcomes -------------------------------------------------------------------------

    def _stopped_outcome(
        self, attempt: Attempt, reason: str | None, code: int | None, rss: int
    ) -> Outcome:
        return stopped_outcome(self.executor, self.app, attempt, reason, code, rss, self.max_memory)

    def _unrun(self, attempt: Attempt) -> None:
        """An attempt the pool will not run (it is closing): a transient failure, never
        run; the worker drops it (abandoned at shutdown, it is given back)."""
        with self._lock:
            self._held.discard(attempt.key)
        job = attempt.job
        died = ChildDied("the worker's process pool closed before the job started")
        self._on_done(attempt, self.executor.errored(job, self.app.tasks[job.task], died))
