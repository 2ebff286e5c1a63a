"""Durq: the facade users hold. Registers tasks, enqueues jobs, reads and steers them.

The workflow features' methods (pauses and alerts, batches, retention and steps, periodic
schedules, parked jobs and deadlines, limits, hooks) live in mixins under durq/facade/."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from durq.checks import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    MAX_EPOCH,  # noqa: F401 - still importable from durq.app, as before the split
    _as_id,
    _check_int,
    _check_name,
    _check_text,
    check_task_options,
)
from durq.classify import Classifier, Rule
from durq.codecs import Codec
from durq.errors import (
    ConfigError,
    JobGone,
    JobNotFound,
    UnknownTask,
)
from durq.facade import (
    BatchesFacade,
    DeadlinesFacade,
    EnqueueFacade,
    HooksFacade,
    LimitsFacade,
    PauseFacade,
    PeriodicFacade,
    RetentionFacade,
    WorkflowsFacade,
)
from durq.job import Job
from durq.limits import TaskLimits
from durq.payload import (
    DEFAULT_PAYLOAD_LIMIT,
    DEFAULT_RESULT_LIMIT,
)
from durq.retry import MAX_RETRY_AFTER, Backoff, as_backoff
from durq.store import Store, open_store
from durq.task import DEFAULT_MAX_SNOOZES, Task

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_URL = "sqlite:///durq.db"


class Durq(
    EnqueueFacade,
    PauseFacade,
    BatchesFacade,
    RetentionFacade,
    PeriodicFacade,
    DeadlinesFacade,
    LimitsFacade,
    HooksFacade,
    WorkflowsFacade,
):
    """A durq application: one database, the tasks registered on it.

    Args:
        url: ``sqlite:///path/to/jobs.db``, a bare path, or None for ``$DURQ_URL`` or else
            ``./durq.db``. SQLite options: ``?synchronous=normal`` (faster, may lose the last
            commits on power loss), ``busy_timeout=`` and ``lock_timeout=`` (seconds).
        payload_limit: the largest payload accepted at enqueue, in bytes of JSON (1 MiB);
            None for no limit. A child's payload with its parents' results (``dq.chain``,
            ``dq.group(...).then``) keeps it too: one that would not is failed, not run,
            with kind ``unstorable_payload`` (docs/features/dependencies.md).
        result_limit: the largest result a task may return, in bytes of JSON (1 MiB,
            :data:`durq.payload.DEFAULT_RESULT_LIMIT`); None for no limit. A larger result
            fails its job for good with kind ``result_too_large`` (docs/features/results.md).
        classify: classifiers tried for every task after the task's own (see
            :func:`durq.classify.classify`).
        retry_unclassified: whether an error no classifier recognises is retried (True)
            or fails the job at once.
        clock: seconds since the epoch; tests inject one to move time.
        migrate: create or upgrade the schema when the database is first used (default).
            False opens only a database that already has this durq's schema, and writes no
            schema (``StoreError`` otherwise): for tools that must not change a database.
        strict_types: check every annotated task parameter at enqueue, not only rich ones
            (docs/features/typed-payloads.md).
        codec: how payloads, results and steps are stored, e.g. ``durq.codecs.Encrypted``
            (docs/features/encryption.md); None: plain JSON.
        eager: for tests only: every enqueue runs the due jobs in the calling thread
            before it returns (:func:`durq.testing.drain`, backoff skipped), so the returned
            job is already finished. An enqueue with ``connection=`` is not run (it is not
            committed yet). A worker refuses to start on an eager app (``ConfigError``).
            See also ``durq.testing.eager(dq)``.

    The database is opened (and migrated) on first use, not at construction.

    Raises:
        ConfigError: a limit that is not a number of bytes >= 1 (or None).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        payload_limit: int | None = DEFAULT_PAYLOAD_LIMIT,
        result_limit: int | None = DEFAULT_RESULT_LIMIT,
        classify: Sequence[Rule | Classifier] = (),
        retry_unclassified: bool = True,
        clock: Callable[[], float] = time.time,
        migrate: bool = True,
        strict_types: bool = False,
        codec: Codec | None = None,
        eager: bool = False,
    ) -> None:
        self.url = url or os.environ.get("DURQ_URL") or DEFAULT_URL
        for what, limit in (("payload_limit", payload_limit), ("result_limit", result_limit)):
            if limit is not None and (
                not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
            ):
                raise ConfigError(f"{what} must be a number of bytes >= 1 or None, not {limit!r}")
        self.eager = eager
        self.payload_limit = payload_limit
        self.result_limit = result_limit
        self.rules = tuple(classify)
        self.retry_unclassified = retry_unclassified
        self.clock = clock
        self.auto_migrate = migrate
        self.strict_types = strict_types
        self.codec = codec
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._store: Store | None = None
        self._open_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Durq {self.url} tasks={sorted(self.tasks)}>"

    @property
    def store(self) -> Store:
        """The open store (opened and migrated on first use).

        Raises:
            StoreError, SchemaTooNew, ConfigError: see :func:`durq.store.open_store`.
        """
        if self._store is None:
            with self._open_lock:
                if self._store is None:
                    self.url = self._resolve_url()
                    store = open_store(self.url, clock=self.clock, auto_migrate=self.auto_migrate)
                    store.codec = self.codec  # the store passes results down a chain
                    store.payload_limit = self.payload_limit  # ... within this limit
                    self._store = store
        return self._store

    def _resolve_url(self) -> str:
        """The URL the store opens, read as it opens (:attr:`url`; an app whose database
        follows a framework's settings reads them here: durq.contrib.django)."""
        return self.url

    def close(self) -> None:
        """Close the database connections (reopened on next use)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- tasks ----------------------------------------------------------------------------

    @overload
    def task(self, fn: F, /) -> Task[Any, Any]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff | Callable[[int, BaseException | None], float] | None = None,
        timeout: float | None = None,
        priority: int = 0,
        classify: Rule | Classifier | Sequence[Rule | Classifier] | None = None,
        deadline_in: float | None = None,
        notice_after: float | None = None,
        on_expire: Callable[[Job], Any] | None = None,
        on_slow: Callable[[Job], Any] | None = None,
        concurrency: int | None = None,
        concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
        rate_limit: str | None = None,
        on_fail: Callable[[Job], Any] | None = None,
        hook_queue: str | None = None,
        fair_key: Callable[[dict[str, Any]], str] | None = None,
        strict_types: bool | None = None,
        max_snoozes: int = DEFAULT_MAX_SNOOZES,
        max_retry_after: float | None = MAX_RETRY_AFTER,
    ) -> Callable[[Callable[..., Any]], Task[Any, Any]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff | Callable[[int, BaseException | None], float] | None = None,
        timeout: float | None = None,
        priority: int = 0,
        classify: Rule | Classifier | Sequence[Rule | Classifier] | None = None,
        deadline_in: float | None = None,
        notice_after: float | None = None,
        on_expire: Callable[[Job], Any] | None = None,
        on_slow: Callable[[Job], Any] | None = None,
        concurrency: int | None = None,
        concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
        rate_limit: str | None = None,
        on_fail: Callable[[Job], Any] | None = None,
        hook_queue: str | None = None,
        fair_key: Callable[[dict[str, Any]], str] | None = None,
        strict_types: bool | None = None,
        max_snoozes: int = DEFAULT_MAX_SNOOZES,
        max_retry_after: float | None = MAX_RETRY_AFTER,
    ) -> Task[Any, Any] | Callable[[Callable[..., Any]], Task[Any, Any]]:
        """Register a function (``def`` or ``async def``) as a task.

        Use as ``@dq.task`` or ``@dq.task(queue="downloads", max_attempts=5)``. The function
        takes its payload as keyword arguments; its return value (JSON) is stored as the
        job's result.

        Args:
            name: the routing name (default: the function's ``__name__``).
            queue: the default queue of its jobs.
            max_attempts: attempts per job in all (>= 1), counting the first.
            backoff: a policy from :mod:`durq.retry` (``tiers``, ``exponential``,
                ``constant``) or a callable ``(attempt, error) -> seconds``; default
                ``exponential(base=5, factor=4, cap=900, jitter=0.1)``.
            timeout: seconds one attempt may run; past it the attempt fails as a timeout
                (async tasks are cancelled; a thread's late result is discarded).
            priority: default priority; lower numbers run first.
            classify: rule(s) deciding transient vs permanent for this task's errors.
            deadline_in: default seconds after a job's creation (``created_at``) after which
                it expires if not finished (docs/features/deadlines.md); None: no deadline.
            notice_after: default seconds after a job's creation after which ``on_slow``
                runs once if the job is not finished yet.
            on_expire: ``fn(job: durq.Job) -> None`` (or ``async def``), run once, as a hook
                job on the job's queue, after a job of this task expired (deadline or park
                TTL passed); ``job`` is the expired job as stored.
            on_slow: ``fn(job: durq.Job) -> None``, run once after a job passed
                ``notice_after`` unfinished (not if its deadline passed first).
            concurrency: at most this many of its jobs with the same limit key run at once,
                across every worker and process (enforced by the claim in the database;
                running jobs plus live :meth:`limit` holds of the key count).
            concurrency_key: the limit key: a str (a named limit, shared with other tasks
                and :meth:`limit`), or a callable ``payload dict -> str`` evaluated at
                enqueue and stored on the job (e.g. the URL's host); default: the task name.
            rate_limit: ``"N/s"``, ``"N/m"`` or ``"N/h"``: at most N starts of its jobs per
                key in any such window, across every worker (see docs/features/limits.md).
            on_fail: ``fn(job: durq.Job) -> None`` (or ``async def``), run once, as a hook
                job, after a job of this task ended ``failed`` by any path: a permanent
                error, its last attempt, the reaper (lease lost, no attempts left), a charged
                shutdown release; ``job`` is the failed job as stored
                (docs/features/hooks.md).
            hook_queue: the queue of this task's hook jobs (``on_expire``, ``on_slow``,
                ``on_fail``); default: the job's own queue. Use a queue that is not paused
                with the task's, so that hooks run during maintenance.
            fair_key: ``payload dict -> str`` evaluated at enqueue (e.g. the tenant): claims
                take its jobs round-robin across keys, so one key's backlog cannot starve
                another's (docs/features/fairness.md). The key must be a non-empty str of
                at most 200 characters, without a lone surrogate or a NUL character: any
                other value is a ``ConfigError`` at enqueue, nothing written.
            strict_types: check every annotated parameter at enqueue, not only rich ones
                (None: the app's ``strict_types``); docs/features/typed-payloads.md.
            max_snoozes: times one of its jobs may snooze (``raise durq.Snooze(s)``,
                ``ctx.snooze(s)``; no attempt spent) before it fails instead, kind
                ``snooze_limit`` (>= 0; default 100); docs/features/snooze.md.
            max_retry_after: the cap in seconds on a Retry-After delay
                (``Transient(retry_after=)``, an HTTP error's header; default 3,600,
                :data:`durq.retry.MAX_RETRY_AFTER`; None: no cap). A longer delay is cut
                to the cap and the attempt's error entry says so.

        Raises:
            ConfigError: a bad option, or another function already registered as ``name``.
        """

        def register(func: Callable[..., Any]) -> Task[Any, Any]:
            task_name = _check_name("task name", name or func.__name__)
            check_task_options(
                max_attempts=max_attempts,
                priority=priority,
                timeout=timeout,
                max_snoozes=max_snoozes,
                max_retry_after=max_retry_after,
            )
            if fair_key is not None and not callable(fair_key):
                raise ConfigError(f"fair_key must be a callable payload -> str, not {fair_key!r}")
            rules: Sequence[Rule | Classifier]
            if classify is None:
                rules = ()
            elif isinstance(classify, Rule) or callable(classify):
                rules = (classify,)
            else:
                rules = tuple(classify)
            existing = self.tasks.get(task_name)
            if existing is not None and existing.fn is not func:
                raise ConfigError(
                    f"task name {task_name!r} is already registered to {existing.fn!r}"
                )
            registered: Task[Any, Any] = Task(
                self,
                func,
                name=task_name,
                queue=_check_name("queue", queue),
                max_attempts=max_attempts,
                backoff=as_backoff(backoff),
                timeout=timeout,
                priority=priority,
                rules=rules,
                **self._deadline_defaults(deadline_in, notice_after, on_expire, on_slow),
                limits=TaskLimits.build(task_name, concurrency, concurrency_key, rate_limit),
                **self._hook_options(on_fail, hook_queue),
                fair_key=fair_key,
                strict_types=self.strict_types if strict_types is None else strict_types,
                max_snoozes=max_snoozes,
                max_retry_after=max_retry_after,
            )
            self.tasks[task_name] = registered
            return registered

        if fn is not None:
            return register(fn)
        return register

    def get_task(self, name: str) -> Task[Any, Any]:
        """The task registered as ``name``.

        Raises:
            UnknownTask: nothing is registered under that name.
        """
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(
                f"no task named {name!r} is registered (known: {sorted(self.tasks)})"
            ) from None

    # -- enqueue --------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job with this id.

        Raises:
            JobNotFound: no such job (never existed, or pruned).
        """
        record = self.store.get(_as_id("job id", job_id))
        if record is None:
            raise JobNotFound(f"no job with id {job_id}")
        return Job(self.store, record)

    def jobs(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 100,
        tag: str | None = None,
    ) -> list[Job]:
        """Jobs, newest first, filtered by state (incl. ``scheduled``), queue, task and tag
        (``options(tags=[...])``; the ``job_tags`` index).

        Raises:
            ConfigError: an unknown state, a queue or task that is not valid Unicode text
                (a lone surrogate, as from a non-UTF-8 command line), or a ``limit`` that is not an int from 1 to
                2**63 - 1 (the largest the stores' integers hold).
        """
        from durq.model import JobState

        if state is not None and state not in {s.value for s in JobState}:
            raise ConfigError(f"unknown state {state!r}; one of {[s.value for s in JobState]}")
        _check_int("limit", limit, 1, 2**63 - 1)
        for what, value in (("queue", queue), ("task", task), ("tag", tag)):
            if value is not None:
                _check_text(what, value)
        records = self.store.list_jobs(
            state=state, queue=queue, task=task, limit=int(limit), tag=tag
        )
        return [Job(self.store, r) for r in records]

    def retry(self, job_id: int) -> Job:
        """Replay a finished job: put a succeeded, failed, cancelled or expired job back in
        the queue with a fresh attempt budget (docs/features/replay.md).

        Its history is kept: the old attempts' entries stay, and one ``replayed`` entry
        records how the run before ended (state and attempts; a succeeded run has no other
        entry). Attempt numbers start again at 1; the old result and the snooze count are
        cleared.

        Raises:
            JobNotFound: no such job.
            JobGone: the job is queued, scheduled, running, waiting or parked (it has not
                finished: nothing changed).
        """
        if not self.store.retry(_as_id("job id", job_id)):
            job = self.get(job_id)
            raise JobGone(
                f"job {job_id} is {job.state}; only a finished job (succeeded, failed, "
                "cancelled or expired) can be retried"
            )
        return self.get(job_id)

    def retry_where(
        self,
        state: str = "failed",
        *,
        queue: str | None = None,
        task: str | None = None,
        chunk: int = 500,
    ) -> int:
        """Replay every job in ``state`` (of ``queue`` / ``task`` when given), as
        :meth:`retry` does, in one transaction per ``chunk`` jobs (lowest ids first).

        Only the jobs that exist when the call starts are replayed, each at most once,
        even if some fail again before the call returns. A job whose active unique key
        (``unique="active"``) a live job holds is skipped (of several finished jobs with one
        key, the first is replayed).

        Args:
            state: ``succeeded``, ``failed``, ``cancelled`` or ``expired``.
            queue: only this queue (None: every queue).
            task: only this task name (None: every task).
            chunk: jobs per transaction (an int from 1 to 100,000).

        Returns:
            How many jobs were replayed.

        Raises:
            ConfigError: ``state`` is not a finished state, or ``chunk`` is not an int
                from 1 to 100,000.
        """
        if state not in {"succeeded", "failed", "cancelled", "expired"}:
            raise ConfigError(
                f"state must be succeeded, failed, cancelled or expired, not {state!r}"
            )
        _check_int("chunk", chunk, 1, 100_000)
        newest = self.store.list_jobs(state=None, queue=None, task=None, limit=1)
        upto = newest[0].id if newest else 0
        after, total = 0, 0
        while True:
            ids, last = self.store.retry_matching(state, queue, task, after, upto, chunk)
            total += len(ids)
            if last is None:
                return total
            after = last

    def cancel(self, job_id: int, *, parked_only: bool = False) -> Job:
        """Cancel a queued, scheduled, running or parked job.

        A running job's lease is revoked: its worker's outcome is fenced out and the task
        sees ``durq.context().lease_lost`` become True at the next heartbeat.

        Args:
            parked_only: cancel only while the job is still parked (the answer to
                :meth:`adopt`: of ``adopt(id)`` and ``cancel(id, parked_only=True)`` exactly
                one wins, whatever their order). Without it, a job adopted a moment earlier
                is cancelled as a queued job.

        Raises:
            JobNotFound: no such job.
            JobGone: the job already finished, or (``parked_only``) is no longer parked;
                nothing changed.
        """
        if parked_only:
            if not self.store.cancel_parked(_as_id("job id", job_id)):
                job = self.get(job_id)
                raise JobGone(f"job {job_id} is {job.state}, not parked; not cancelled")
            return self.get(job_id)
        if not self.store.cancel(_as_id("job id", job_id)) and not self.store.cancel_parked(
            _as_id("job id", job_id)
        ):
            job = self.get(job_id)
            raise JobGone(f"job {job_id} is already {job.state}; it cannot be cancelled")
        return self.get(job_id)

    def purge(self, queue: str, *, states: Sequence[str] | None = None) -> int:
        """Delete the jobs of one queue, for good. Returns how many were deleted.

        A parent whose child has not ended is kept, whatever its state (unless that child
        is deleted by this same purge): a waiting fan-in takes its parents' results when it
        is queued, and would otherwise run with a shorter list, or, for a deleted
        unfinished parent, wait for ever. ``dq.store.purge_held(queue, states)`` counts
        them; they go at a later purge once their children ended (as retention keeps
        them, docs/features/retention.md).

        Args:
            queue: the queue to empty.
            states: which states to delete (default: the finished ones — succeeded,
                failed, cancelled, expired). Naming ``queued`` (which includes scheduled)
                or ``running`` deletes work that has not been done: that is what
                ``durq verify`` does with its own queue, and rarely what you want.

        Raises:
            ConfigError: an unknown state.
        """
        from durq.model import TERMINAL_STATES, JobState

        chosen = [str(s) for s in (states if states is not None else sorted(TERMINAL_STATES))]
        known = {s.value for s in JobState} - {"scheduled"}
        bad = [s for s in chosen if s not in known]
        if bad:
            raise ConfigError(f"unknown state(s) {bad}; purge takes {sorted(known)}")
        return self.store.purge(_check_name("queue", queue), chosen)

    def status(self) -> dict[str, Any]:
        """The status snapshot (see :func:`durq.observability.status.snapshot`)."""
        from durq.observability.status import snapshot

        snap = snapshot(self.store.status_data())
        snap["running"] = self.running_progress()
        return snap

    def run_until_idle(
        self, *, queues: Sequence[str] | None = None, max_jobs: int = 10_000,
        skip_backoff: bool = True,
    ) -> Any:  # fmt: skip
        """For tests: run the due jobs in this thread until none is left, with the real
        executor (retries with their backoff skipped, context, steps, batches, hooks).
        Returns a :class:`durq.worker.inline.DrainResult`; see :func:`durq.testing.drain`.

        Raises:
            ConfigError: no registered tasks, or ``max_jobs`` < 1.
        """
        from durq.worker.inline import drain

        return drain(self, queues=queues, max_jobs=max_jobs, skip_backoff=skip_backoff)

    def worker(self, **options: Any) -> Any:
        """A :class:`durq.worker.Worker` for this app; ``options`` are its arguments."""
        from durq.worker import Worker

        return Worker(self, **options)
