"""Worker: claims jobs, runs them, records outcomes; shuts down without losing any."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from durq.checks import check_worker_sizes, check_worker_timing
from durq.classify import describe
from durq.context import JobContext
from durq.errors import ConfigError, Interrupted
from durq.model import AttemptError, Claimed, Outcome, WorkerInfo, WorkerReport
from durq.observability import events, tracing
from durq.store import describe_url
from durq.worker.executor import Executor
from durq.worker.liveness import BEAT_INTERVAL, RESCUE_AFTER, Liveness
from durq.worker.pool import ProcessPool
from durq.worker.pool.protocol import DEPTH as POOL_DEPTH
from durq.worker.pool.protocol import PREFETCH_PER_CHILD
from durq.worker.prefetch import Prefetch, default_depth
from durq.worker.pruner import DEFAULT_PRUNE_INTERVAL, Pruner
from durq.worker.reporting import report_outcome
from durq.worker.runners import AsyncRunner, ThreadRunner
from durq.worker.scheduler import Scheduler
from durq.worker.service import waiting_out
from durq.worker.services import Claimer, Heartbeat, Reaper, error_json
from durq.worker.state import Attempt, InFlight
from durq.worker.stats import WorkerStats
from durq.worker.stopping import STOP_WAIT, Cancels, Timeouts, stop_given_back, stop_superseded
from durq.worker.sweeper import attach as attach_sweeper
from durq.worker.tracebacks import format_task_error

if TYPE_CHECKING:
    from durq.registry import Registry

log = logging.getLogger("durq.worker")

#: Seconds past an async task's timeout before the watchdog cancels it too (``asyncio.timeout``
#: should have by then; a coroutine that blocks the loop or swallows the cancel has not).
ASYNC_TIMEOUT_SLACK = 1.0
#: Seconds a stopping worker gives the claimer, after the grace, to record the outcomes
#: still waiting (it took 60 s when the database refused writes: docs/deploy.md).
FINAL_WRITES = 10.0
_NO_SPAN = contextlib.nullcontext(None)


class Worker:
    """Runs the jobs of one :class:`durq.Durq` app.

    Args:
        app: the app whose registered tasks this worker runs. It claims only those task
            names; jobs of other tasks stay queued (shown as stranded in status).
        queues: queues to serve, in turn; default: every queue a registered task names.
        concurrency: attempts at once (threads for ``def`` tasks; ``async def`` tasks share
            the same slots on one event loop): an int from 1 to 10,000
            (:data:`durq.checks.MAX_THREADS`), or to 512 children with ``pool="processes"``
            (:data:`durq.checks.MAX_CHILDREN`).
        prefetch: most jobs claimed ahead of the free slots (default
            :func:`durq.worker.prefetch.default_depth`: 8 * concurrency, at least 64; 0
            turns it off), so that a slot that frees starts its next job without waiting
            for a commit. Only while jobs are short: see :mod:`durq.worker.prefetch`.
            Jobs with a limit and jobs of a paused queue are never claimed ahead; jobs
            held at shutdown go back without spending an attempt. An int from 0 to
            1,000,000.
        lease: seconds a claim lasts without a heartbeat (default 30; finite, above 0).
        heartbeat_interval: seconds between lease extensions (default lease / 3; at most a
            third of the lease).
        grace: seconds running jobs get to finish at shutdown (default 30; finite, >= 0).
        free_requeues: shutdowns per job that give its attempt back (default 2, an int from
            0 to 1,000); later ones consume it, so restarts cannot loop a job forever.
        worker_id: a unique id (default ``host:pid:random``).
        poll_interval: seconds between checks of the database's change counter when
            idle (default 0.001: a job enqueued by another process starts within ~1 ms).
        idle_claim_interval: seconds between claims when nothing changed (due jobs).
        reap_interval: seconds between reaper passes (default: half the lease, at most 5).
        retention: per-state retention for the pruner, ``{state: seconds | None}`` over
            the defaults (succeeded 7 days; failed, cancelled, expired 30 days); None keeps
            a state for ever. See :mod:`durq.retention`.
        prune_interval: seconds between pruner passes (default 300); None or 0 turns the
            pruner off.
        rescue_after: seconds without a liveness beat (one a second) after which the
            leader counts this worker dead and returns its jobs at once (default 5; at
            least 2; None: only by lease expiry or, on the same host, a gone process).
            See :mod:`durq.worker.liveness`.
        loop_block_threshold: seconds the event loop of ``async def`` tasks may go
            without running a callback before it is reported blocked (event
            ``loop_blocked``; default 1.0; finite, above 0).
        pool: where ``def`` task bodies run: ``"threads"`` (default) or ``"processes"``
            (``concurrency`` long-lived child processes, each running one body at a time;
            ``async def`` tasks keep their event loop in the worker). See
            docs/features/pools.md.
        max_jobs_per_child: with ``pool="processes"``: jobs a child runs before it is
            replaced (an int >= 1; default None: no limit).
        max_memory_per_child: with ``pool="processes"``: MB of resident memory a child may
            hold (a number above 0; default None: no limit), measured after each job (over
            it: the child is replaced) and every 50 ms while a job runs (over it: the
            child's group is SIGKILLed at once, the job retried or failed).
        around: a function returning a context manager that each attempt's body runs
            inside, entered on the thread (``def``) or in the asyncio task (``async def``)
            that runs it: a framework's context, e.g. a Flask app's ``app.app_context``
            (``flask durq worker`` passes it). An error it raises fails the attempt as the
            body's own would. Not with ``pool="processes"`` (``ConfigError``): the
            children run bodies without it.

    Raises:
        ConfigError: a bad option (see :func:`durq.checks.check_worker_timing` for the
            timing rules: the message says what would fit), or no registered tasks.
    """

    def __init__(
        self,
        app: Registry,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        prefetch: int | None = None,
        lease: float = 30.0,
        heartbeat_interval: float | None = None,
        grace: float = 30.0,
        free_requeues: int = 2,
        worker_id: str | None = None,
        poll_interval: float = 0.001,
        idle_claim_interval: float = 0.25,
        reap_interval: float | None = None,
        retention: Mapping[str, float | str | None] | None = None,
        prune_interval: float | None = DEFAULT_PRUNE_INTERVAL,
        rescue_after: float | None = RESCUE_AFTER,
        loop_block_threshold: float = 1.0,
        pool: str = "threads",
        max_jobs_per_child: int | None = None,
        max_memory_per_child: float | None = None,
        around: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        if not app.tasks:
            raise ConfigError("the app has no registered tasks; nothing to run")
        check_worker_sizes(
            pool=pool,
            concurrency=concurrency,
            prefetch=prefetch,
            free_requeues=free_requeues,
            max_jobs_per_child=max_jobs_per_child,
            max_memory_per_child=max_memory_per_child,
        )
        check_worker_timing(
            lease=lease,
            heartbeat_interval=heartbeat_interval,
            grace=grace,
            reap_interval=reap_interval,
            poll_interval=poll_interval,
            idle_claim_interval=idle_claim_interval,
        )
        if rescue_after is not None and not 2 * BEAT_INTERVAL <= rescue_after < float("inf"):
            raise ConfigError(
                f"rescue_after must be at least {2 * BEAT_INTERVAL:g} s (two liveness beats) "
                f"and finite, or None, not {rescue_after}"
            )
        if not 0 < loop_block_threshold < float("inf"):
            raise ConfigError(f"loop_block_threshold must be > 0 s, not {loop_block_threshold}")
        if pool == "threads" and (max_jobs_per_child or max_memory_per_child):
            raise ConfigError("max_jobs_per_child and max_memory_per_child need pool='processes'")
        if around is not None and pool == "processes":
            raise ConfigError("around= runs in this process: not with pool='processes'")
        self.app = app
        self.sweeper = attach_sweeper(self, app)  # deadlines: adds the tasks' hook tasks
        self.queues = list(queues or sorted({t.queue for t in app.tasks.values()}))
        if not self.queues:
            raise ConfigError("no queues to serve")
        self.task_names = sorted(app.tasks)
        self.concurrency = concurrency
        self.lease = float(lease)
        self.heartbeat_interval = heartbeat_interval or self.lease / 3
        self.grace = float(grace)
        self.free_requeues = free_requeues
        self.id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.poll_interval = poll_interval
        self.idle_claim_interval = idle_claim_interval
        self.reap_interval = reap_interval or min(5.0, max(self.lease / 2, 0.1))
        self.executor = Executor(app, around=around)
        self.claimer = Claimer(self)
        self.inflight = InFlight(concurrency, on_free=self.claimer.wake)
        self.stats = WorkerStats()
        # a process pool's slots may grow to POOL_DEPTH per child; the prefetch is sized
        # for PREFETCH_PER_CHILD of them, 2 jobs each (as fast, fewer jobs held)
        if pool == "processes":
            depth = default_depth(concurrency * PREFETCH_PER_CHILD, per_slot=2)
        else:
            depth = default_depth(concurrency)
        depth = depth if prefetch is None else prefetch
        self.prefetch = Prefetch(depth, concurrency)
        self.heartbeat = Heartbeat(self)
        self.liveness = Liveness(self, rescue_after, on_rescued=self.heartbeat.beat)
        self.reaper = Reaper(self)
        self.timeouts = Timeouts(self)
        self.cancels = Cancels(self)
        self.loop_block_threshold = float(loop_block_threshold)
        self.pruner = Pruner.configure(self, retention, prune_interval)

        self.scheduler = Scheduler(self)  # periodic jobs; started only when the app has some
        self._threads: ThreadRunner | None = None
        self._pool: ProcessPool | None = None
        self._pool_slots = concurrency
        self._pool_given_back = 0  # jobs the pool held unstarted at the stop, given back
        self.pool = pool
        if pool == "processes":
            self._pool = ProcessPool(
                app,
                self.executor,
                concurrency,
                self._pool_done,
                partial(self.crashed, "pool"),
                max_jobs_per_child=max_jobs_per_child,
                max_memory_per_child=max_memory_per_child,
                on_short=self._pool_short,
                on_unstarted=self._pool_unstarted,
            )
        self._async = AsyncRunner()
        self._stop_requested = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._started = False
        self._signals = 0
        self._in_run = False
        self.exit_code = 0
        self.crash_reason: str | None = None
        #: The signal (SIGINT, SIGTERM) that stopped :meth:`run`, or None.
        self.stop_signal: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Open the store, register, reap once, and start the loops (returns at once).

        Raises:
            ConfigError: the app is in eager mode (``Durq(eager=True)``, tests only).
        """
        if getattr(self.app, "eager", False):
            raise ConfigError(
                "this app is in eager mode (tests only: jobs run at enqueue); "
                "a worker will not start on it"
            )
        store = self.app.store
        store.register_worker(
            WorkerInfo(
                self.id,
                socket.gethostname(),
                os.getpid(),
                tuple(self.queues),
                tuple(self.task_names),
                store.now(),
                store.now(),
                self.lease,
            )
        )
        # the first line names the database, before the first reap or sweep logs anything
        events.emit(
            events.WORKER_STARTED,
            worker_id=self.id,
            queues=self.queues,
            tasks=self.task_names,
            concurrency=self.concurrency,
            pool=self.pool,
            lease=self.lease,
            url=describe_url(self.app.url),
        )
        try:  # the store answered once: a cut session or a busy moment is waited out now
            stop = self._stop_requested
            waiting_out(lambda: store.report_worker(self.id, self.self_report()), "start", stop)
            waiting_out(self.reaper.reap_once, "start", stop)
            # overdue jobs expire before anything is claimed
            waiting_out(self.sweeper.sweep_once, "start", stop)
        except BaseException:
            with contextlib.suppress(Exception):  # do not leave a phantom "live worker" behind
                store.unregister_worker(self.id)
            raise
        if self._pool is not None:
            try:
                self._pool.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    store.unregister_worker(self.id)
                raise
        self._threads = ThreadRunner(self.concurrency)
        for service in (
            self.heartbeat, self.liveness, self.reaper, self.sweeper, self.claimer,
            self.timeouts, self.cancels,
        ):  # fmt: skip
            service.start()
        if self.pruner is not None:
            self.pruner.start()

        if self.app.periodics:
            self.scheduler.start()
        self._started = True

    def run(self, *, install_signals: bool = True, stop_when_idle: bool = False) -> int:
        """Start, serve until a signal, :meth:`request_stop` or a crash, then shut down.

        Args:
            install_signals: handle SIGTERM/SIGINT (main thread only): the first starts a
                graceful shutdown, a second exits at once.
            stop_when_idle: return once no job of this worker's queues and tasks is queued,
                scheduled or running (for batch scripts and demos).

        Returns:
            The exit code: 0 after a clean shutdown, 1 after a crash of a loop.
        """
        self._in_run = True
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.start()
        try:
            while not self._stop_requested.wait(0.1):
                if (
                    stop_when_idle
                    and not len(self.inflight)
                    and not self.app.store.has_pending(self.queues, self.task_names)
                ):
                    break
        except KeyboardInterrupt:
            pass
        return self.stop(0.0 if self.crash_reason else None)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        self.stop_signal = signum
        if self._signals > 1:
            events.emit(
                events.WORKER_STOPPING, logging.WARNING, worker_id=self.id, signal=signum, now=True
            )
            os._exit(128 + signum)
        events.emit(events.WORKER_STOPPING, worker_id=self.id, signal=signum, grace=self.grace)
        self.prefetch.stop_starting()
        self._stop_requested.set()

    def self_report(self) -> WorkerReport:
        """What this worker writes about itself at each beat (see durq.worker.stats)."""
        return self.stats.report(self.inflight, self.concurrency, self.app.store.now(), self.pool)

    def loop_blocked_for(self, now: float) -> float:
        """Seconds the event loop of ``async def`` tasks has run no callback (``now``:
        monotonic); 0.0 while it runs or before it started."""
        return self._async.blocked_for(now)

    def request_stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully (thread-safe, returns at once)."""
        self.prefetch.stop_starting()  # no prefetched job starts once a stop is asked for
        self._stop_requested.set()

    def crashed(self, service: str, exc: BaseException) -> None:
        """Called by a loop that died: log why, and stop the worker with exit code 1."""
        self.exit_code = 1
        self.crash_reason = f"{service}: {type(exc).__name__}: {exc}"
        events.emit(
            events.WORKER_CRASHED,
            logging.ERROR,
            worker_id=self.id,
            service=service,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        self._stop_requested.set()
        if not self._in_run:
            threading.Thread(
                target=self.stop, args=(0.0,), name="durq-crash-stop", daemon=True
            ).start()

    def stop(self, grace: float | None = None) -> int:
        """Shut down: stop claiming → let running jobs finish within ``grace`` seconds
        (heartbeats go on) → record their outcomes → give back what still runs → close.

        Returns:
            The exit code (0, or 1 after a crash). Idempotent.
        """
        with self._stop_lock:
            if self._stopped:
                return self.exit_code
            self._stopped = True
        self._stop_requested.set()
        grace = self.grace if grace is None else grace
        if not self._started:
            return self.exit_code
        self.claimer.stop_claiming()
        given_back = self.give_back(self.prefetch.close())
        if self._pool is not None:  # no new body starts in a child either
            self._pool.drain()
        deadline = time.monotonic() + grace
        with self.inflight.lock:
            while self.inflight.attempts and self.crash_reason is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.inflight.freed.wait(min(left, 0.1))
        abandoned = self.inflight.abandon_unreturned()
        if self._pool is not None:  # bodies past the grace are killed before release
            self._pool.close()
        # records the outcomes still waiting, then ends; a store that refuses them (a full
        # disk, a server gone) is not waited for past FINAL_WRITES: they come back as after
        # a crash (rescued, charged), and a supervisor's stop timeout is not overrun
        self.claimer.stop(timeout=FINAL_WRITES)
        for attempt in abandoned:
            attempt.ctx.mark_lease_lost()
            self._release(attempt)
        stop_given_back(self, abandoned, STOP_WAIT)  # none is left in the store as it closes
        self.timeouts.stop()
        self.cancels.stop()
        self.heartbeat.stop()
        self.liveness.stop()
        self.reaper.stop()
        if self.pruner is not None:
            self.pruner.stop()

        self.scheduler.stop()

        self.sweeper.stop()
        try:
            self.app.store.unregister_worker(self.id)
        except Exception as exc:  # noqa: BLE001 - best effort; the row ages out
            log.warning("could not unregister worker %s: %s", self.id, exc)
        if self._threads is not None:
            self._threads.close()
        self._async.close()
        events.emit(
            events.WORKER_STOPPED,
            worker_id=self.id,
            released=len(abandoned),
            given_back=given_back + self._pool_given_back,
            exit_code=self.exit_code,
        )
        return self.exit_code

    def _release(self, attempt: Attempt) -> None:
        job = attempt.job
        message = f"worker {self.id} shut down while the attempt ran"
        error = error_json("shutdown", message, job.attempt, self.app.store.now())
        try:
            task = self.app.tasks.get(job.task)
            on_fail = task is not None and task.on_fail is not None  # durq.hooks
            result = self.app.store.release(
                job.id, job.lease_token, self.free_requeues, error, on_fail=on_fail
            )
        except Exception as exc:  # noqa: BLE001 - the lease will expire and the reaper requeues
            log.warning("could not release job %s: %s (the reaper will)", job.id, exc)
            return
        if result is not None:
            events.emit(
                events.JOB_RELEASED,
                id=job.id,
                queue=job.queue,
                task=job.task,
                attempt=job.attempt,
                state=result[0],
                attempts=result[1],
            )
        self.inflight.settle(attempt)

    def give_back(self, jobs: list[Claimed]) -> int:
        """Return prefetched jobs that never started to the queue, attempt handed back
        (``Store.give_back``). On a store error they stay leased until the lease lapses;
        the reaper then requeues them (charged, like any lost lease). Returns how many."""
        if not jobs:
            return 0
        try:
            return len(self.app.store.give_back([(j.id, j.lease_token) for j in jobs]))
        except Exception as exc:  # noqa: BLE001 - the lease will expire and the reaper requeues
            log.warning("could not give back %d prefetched jobs: %s", len(jobs), exc)
            return 0

    # -- running attempts -----------------------------------------------------------------

    def start_prefetched(self) -> None:
        """Start prefetched jobs in the free slots (the claimer, and each runner thread as
        its job returns: a slot never waits for a commit to start its next job). A job
        whose earlier body still runs here waits for it (docs/features/replay.md)."""
        bodies = self.inflight.bodies
        for job in self.prefetch.start(self.inflight.free_slots, self.dispatch, bodies):
            stop_superseded(self, job)

    def dispatch(self, job: Claimed) -> None:
        """Hand a claimed job to the runner (called under the prefetch's lock)."""
        task = self.app.tasks.get(job.task)
        ctx = JobContext(
            job.id,
            job.task,
            job.queue,
            job.attempt,
            job.max_attempts,
            job.lease_token,
            self.app.store.set_progress,
            _steps=self.app.store,
            _parents=self.app.store.parent_results,
            _codec=self.app.store.codec,
            _will_retry=None if task is None else partial(self.executor.would_retry, job, task),
        )
        in_pool = self._pool is not None and self._pool.runs(job.task)
        is_async = task is not None and task.is_async
        # the pool enforces a timeout itself (it stops the child), so the attempt has none
        timeout = None if task is None or in_pool else task.timeout
        attempt = Attempt(job, ctx, is_async=is_async, timeout=timeout, in_pool=in_pool)
        self.inflight.add(attempt)
        if events.enabled(logging.DEBUG):  # one line per attempt at INFO: its outcome
            events.emit(
                events.JOB_STARTED,
                logging.DEBUG,
                id=job.id,
                queue=job.queue,
                task=job.task,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                worker_id=self.id,
            )
        if in_pool:  # the pool enforces the timeout itself
            assert self._pool is not None
            self._pool.submit(attempt)
        elif task is not None and task.is_async:
            self._async.submit(lambda: self._run_async(attempt))
        else:
            assert self._threads is not None
            self._threads.submit(lambda: self._run_sync(attempt))

    def _run_sync(self, attempt: Attempt) -> None:
        outcome: Outcome | None = None
        try:
            if self.inflight.start(attempt, time.monotonic()):
                with self._traced(attempt) as span:
                    try:
                        outcome = self.executor.run_sync(attempt.job, attempt.ctx, attempt.guard)
                    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt
                        outcome = self._internal_failure(attempt, exc)
                    outcome = self._stopped_outcome(attempt, outcome)
                    if span is not None:
                        tracing.record_outcome(span, outcome)
        except Interrupted as exc:  # a late raise past the guard (see durq.worker.interrupt)
            log.warning("job %s: an interruption landed after its body returned", attempt.job.id)
            outcome = outcome or self._stopped_outcome(
                attempt, self._internal_failure(attempt, exc)
            )
        self._ended(attempt, outcome)

    async def _run_async(self, attempt: Attempt) -> None:
        outcome: Outcome | None = None
        # on the loop: a body never starts once its attempt was settled or its lease lost,
        # and its timeout counts from here, not from the hand-off to a (maybe blocked) loop
        attempt.task = asyncio.current_task()  # before the check: a cancel racing it cancels
        if self.inflight.start(attempt, time.monotonic(), slack=ASYNC_TIMEOUT_SLACK):
            with self._traced(attempt) as span:
                try:
                    outcome = await self.executor.run_async(attempt.job, attempt.ctx)
                except BaseException as exc:  # noqa: BLE001 - CancelledError when interrupted
                    outcome = self._internal_failure(attempt, exc)
                outcome = self._stopped_outcome(attempt, outcome)
                if span is not None:
                    tracing.record_outcome(span, outcome)
        self._ended(attempt, outcome)

    def _ended(self, attempt: Attempt, outcome: Outcome | None) -> None:
        """The body is gone (or never started): free its slot, hand on its outcome."""
        self.prefetch.ran(time.monotonic() - attempt.started)
        if self.inflight.returned(attempt) and outcome is not None:
            self.claimer.submit(attempt, outcome)
        self.start_prefetched()

    def _stopped_outcome(self, attempt: Attempt, outcome: Outcome) -> Outcome:
        """A body stopped at its timeout ends ``timed_out`` whatever it returned (written
        now that it has stopped); cancelled and expired ones are dropped by ``returned``."""
        if attempt.interrupted == "timeout" and not (
            outcome.error and outcome.error.kind == "timeout"
        ):
            return self.executor.timed_out(attempt.job, attempt.timeout or 0.0)
        return outcome

    def interrupt(self, attempt: Attempt, reason: str) -> bool:
        """Stop a running attempt's body: the one place that does, whatever the pool.

        ``def`` bodies get :class:`durq.Interrupted` raised in their thread
        (:mod:`durq.worker.interrupt`), ``async def`` bodies are cancelled, and a body in
        the process pool has its child's process group stopped (SIGTERM, then SIGKILL:
        :meth:`durq.worker.pool.ProcessPool.interrupt`). Its slot and
        lease stay held until the body has returned; a cancelled or expired attempt's
        outcome is then dropped, a timed-out one is written as ``timed_out``. Calling it
        again raises again (the timeouts service does, every
        :data:`durq.worker.interrupt.RAISE_EVERY` seconds, until the body is gone).

        Args:
            attempt: an attempt in this worker's table.
            reason: ``"timeout"``, ``"cancelled"``, ``"expired"`` or ``"lease_lost"``.

        Returns:
            False when the body had already returned (nothing to stop).
        """
        first = attempt.interrupted is None
        if not self.inflight.mark_interrupted(attempt, reason, time.monotonic()):
            return False
        attempt.ctx.mark_interrupted(reason)
        if attempt.in_pool:
            if first and self._pool is not None:  # the pool kills once; no raising again
                self._pool.interrupt(attempt.job.id, attempt.job.lease_token, reason)
        elif not attempt.is_async:
            attempt.guard.interrupt(reason)
        elif attempt.task is not None:
            self._async.cancel(attempt.task)
        return True

    def _pool_short(self, short: bool) -> None:
        """While the pool's bodies are short, each child may hold a next job behind the
        one it runs (POOL_DEPTH slots per child): the pipe's round trip is then hidden.
        Slots shrink back only as they free, so free slots never go below zero."""
        with self.inflight.lock:
            target = self.concurrency * (POOL_DEPTH if short else 1)
            self._pool_slots = target
            self.inflight.slots = max(target, min(self.inflight.slots, self.inflight.busy))
        if short:
            self.claimer.wake()

    def _pool_done(self, attempt: Attempt, outcome: Outcome) -> None:
        """A body that ran in the process pool ended (its child reaped if it had to go)."""
        if self.inflight.slots > self._pool_slots:  # shrinking after short bodies
            with self.inflight.lock:
                self.inflight.slots = max(self._pool_slots, self.inflight.busy - 1)
        self._ended(attempt, outcome)

    def _pool_unstarted(self, attempts: list[Attempt]) -> None:
        """Jobs the pool held but never started when the worker began to stop: back to
        the queue without spending an attempt, as prefetched ones are; their slots free."""
        live = [a for a in attempts if not a.abandoned]  # abandoned ones are released
        self._pool_given_back += self.give_back([a.job for a in live])
        for attempt in attempts:
            if self.inflight.returned(attempt):
                self.inflight.settle(attempt)

    def _traced(self, attempt: Attempt) -> contextlib.AbstractContextManager[Any]:
        """The attempt's OpenTelemetry span when tracing is on (durq.observability.tracing),
        else None (a shared null context: no generator on every job's path)."""
        return self._span(attempt) if tracing.enabled() else _NO_SPAN

    @contextlib.contextmanager
    def _span(self, attempt: Attempt) -> Iterator[Any]:
        """The span; reading the trace context is the one extra read, only then."""
        try:
            record = self.app.store.get(attempt.job.id)
        except Exception:  # noqa: BLE001 - a trace must never fail an attempt
            record = None
        with tracing.process_span(attempt.job, record.meta if record else None) as span:
            yield span

    def _internal_failure(self, attempt: Attempt, exc: BaseException) -> Outcome:
        """An outcome for an error that escaped the executor's own steps; never raises."""
        job = attempt.job
        try:
            tb = format_task_error(exc)
        except BaseException:  # noqa: BLE001
            tb = ""
        error = AttemptError(
            job.attempt, self.app.store.now(), type(exc).__name__, describe(exc), tb, "transient"
        )
        kind = "failed" if job.attempt >= job.max_attempts else "retry"
        return Outcome(job.id, job.lease_token, kind, error=error, delay=1.0)

    def report(self, attempt: Attempt, outcome: Outcome, applied: bool) -> None:
        """Log what became of an outcome (called by the claimer after the commit)."""
        report_outcome(self.id, self.inflight, attempt, outcome, applied)
