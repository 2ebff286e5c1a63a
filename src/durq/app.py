"""Durq: the facade users hold. Registers tasks, enqueues jobs, reads and steers them."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar, overload

from durq.alerts import (
    ALERT_SENT,
    ALERT_SUPPRESSED,
    DEFAULT_COOLDOWN,
    Alert,
    AlertHooks,
    check_alert_args,
)
from durq.batches import Batch, BatchStatus, current_batch_id
from durq.classify import Classifier, Rule
from durq.errors import (
    BatchNotFound,
    ConfigError,
    JobGone,
    JobNotFound,
    PayloadError,
    UnknownTask,
)
from durq.hooks import with_hooks
from durq.job import Job
from durq.limits import Hold, TaskLimits, with_limit
from durq.model import JobRecord, SweepSummary
from durq.observability import events
from durq.pause import QueuePause
from durq.payload import DEFAULT_PAYLOAD_LIMIT, check_structure, encode, encode_payload
from durq.periodic import DEFAULT_GRACE, Periodic
from durq.retry import Backoff, as_backoff
from durq.steps import StepRecord
from durq.store import Inserted, NewJob, Store, open_store
from durq.task import EnqueueOptions, Task

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_URL = "sqlite:///durq.db"
DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 3


#: Bounds on enqueue options, so that a value cannot overflow the store's integer columns.
PRIORITY_LIMIT = 2**31 - 1
MAX_ATTEMPTS_LIMIT = 1_000_000
MAX_DELAY = 100 * 365 * 86400.0  # a hundred years, in seconds
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z


def _check_name(what: str, value: str, longest: int = 200) -> str:
    if not isinstance(value, str) or not value or len(value) > longest:
        raise ConfigError(
            f"{what} must be a non-empty str of at most {longest} characters, not {value!r}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} must be valid Unicode text (no lone surrogates): {value!r}"
        ) from None
    if "\x00" in value:  # PostgreSQL text cannot hold it; refuse it on every backend alike
        raise ConfigError(f"{what} must not contain a NUL character: {value!r}")
    return value


def _check_text(what: str, value: object) -> None:
    """A filter value the database can hold: a str without lone surrogates."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} must be valid Unicode text (no lone surrogates): {value!r}"
        ) from None


def _check_int(what: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{what} must be an int from {low} to {high}, not {value!r}")


def _as_id(what: str, value: object) -> int:
    """A row id from the caller: ConfigError unless it is an integer (an int, or text or a
    float holding one); one outside the 64-bit range becomes -1, which no row has, so the
    lookup reports it not found instead of the driver raising OverflowError."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be an int, not {value!r}")
    try:
        number = int(value)  # type: ignore[call-overload]
        if isinstance(value, float) and number != value:
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be an int, not {value!r}") from None
    return number if -(2**63) <= number < 2**63 else -1


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _as_dict(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    try:
        return dict(value)
    except Exception as exc:  # noqa: BLE001 - a user Mapping may fail in any way
        raise PayloadError(
            f"{what} could not be read as a dict: {type(exc).__name__}: {exc}"
        ) from None


class Durq:
    """A durq application: one database, the tasks registered on it.

    Args:
        url: ``sqlite:///path/to/jobs.db``, a bare path, or None for ``$DURQ_URL`` or else
            ``./durq.db``. SQLite options: ``?synchronous=normal`` (faster, may lose the last
            commits on power loss), ``busy_timeout=`` and ``lock_timeout=`` (seconds).
        payload_limit: the largest payload accepted at enqueue, in bytes of JSON (1 MiB).
        classify: classifiers tried for every task after the task's own (see
            :func:`durq.classify.classify`).
        retry_unclassified: whether an error no classifier recognises is retried (True)
            or fails the job at once.
        clock: seconds since the epoch; tests inject one to move time.
        migrate: create or upgrade the schema when the database is first used (default).
            False opens only a database that already has this durq's schema, and writes no
            schema (``StoreError`` otherwise): for tools that must not change a database.

    The database is opened (and migrated) on first use, not at construction.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        payload_limit: int | None = DEFAULT_PAYLOAD_LIMIT,
        classify: Sequence[Rule | Classifier] = (),
        retry_unclassified: bool = True,
        clock: Callable[[], float] = time.time,
        migrate: bool = True,
    ) -> None:
        self.url = url or os.environ.get("DURQ_URL") or DEFAULT_URL
        self.payload_limit = payload_limit
        self.rules = tuple(classify)
        self.retry_unclassified = retry_unclassified
        self.clock = clock
        self.auto_migrate = migrate
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
                    self._store = open_store(
                        self.url, clock=self.clock, auto_migrate=self.auto_migrate
                    )
        return self._store

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

        Raises:
            ConfigError: a bad option, or another function already registered as ``name``.
        """

        def register(func: Callable[..., Any]) -> Task[Any, Any]:
            task_name = _check_name("task name", name or func.__name__)
            if max_attempts < 1:
                raise ConfigError(f"max_attempts must be >= 1, not {max_attempts}")
            if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
                raise ConfigError(f"timeout must be a positive number of seconds, not {timeout}")
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
                priority=int(priority),
                rules=rules,
                **self._deadline_defaults(deadline_in, notice_after, on_expire, on_slow),
                limits=TaskLimits.build(task_name, concurrency, concurrency_key, rate_limit),
                **self._hook_options(on_fail, hook_queue),
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

    def enqueue(
        self,
        task_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        queue: str | None = None,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        key: str | None = None,
        max_attempts: int | None = None,
        meta: Mapping[str, Any] | None = None,
        connection: Any = None,
        park: bool = False,
        park_ttl: float | None = None,
        deadline: float | datetime | None = None,
        deadline_in: float | None = None,
        notice_after: float | None = None,
    ) -> Job:
        """Store a job for ``task_name``, for producers that do not import the task.

        Returns once the job is committed (durable under the URL's ``synchronous`` mode).
        Defaults come from the registered task when this app has it, else queue
        ``default``, 3 attempts, priority 0.

        Args:
            task_name: the task's routing name.
            payload: the task's keyword arguments (a JSON-serialisable dict).
            queue: the queue to put it on.
            delay: seconds from now before it may run (>= 0).
            run_at: when it may run: seconds since the epoch or a timezone-aware datetime.
            priority: lower runs first.
            key: idempotency key; a second enqueue with the same ``(queue, key)`` returns
                the first job (also when two processes race) instead of adding one.
            max_attempts: attempts in all (>= 1).
            meta: free-form JSON tags stored with the job.
            connection: the caller's own open connection to the same database (a
                ``psycopg.Connection`` for PostgreSQL, a ``sqlite3.Connection`` on the same
                file for SQLite): the job is written inside the caller's transaction and
                exists if and only if that transaction commits (the outbox pattern).
            park: store the job ``parked``: it does not run until :meth:`adopt` (or ends
                with :meth:`cancel` or its park TTL); docs/features/parked.md.
            park_ttl: seconds after creation after which a parked job that was not adopted
                expires (state ``expired``, ``on_expire`` runs); only with ``park=True``.
            deadline: when the job expires if not finished: epoch seconds or a
                timezone-aware datetime (a point in time; docs/features/deadlines.md).
            deadline_in: the same as seconds after the job's ``created_at`` (give one of
                ``deadline`` and ``deadline_in``; default: the task's ``deadline_in``).
            notice_after: seconds after ``created_at`` after which ``on_slow`` runs once if
                the job is not finished (default: the task's ``notice_after``).

        Raises:
            PayloadError: the payload (or meta) is not JSON-serialisable, has a non-str dict
                key at any depth, or nests deeper than 500 levels; a ``TypeError``.
            PayloadTooLarge: the payload is over ``payload_limit`` bytes.
            ConfigError: a bad option (negative delay, naive datetime, both delay and run_at).
            StoreBusy: the database stayed locked past the lock timeout.
            StoreFull: (a StoreError) the disk is full; nothing was written.
            StoreReadOnly: (a StoreError) the database is read-only; nothing was written.
            StoreError: the database could not be written otherwise.
        """
        opts = EnqueueOptions(
            queue, delay, run_at, priority, key, max_attempts, meta, connection,
            park=park, park_ttl=park_ttl, deadline=deadline, deadline_in=deadline_in,
            notice_after=notice_after,
        )  # fmt: skip
        return self.enqueue_with(
            task_name, {} if payload is None else payload, opts, task=self.tasks.get(task_name)
        )

    def enqueue_with(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        opts: EnqueueOptions,
        *,
        task: Task[Any, Any] | None,
    ) -> Job:
        """:meth:`enqueue` with an :class:`EnqueueOptions` (used by tasks)."""
        new = self._with_payload(self._template(task_name, opts, task), payload, opts.key)
        (inserted,) = self.store.enqueue([new], connection=opts.connection)
        return self._job_after_insert(new, inserted, events.enabled())

    def enqueue_many_with(
        self,
        task_name: str,
        items: Sequence[Mapping[str, Any]],
        opts: EnqueueOptions,
        *,
        keys: Sequence[str | None] | None,
        task: Task[Any, Any] | None,
    ) -> list[Job]:
        """Insert many jobs of one task in one transaction; see :meth:`Task.enqueue_many`."""
        if keys is not None and len(keys) != len(items):
            raise ConfigError(f"{len(keys)} keys for {len(items)} items")
        if opts.key is not None:
            raise ConfigError("options(key=...) names one job; pass keys=[...] to enqueue_many")
        template = self._template(task_name, opts, task)
        if keys is None:
            news = [self._with_payload(template, item, None) for item in items]
        else:
            news = [
                self._with_payload(template, item, key)
                for item, key in zip(items, keys, strict=True)
            ]
        if not news:
            return []
        inserted = self.store.enqueue(news, connection=opts.connection)
        log = events.enabled()
        return [self._job_after_insert(n, i, log) for n, i in zip(news, inserted, strict=True)]

    def _template(
        self, task_name: str, opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> NewJob:
        """Validate the options once; returns a NewJob without payload or key."""
        _check_name("task name", task_name)
        queue = opts.queue if opts.queue is not None else (task.queue if task else DEFAULT_QUEUE)
        _check_name("queue", queue)
        max_attempts = (
            opts.max_attempts
            if opts.max_attempts is not None
            else (task.max_attempts if task else DEFAULT_MAX_ATTEMPTS)
        )
        _check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        priority = opts.priority if opts.priority is not None else (task.priority if task else 0)
        _check_int("priority", priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
        run_at: float | None = None
        delay = 0.0
        if opts.delay is not None and opts.run_at is not None:
            raise ConfigError("give delay or run_at, not both")
        if opts.delay is not None:
            if not (_is_number(opts.delay) and 0 <= opts.delay <= MAX_DELAY):
                raise ConfigError(
                    f"delay must be a number of seconds from 0 to {MAX_DELAY:.0f}, not {opts.delay!r}"
                )
            delay = float(opts.delay)
        else:
            run_at = _point_in_time("run_at", opts.run_at)
        meta = None
        if opts.meta:
            if not isinstance(opts.meta, Mapping):
                raise PayloadError(f"meta must be a dict, not {type(opts.meta).__name__}")
            meta_dict = _as_dict(opts.meta, "meta")
            check_structure(meta_dict, "meta")
            meta = encode(meta_dict, what="meta", limit=self.payload_limit)
        batch_id = current_batch_id(self)  # inside `with dq.batch()`: the job joins it
        new = NewJob(
            queue, task_name, "", priority, run_at, max_attempts, None, meta, delay, batch_id
        )
        extras = self._parked_deadline_fields(opts, task)
        return replace(new, **extras) if extras else new

    def _with_payload(self, t: NewJob, payload: Mapping[str, Any], key: str | None) -> NewJob:
        if isinstance(payload, Mapping) and not isinstance(payload, dict):
            payload = _as_dict(payload, "payload")
        body = encode_payload(payload, self.payload_limit)
        task = self.tasks.get(t.task)
        if task is not None:  # the producer knows the function: refuse what cannot fit it now
            problem = task.payload_problem(payload)
            if problem is not None:
                raise PayloadError(f"payload does not fit {task.name}(): {problem}")
        if key is not None:
            _check_name("key", key, 1000)
        new = NewJob(
            t.queue, t.task, body, t.priority, t.run_at, t.max_attempts, key, t.meta, t.delay,
            t.batch_id,
            t.park, t.park_ttl, t.deadline, t.deadline_in, t.notice_after,
        )  # fmt: skip
        new = with_hooks(new, task)  # on_fail flag, hook queue (durq.hooks)
        return with_limit(new, task.limits if task is not None else None, payload)

    def _job_after_insert(self, new: NewJob, ins: Inserted, log: bool) -> Job:
        if not ins.created:
            record = self.store.get(ins.id)
            if record is None:  # pruned between the insert and the read
                raise JobNotFound(f"job {ins.id} vanished")
            return Job(self.store, record)
        if log:
            events.emit(
                events.JOB_ENQUEUED, id=ins.id, queue=new.queue, task=new.task, run_at=ins.run_at
            )
        record = JobRecord(
            ins.id, new.queue, new.task, new.payload, new.priority, ins.run_at, 0, new.max_attempts,
            "queued", None, None, None, new.key, ins.created_at, None, None, None, None, "[]",
            new.meta, 0, batch_id=new.batch_id,
        )  # fmt: skip
        if new.has_extras:
            record = self._record_extras(record, new, ins)
        return Job(self.store, record)

    # -- reading and steering -------------------------------------------------------------

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
    ) -> list[Job]:
        """Jobs, newest first, filtered by state (incl. ``scheduled``), queue and task.

        Raises:
            ConfigError: an unknown state, a queue or task that is not valid Unicode text
                (a lone surrogate, as from a non-UTF-8 command line), or a ``limit`` that is not an int from 1 to
                2**63 - 1 (the largest the stores' integers hold).
        """
        from durq.model import JobState

        if state is not None and state not in {s.value for s in JobState}:
            raise ConfigError(f"unknown state {state!r}; one of {[s.value for s in JobState]}")
        _check_int("limit", limit, 1, 2**63 - 1)
        for what, value in (("queue", queue), ("task", task)):
            if value is not None:
                _check_text(what, value)
        records = self.store.list_jobs(state=state, queue=queue, task=task, limit=int(limit))
        return [Job(self.store, r) for r in records]

    def retry(self, job_id: int) -> Job:
        """Put a failed, cancelled or expired job back in the queue with a fresh attempt budget.

        Its error history is kept.

        Raises:
            JobNotFound: no such job.
            JobGone: the job is not failed, cancelled or expired (nothing changed).
        """
        if not self.store.retry(_as_id("job id", job_id)):
            job = self.get(job_id)
            raise JobGone(
                f"job {job_id} is {job.state}; only failed, cancelled or expired jobs can be retried"
            )
        return self.get(job_id)

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

    def worker(self, **options: Any) -> Any:
        """A :class:`durq.worker.Worker` for this app; ``options`` are its arguments."""
        from durq.worker import Worker

        return Worker(self, **options)

    # -- pause and alerts --

    def pause(self, queue: str, reason: str, source: str = "admin") -> bool:
        """Pause ``queue``: workers claim nothing more from it until it is resumed; jobs
        already running finish. Enqueues still go in. Persisted in the database, so every
        worker and every restart sees it.

        The first pause wins: pausing a queue that is paused already changes nothing (its
        reason and source stay) and returns False. A claim that had already started when the
        pause committed may still take jobs (each claim reads the pause in its own statement).

        Args:
            queue: the queue's name.
            reason: why (shown by ``durq status``).
            source: who pauses: ``admin`` (default), ``auto`` is used by tasks raising
                :class:`durq.PauseQueue`, or any name (e.g. ``env`` for a pause an app
                keeps from its configuration); see :meth:`resume`.

        Returns:
            True when this call paused the queue, False when it was paused already.

        Raises:
            ConfigError: an empty or over-long queue or source (1..200 characters), or a
                reason that is not a str.
        """
        _check_name("queue", queue)
        _check_name("source", source)
        if not isinstance(reason, str):
            raise ConfigError(f"reason must be a str, not {type(reason).__name__}")
        done = self.store.pause_queue(queue, reason, source)
        if done:
            events.emit("queue_paused", queue=queue, source=source, reason=reason)
        return done

    def resume(self, queue: str, source: str | None = None) -> bool:
        """Clear the pause of ``queue``; workers claim from it again at their next claim.

        Args:
            queue: the queue's name.
            source: when given, only a pause made by this source is cleared. An app that
                keeps a pause of its own (``dq.pause(q, "maintenance", source="env")``) can
                let its admin endpoint call ``dq.resume(q, source="admin")``, which then
                cannot clear it. None (default, and ``durq resume``) clears any pause.

        Returns:
            True when this call cleared a pause; False when the queue was not paused, or was
            paused by another source than ``source`` (nothing changed).

        Raises:
            ConfigError: an empty or over-long queue or source.
        """
        _check_name("queue", queue)
        if source is not None:
            _check_name("source", source)
        done = self.store.resume_queue(queue, source)
        if done:
            events.emit("queue_resumed", queue=queue, source=source)
        return done

    def paused(self, queue: str) -> QueuePause | None:
        """The pause of ``queue`` (:class:`durq.pause.QueuePause`: queue, reason, source,
        paused_at), or None when it is not paused.

        Raises:
            ConfigError: an empty or over-long queue name.
        """
        return self.store.queue_pause(_check_name("queue", queue))

    def on_alert(self, fn: F) -> F:
        """Register ``fn(alert)`` to receive alerts (use as ``@dq.on_alert``).

        ``alert`` is a :class:`durq.Alert`. Hooks run in the process that raised the alert
        (a worker raises them for tasks of its app, e.g. on :class:`durq.PauseQueue`; a
        worker runs the app's module, so hooks registered there are present), after the
        alert was recorded, one after another; one that raises is logged
        (``alert_hook_failed``) and never breaks the caller. Returns ``fn``.

        Raises:
            ConfigError: ``fn`` is not callable.
        """
        self._alert_hooks.add(fn)
        return fn

    def alert(
        self,
        key: str,
        message: str,
        *,
        severity: str = "warning",
        cooldown: float = DEFAULT_COOLDOWN,
    ) -> Alert | None:
        """Raise an alert, at most once per ``cooldown`` per ``key`` across every process
        on this database.

        In one statement on the ``alerts`` table: when ``key`` was never sent, or was last
        sent ``cooldown`` seconds ago or more (store clock; the database's on PostgreSQL),
        the alert is sent: the hooks of :meth:`on_alert` run here, after the commit, with
        :attr:`Alert.suppressed` counting the raises of this key that were not sent since
        the previous send. Otherwise it is counted and not sent. Two processes raising the
        same key at the same instant send once.

        Args:
            key: the cooldown key (1..200 characters), e.g. ``pause:downloads``.
            message: the alert's text.
            severity: ``info``, ``warning`` (default), ``error`` or ``critical``.
            cooldown: seconds (>= 0) within which the same key is counted, not sent;
                default 600 (10 minutes, issue 4).

        Returns:
            The :class:`durq.Alert` handed to the hooks, or None when it was suppressed.

        Raises:
            ConfigError: a bad key, message, severity or cooldown (nothing recorded).
            StoreBusy, StoreError: the alert could not be recorded (no hook ran).
        """
        check_alert_args(key, message, severity, cooldown)
        sent = self.store.raise_alert(key, message, severity, float(cooldown))
        if sent is None:
            events.emit(ALERT_SUPPRESSED, key=key)
            return None
        events.emit(ALERT_SENT, logging.WARNING, key=key, suppressed=sent.suppressed)
        self._alert_hooks.deliver(sent)
        return sent

    @property
    def _alert_hooks(self) -> AlertHooks:
        hooks = self.__dict__.get("_durq_alert_hooks")
        if hooks is None:  # created on first use; setdefault keeps one under threads
            hooks = self.__dict__.setdefault("_durq_alert_hooks", AlertHooks())
        assert isinstance(hooks, AlertHooks)
        return hooks

    # -- batches --

    def batch(
        self,
        on_complete: Task[Any, Any] | str | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        queue: str | None = None,
    ) -> Batch:
        """A batch: ``with dq.batch(on_complete=task, meta={...}) as batch:``.

        Every job enqueued inside the block on this app, in this thread or asyncio task,
        joins the batch (a keyed enqueue that returns an existing job does not). When the
        block exits the batch is sealed; when its last member is terminal (succeeded,
        failed, cancelled, expired) ``on_complete`` is enqueued exactly once, in the same
        transaction as that member's state change, with keyword arguments ``batch_id``
        (int), ``outcome`` (``completed`` if every member succeeded, ``failed`` if none did,
        else ``partial``), ``counts`` (dict state -> number of members) and ``meta`` (dict).
        ``dq.retry`` on a member reopens a completed batch; it fires again when it lands.
        An empty batch fires ``completed`` with empty counts when the block exits. If the
        block raises, unfinished members are cancelled, the batch fires with ``partial`` or
        ``failed`` (never ``completed``) and ``batch_status().aborted`` says why.

        Args:
            on_complete: the callback task (a Task or a task name), or None for none.
            meta: JSON-serialisable dict handed to the callback as ``meta``.
            queue: the callback job's queue (default: the task's queue, else ``default``).

        Raises:
            ConfigError: a bad queue, or ``on_complete`` cannot take the four keyword
                arguments; entering a batch block while another is open for this app.
            PayloadError: ``meta`` is not a JSON-serialisable dict.
            StoreError: on entering or leaving the block, the database could not be written.
        """
        from durq.task import Task as TaskClass

        task: Task[Any, Any] | None = None
        name: str | None = None
        if isinstance(on_complete, TaskClass):
            task, name = on_complete, on_complete.name
        elif callable(on_complete):
            raise ConfigError(
                f"on_complete must be a task or a task name, not the plain function "
                f"{getattr(on_complete, '__qualname__', on_complete)!r}: decorate it with "
                f"@dq.task (the callback runs as a job)"
            )
        elif on_complete is not None:
            name = _check_name("on_complete task name", on_complete)
            task = self.tasks.get(name)
        if task is not None:
            probe = {"batch_id": 0, "outcome": "completed", "counts": {}, "meta": {}}
            problem = task.payload_problem(probe)
            if problem is not None:
                raise ConfigError(
                    f"on_complete {task.name}() must accept batch_id, outcome, counts and "
                    f"meta as keyword arguments: {problem}"
                )
        if meta is not None and not isinstance(meta, Mapping):
            raise PayloadError(f"meta must be a dict, not {type(meta).__name__}")
        meta_json = encode(_as_dict(meta or {}, "meta"), what="meta", limit=self.payload_limit)
        chosen = queue if queue is not None else (task.queue if task else DEFAULT_QUEUE)
        return Batch(
            self,
            name,
            _check_name("queue", chosen),
            task.priority if task else 0,
            task.max_attempts if task else DEFAULT_MAX_ATTEMPTS,
            meta_json,
        )

    def batch_status(self, batch_id: int) -> BatchStatus:
        """A batch's state, last outcome, member counts by state, meta and times fired.

        Raises:
            BatchNotFound: no batch with this id.
        """
        record = self.store.get_batch(_as_id("batch id", batch_id))
        if record is None:
            raise BatchNotFound(f"no batch with id {batch_id}")
        return BatchStatus.from_record(record)

    def seal_batch(self, batch_id: int, *, aborted: str | None = None) -> BatchStatus:
        """Seal a batch left ``building`` by a producer that died inside its block (the
        block seals its own batch; this is for recovery). With ``aborted`` (a reason) its
        unfinished members are cancelled first. Returns the status after sealing.

        Raises:
            BatchNotFound: no batch with this id.
            JobGone: the batch was already sealed (nothing changed).
        """
        if aborted is not None:
            _check_text("aborted", aborted)
        if not self.store.seal_batch(_as_id("batch id", batch_id), aborted):
            status = self.batch_status(batch_id)
            raise JobGone(f"batch {batch_id} is already {status.state}; it was sealed before")
        return self.batch_status(batch_id)

    # -- results, retention and steps --

    def running_progress(self, limit: int = 20) -> list[dict[str, Any]]:
        """The running jobs (newest first, at most ``limit``) with the progress their
        tasks last reported: ``[{"id", "queue", "task", "attempt", "started_at",
        "worker_id", "progress"}]`` where ``progress`` is ``{"fraction", "message", ...}``
        or None. Part of :meth:`status` (key ``running``)."""
        return [
            {
                "id": j.id,
                "queue": j.queue,
                "task": j.task,
                "attempt": j.attempts,
                "started_at": j.started_at,
                "worker_id": j.worker_id,
                "progress": j.progress,
            }
            for j in (Job(self.store, r) for r in self.store.running_jobs(limit))
        ]

    def prune(
        self,
        older_than: float | str | Mapping[str, float | str | None] | None = None,
        *,
        states: Sequence[str] | None = None,
        queue: str | None = None,
        chunk: int = 1000,
    ) -> int:
        """Delete finished jobs (succeeded, failed, cancelled, expired) whose
        ``finished_at`` is older than a cutoff, with their steps. Returns how many.

        Queued, scheduled and running jobs are never deleted, whatever the arguments: the
        store's delete statement itself only matches the four terminal states. Deletion
        goes ``chunk`` rows per transaction, so a big prune does not hold SQLite's write
        lock for long. Ages are measured on the store's clock (PostgreSQL: the database's).

        Args:
            older_than: seconds (or ``"7d"``-style text: s, m, h, d, w) for every chosen
                state; or a dict ``{state: seconds | None}`` (None keeps that state); or
                None for the worker's defaults (succeeded 7 days, failed, cancelled and
                expired 30 days: :data:`durq.retention.DEFAULT_RETENTION`).
            states: only these terminal states (default: all that ``older_than`` covers).
            queue: only this queue (default: every queue).
            chunk: rows deleted per transaction (>= 1).

        Raises:
            ConfigError: a state that is not terminal or unknown, a bad age or chunk.
            StoreBusy, StoreError: the database could not be written; chunks already
                deleted stay deleted.
        """
        from durq.retention import policy, prune

        if queue is not None:
            _check_name("queue", queue)
        counts = prune(self.store, policy(older_than, states), queue, chunk)
        return sum(counts.values())

    def steps(self, job_id: int) -> list[StepRecord]:
        """The steps a job recorded with ``ctx.step``, oldest first
        (:class:`durq.steps.StepRecord`: name, result JSON, attempt, created_at).

        Raises:
            JobNotFound: no such job.
        """
        found = self.store.list_steps(_as_id("job id", job_id))
        if not found:
            self.get(job_id)  # JobNotFound when the job does not exist
        return found

    def clear_steps(self, job_id: int) -> int:
        """Forget a job's recorded steps, so that its next run (e.g. after :meth:`retry`,
        which keeps them and resumes) runs every step again. Returns how many.

        Raises:
            JobNotFound: no such job.
            JobGone: the job is running (its attempt may be using them); nothing changed.
        """
        n = self.store.clear_steps(_as_id("job id", job_id))
        if n == 0:
            job = self.get(job_id)
            if job.state == "running":
                raise JobGone(f"job {job_id} is running; its steps cannot be cleared now")
        return n

    # -- periodic --

    @property
    def periodics(self) -> dict[str, Periodic]:
        """The periodic schedules registered with :meth:`periodic`, by name."""
        registry: dict[str, Periodic] = self.__dict__.setdefault("_periodics", {})
        return registry

    def periodic(
        self,
        cron: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        catch_up: int = 1,
        grace: float = DEFAULT_GRACE,
        slot_arg: str | None = None,
    ) -> Callable[[Callable[..., Any] | Task[Any, Any]], Task[Any, Any]]:
        """Run a task on a cron schedule: ``@dq.periodic("*/5 * * * *", tz="Europe/Berlin")``.

        Put it above ``@dq.task(...)`` to schedule a task with its own options, or use it
        alone on a plain function, which is then registered as a task with the defaults
        (and ``queue``). It returns the :class:`Task`, so both forms can still be enqueued
        by hand. A task may carry several schedules (give each a ``name``).

        Each *slot* (occurrence) is enqueued once, by the scheduler in the worker (the
        elected leader; on SQLite every worker, harmlessly), as a job with ``run_at`` = the
        slot, the key ``periodic:<name>:<slot epoch seconds>`` and
        ``meta={"periodic": name, "slot": epoch}``. The last slot enqueued is stored per
        schedule and only moves forward, in the same transaction as the job. A schedule seen
        for the first time starts with the next slot. For daylight-saving changes see
        :mod:`durq.periodic`.

        Args:
            cron: croniter syntax, ``minute hour day month weekday``, an optional 6th field
                for seconds, or an alias such as ``@hourly``.
            tz: the IANA time zone the expression is read in (default ``UTC``).
            name: the schedule's unique name (default: the task name). Renaming a schedule
                starts it afresh.
            payload: the task's keyword arguments for every job (JSON).
            queue, priority, max_attempts: job options (default: the task's).
            catch_up: after the scheduler was down, enqueue at most this many missed slots,
                the latest ones (default 1; 0 skips missed slots).
            grace: seconds a slot may be late and still count as on time rather than
                missed (default 60).
            slot_arg: when given, each job also receives its slot's epoch seconds (an int)
                as this keyword argument.

        Raises:
            ConfigError: an invalid cron expression or time zone, a bad option, or another
                schedule already registered under ``name``.
            PayloadError: ``payload`` is not JSON or does not fit the task's signature.
        """

        def register(target: Callable[..., Any] | Task[Any, Any]) -> Task[Any, Any]:
            if payload is not None and not isinstance(payload, Mapping):
                raise PayloadError(f"payload must be a dict, not {type(payload).__name__}")
            known = set(self.tasks)
            task = (
                target
                if isinstance(target, Task)
                else self.task(queue=queue or DEFAULT_QUEUE)(target)
            )
            try:
                return self._add_periodic(
                    task,
                    cron,
                    tz,
                    name,
                    payload,
                    queue,
                    priority,
                    max_attempts,
                    catch_up,
                    grace,
                    slot_arg,
                )
            except BaseException:
                if task.name not in known:  # a refused schedule leaves no task behind
                    self.tasks.pop(task.name, None)
                raise

        return register

    def _add_periodic(
        self,
        task: Task[Any, Any],
        cron: str,
        tz: str,
        name: str | None,
        payload: Mapping[str, Any] | None,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        catch_up: int,
        grace: float,
        slot_arg: str | None,
    ) -> Task[Any, Any]:
        """Check and record one schedule of :meth:`periodic` (see there for the arguments)."""
        if task.app is not self:
            raise ConfigError(f"task {task.name!r} is registered with another Durq app")
        schedule = Periodic(
            name=_check_name("periodic name", name or task.name),
            cron=cron,
            tz=tz,
            task=task.name,
            payload=_as_dict(payload or {}, "payload"),
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            catch_up=catch_up,
            grace=float(grace) if _is_number(grace) else grace,
            slot_arg=slot_arg,
        )
        # the jobs it will make must be valid now, not at the first slot
        key = f"periodic:{schedule.name}:0"
        opts = EnqueueOptions(queue, None, 0.0, priority, key, max_attempts, None, None)
        self._with_payload(self._template(task.name, opts, task), schedule.job_payload(0), key)
        existing = self.periodics.get(schedule.name)
        if existing is not None and existing != schedule:
            raise ConfigError(f"a periodic schedule named {schedule.name!r} already exists")
        self.periodics[schedule.name] = schedule
        return task

    # -- parked / deadlines --

    def adopt(self, job_id: int) -> Job:
        """Move a parked job to the queue: it runs now (or at its ``run_at`` if that is
        later). Of ``adopt(id)`` and ``cancel(id, parked_only=True)`` racing on one parked job
        exactly one wins (each is one conditional UPDATE on ``state = 'parked'``); the other
        raises :class:`durq.JobGone`.

        Returns:
            The job as stored after the change (``queued`` or ``scheduled``).

        Raises:
            JobNotFound: no such job.
            JobGone: the job is not parked (adopted, cancelled or expired already), or its
                park TTL or deadline has passed (the sweeper expires it); nothing changed.
        """
        if not self.store.adopt(_as_id("job id", job_id)):
            job = self.get(job_id)
            if job.state == "parked":
                raise JobGone(f"job {job_id} is past its park TTL or deadline; it is expiring")
            raise JobGone(f"job {job_id} is {job.state}, not parked; it cannot be adopted")
        return self.get(job_id)

    def sweep(self, limit: int = 500) -> SweepSummary:
        """Run one deadline sweeper pass now (workers run it on the leader every
        ``sweep_interval``); see :meth:`durq.store.base.Store.sweep` for what it does.

        Args:
            limit: at most this many jobs per step (expire, expire parked, notice).

        Returns:
            A :class:`durq.model.SweepSummary` with the expired and noticed job ids.

        Raises:
            StoreBusy, StoreError: the database could not be written.
        """
        from durq.deadlines import HOOK_MAX_ATTEMPTS

        return self.store.sweep(HOOK_MAX_ATTEMPTS, limit)

    @staticmethod
    def _deadline_defaults(
        deadline_in: float | None,
        notice_after: float | None,
        on_expire: Callable[[Job], Any] | None,
        on_slow: Callable[[Job], Any] | None,
    ) -> dict[str, Any]:
        """Checked task defaults for deadlines (keyword arguments of :class:`Task`)."""
        for what, value in (("deadline_in", deadline_in), ("notice_after", notice_after)):
            _check_seconds(what, value)
        for what, hook in (("on_expire", on_expire), ("on_slow", on_slow)):
            if hook is not None and not callable(hook):
                raise ConfigError(f"{what} must be a callable fn(job), not {hook!r}")
        return {
            "deadline_in": None if deadline_in is None else float(deadline_in),
            "notice_after": None if notice_after is None else float(notice_after),
            "on_expire": on_expire,
            "on_slow": on_slow,
        }

    @staticmethod
    def _parked_deadline_fields(
        opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> dict[str, Any]:
        """Checked parked / deadline options of one enqueue (fields of :class:`NewJob`);
        empty when there are none."""
        if not isinstance(opts.park, bool):
            raise ConfigError(f"park must be True or False, not {opts.park!r}")
        _check_seconds("park_ttl", opts.park_ttl)
        if opts.park_ttl is not None and not opts.park:
            raise ConfigError("park_ttl is only for parked jobs (give park=True)")
        _check_seconds("deadline_in", opts.deadline_in)
        _check_seconds("notice_after", opts.notice_after)
        if opts.deadline is not None and opts.deadline_in is not None:
            raise ConfigError("give deadline (a point in time) or deadline_in (seconds), not both")
        deadline = _point_in_time("deadline", opts.deadline)
        deadline_in = opts.deadline_in
        if deadline is None and deadline_in is None and task is not None:
            deadline_in = task.deadline_in
        notice_after = opts.notice_after
        if notice_after is None and task is not None:
            notice_after = task.notice_after
        if not opts.park and deadline is None and deadline_in is None and notice_after is None:
            return {}
        return {
            "park": opts.park,
            "park_ttl": None if opts.park_ttl is None else float(opts.park_ttl),
            "deadline": deadline,
            "deadline_in": None if deadline_in is None else float(deadline_in),
            "notice_after": None if notice_after is None else float(notice_after),
        }

    @staticmethod
    def _record_extras(record: JobRecord, new: NewJob, ins: Inserted) -> JobRecord:
        """The row as the store wrote it: the same arithmetic as its SET_EXTRAS statement."""
        created = ins.created_at
        if new.park:
            record.state = "parked"
        if new.park_ttl is not None:
            record.park_expires_at = created + new.park_ttl
        if new.deadline is not None:
            record.deadline = new.deadline
        elif new.deadline_in is not None:
            record.deadline = created + new.deadline_in
        if new.notice_after is not None:
            record.notice_at = created + new.notice_after
        return record

    # -- limits --

    def limit(
        self, name: str, concurrency: int, *, lease: float = 60.0, timeout: float | None = None
    ) -> Hold:
        """A slot of the named limit ``name`` for code outside the queue.

        ``with dq.limit("downloads", 3):`` waits until jobs of key ``"downloads"`` in
        ``running`` plus live holds of it are fewer than ``concurrency``, then holds one
        slot until the block ends; queued jobs of that key are not claimed while the slots
        are taken. The hold is a row with a lease, extended by a thread every
        ``lease / 3`` s, so a process that dies holding it frees the slot after ``lease``.

        Args:
            name: the limit key (a task's ``concurrency_key``, or its name by default).
            concurrency: the limit (>= 1), checked against the shared count at acquire.
            lease: seconds a hold survives without an extension (default 60).
            timeout: seconds to wait for a slot (default: for ever).

        Raises:
            ConfigError: bad arguments.
            LimitTimeout: no slot within ``timeout`` (nothing held).
            StoreError: the database could not be used.
        """
        return Hold(self, name, concurrency, lease=lease, timeout=timeout)

    def limits(self) -> list[dict[str, Any]]:
        """Every limit key in use: ``name``, ``running``, ``held``, ``queued``,
        ``concurrency`` (the largest stored on its jobs, or None)."""
        return [
            {
                "name": u.name,
                "running": u.running,
                "held": u.held,
                "queued": u.queued,
                "concurrency": u.concurrency,
            }
            for u in self.store.limit_usage()
        ]

    # -- hooks --

    def find(self, queue: str, key: str) -> Job | None:
        """The job of ``queue`` that holds the idempotency key ``key``, or None.

        Keys are unique per queue (a second enqueue with the same ``(queue, key)`` returns
        the first job), so this finds a job from the key its producer chose, without storing
        its id. A hook job is found the same way: ``dq.find(hook_queue, "durq.fail:<id>")``.

        Raises:
            ConfigError: ``queue`` or ``key`` is not a non-empty str (key: up to 1000
                characters) of valid Unicode text.
            StoreError: the database could not be read.
        """
        _check_name("queue", queue)
        _check_name("key", key, 1000)
        record = self.store.find(queue, key)
        return None if record is None else Job(self.store, record)

    @staticmethod
    def _hook_options(
        on_fail: Callable[[Job], Any] | None, hook_queue: str | None
    ) -> dict[str, Any]:
        """Checked ``on_fail`` and ``hook_queue`` of a task (keyword arguments of Task)."""
        if on_fail is not None and not callable(on_fail):
            raise ConfigError(f"on_fail must be a callable fn(job), not {on_fail!r}")
        if hook_queue is not None:
            _check_name("hook_queue", hook_queue)
        return {"on_fail": on_fail, "hook_queue": hook_queue}


def _point_in_time(what: str, value: object) -> float | None:
    """A point in time given as epoch seconds or a timezone-aware datetime (None stays None).

    Raises:
        ConfigError: a naive datetime, or not a number of epoch seconds in range.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(
                f"{what} must be timezone-aware (e.g. datetime.now(timezone.utc)), or epoch seconds"
            )
        return value.timestamp()
    if not (_is_number(value) and 0 <= value <= MAX_EPOCH):  # type: ignore[operator]
        raise ConfigError(f"{what} must be epoch seconds or a datetime, not {value!r}")
    return float(value)  # type: ignore[arg-type]


def _check_seconds(what: str, value: object) -> None:
    """A duration option: None, or a number of seconds above 0 and at most MAX_DELAY."""
    if value is not None and not (_is_number(value) and 0 < value <= MAX_DELAY):  # type: ignore[operator]
        raise ConfigError(
            f"{what} must be a number of seconds above 0 and at most {MAX_DELAY:.0f}, not {value!r}"
        )
