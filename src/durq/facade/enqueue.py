"""EnqueueFacade: how :class:`durq.Durq` stores jobs — ``dq.enqueue``, the enqueue paths
of tasks (``task.enqueue``, ``task.enqueue_many``) and the row template they share."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, cast

from durq.batches import current_batch_id
from durq.checks import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    MAX_DELAY,
    MAX_EPOCH,  # noqa: F401 - still importable from durq.app, as before the split
    PRIORITY_LIMIT,
    _as_dict,
    _check_int,
    _check_name,
    _is_number,
    _point_in_time,
)
from durq.codecs import nul_problem
from durq.dependencies import with_workflow, workflow_fields
from durq.errors import (
    ConfigError,
    JobNotFound,
    PayloadError,
)
from durq.facade.base import FacadeBase
from durq.facade.deadlines import check_due_before_expiry
from durq.hooks import with_hooks
from durq.job import Job
from durq.limits import with_limit
from durq.model import Inserted, InsertedRows, JobRecord, NewJob
from durq.observability import events, tracing
from durq.payload import (
    check_structure,
    encode,
    encode_payload,
)
from durq.store import Store, check_outbox
from durq.task import NO_OPTIONS, EnqueueOptions, Task

if TYPE_CHECKING:
    from durq.registry import Registry


class EnqueueFacade(FacadeBase):
    """The enqueue methods of :class:`durq.Durq` (a mixin; see :mod:`durq.facade`)."""

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
        after: Sequence[Any] = (),
        on_parent_failure: str | None = None,
        tags: Sequence[str] = (),
        unique: str | None = None,
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
            after, on_parent_failure: parent jobs (ids or Jobs): the job waits until each
                is terminal; a failed one cancels it (``"cancel"``) or not (``"run"``).
            tags: up to 50 str, indexed (``dq.jobs(tag=...)``); unique: with ``key``,
                ``"active"`` or ``"period:N"`` (docs/features/dependencies.md, tags.md,
                uniqueness.md).

        Raises:
            ParentNotFound: (a JobNotFound and ConfigError) a parent does not exist; nothing
                was written.
            PayloadError: the payload (or meta) is not JSON-serialisable, has a non-str dict
                key at any depth, or nests deeper than 500 levels; a ``TypeError``; on
                PostgreSQL, the app's codec stored it with a NUL character.
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
            notice_after=notice_after, after=after, on_parent_failure=on_parent_failure,
            tags=tags, unique=unique,
        )  # fmt: skip
        return self.enqueue_with(
            task_name, {} if payload is None else payload, opts, task=self.tasks.get(task_name)
        )

    async def aenqueue(
        self, task_name: str, payload: Mapping[str, Any] | None = None, **options: Any
    ) -> Job:
        """:meth:`enqueue` for asyncio callers: the store call runs in a thread, so the
        event loop is not blocked (a batch opened with ``async with dq.abatch()`` in this
        asyncio task still takes the job). Same options and errors as :meth:`enqueue`."""
        return await asyncio.to_thread(self.enqueue, task_name, payload, **options)

    def enqueue_with(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        opts: EnqueueOptions,
        *,
        task: Task[Any, Any] | None,
    ) -> Job:
        """:meth:`enqueue` with an :class:`EnqueueOptions` (used by tasks)."""
        if tracing.enabled():  # a span for the enqueue; its context travels in the meta
            queue = opts.queue or (task.queue if task else DEFAULT_QUEUE)
            with tracing.send_span(queue, task_name) as (span, carrier):
                opts = replace(opts, meta=tracing.with_context(opts.meta, carrier))
                job = self._enqueue_one(task_name, payload, opts, task)
                span.set_attribute("messaging.message.id", str(job.id))
                return job
        return self._enqueue_one(task_name, payload, opts, task)

    def _enqueue_one(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        opts: EnqueueOptions,
        task: Task[Any, Any] | None,
    ) -> Job:
        new = self._with_payload(self._template(task_name, opts, task), payload, opts.key)
        connection = opts.connection
        store = self.store if connection is None else self._store_for(connection)
        (inserted,) = store.enqueue([new], connection=connection)
        job = self._job_after_insert(new, inserted, events.enabled())
        if self.eager and opts.connection is None:
            self._run_eagerly()
            job.refresh()
        return job

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
        if opts.unique is not None:
            if keys is None:
                raise ConfigError(
                    f"unique={opts.unique!r} with enqueue_many needs keys=[...]: each item's "
                    "key is its unique key (an item whose key is None has none)"
                )
            # the mode is checked (and kept on the template) as for one job with a key;
            # each item's own key from keys= replaces the placeholder (with_workflow)
            opts = replace(opts, key="")
        if tracing.enabled():
            queue = opts.queue or (task.queue if task else DEFAULT_QUEUE)
            with tracing.send_span(queue, task_name) as (span, carrier):
                opts = replace(opts, meta=tracing.with_context(opts.meta, carrier))
                span.set_attribute("messaging.batch.message_count", len(items))
                return self._enqueue_many(task_name, items, opts, keys, task)
        return self._enqueue_many(task_name, items, opts, keys, task)

    def _enqueue_many(
        self,
        task_name: str,
        items: Sequence[Mapping[str, Any]],
        opts: EnqueueOptions,
        keys: Sequence[str | None] | None,
        task: Task[Any, Any] | None,
    ) -> list[Job]:
        template = self._template(task_name, opts, task)
        bodies = self._plain_payloads(template, items) if keys is None else None
        log = events.enabled()
        if bodies is not None:  # the rows differ only in their payload
            if not bodies:
                return []
            if opts.connection is None and template.plain:
                # no NewJob or Inserted per row: the store builds the Jobs from the ids
                build = functools.partial(self._rows_jobs, template, bodies)
                jobs = self.store.enqueue_rows(template, bodies, build)
                if log:  # after the commit, as for any enqueue
                    for job in jobs:
                        events.emit(events.JOB_ENQUEUED, id=job.id, queue=template.queue,
                                    task=template.task, run_at=job.run_at)  # fmt: skip
            else:  # the caller's connection, a batch, parked / deadline columns
                news = [template.with_payload(body) for body in bodies]
                inserted = self._store_for(opts.connection).enqueue(
                    news, connection=opts.connection
                )
                if not log and not template.has_extras:
                    jobs = self._plain_jobs(template, bodies, inserted)
                else:
                    jobs = [
                        self._job_after_insert(n, i, log)
                        for n, i in zip(news, inserted, strict=True)
                    ]
        else:
            news = []
            for i, item in enumerate(items):
                try:
                    news.append(
                        self._with_payload(template, item, None if keys is None else keys[i])
                    )
                except (PayloadError, ConfigError) as exc:
                    _raise_for_item(exc, i, len(items))
            if not news:
                return []
            inserted = self._store_for(opts.connection).enqueue(news, connection=opts.connection)
            jobs = [self._job_after_insert(n, i, log) for n, i in zip(news, inserted, strict=True)]
        if self.eager and opts.connection is None:
            self._run_eagerly()
            for job in jobs:
                job.refresh()
        return jobs

    def _store_for(self, connection: Any) -> Store:
        """The store, for an enqueue on ``connection`` (the caller's transaction; None for
        durq's own). Before the store's first opening on an outbox enqueue, the caller's
        connection is checked (:func:`durq.store.check_outbox`): opening a new SQLite file
        would wait for the write lock that transaction holds.

        Raises:
            ConfigError: see :func:`durq.store.check_outbox`.
        """
        if connection is not None and self._store is None:
            check_outbox(self._resolve_url(), connection)
        return self.store

    def _run_eagerly(self) -> None:
        """Eager mode: run what is due now, unless a drain in this thread already runs
        (an enqueue from inside an eagerly run job is picked up by that drain)."""
        from durq.worker.inline import drain, draining

        if not draining():
            drain(cast("Registry", self))

    def _template(
        self, task_name: str, opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> NewJob:
        """Validate the options once; returns a NewJob without payload or key.

        A plain ``task.enqueue(...)`` (no options: :data:`durq.task.NO_OPTIONS`) reuses the
        template checked at the task's first one, as long as the task's defaults are the
        same (they are public attributes: a change is seen at the next enqueue); only the
        open batch, which depends on the caller's context, is looked up each time.
        """
        if opts is NO_OPTIONS and task is not None and task.name == task_name:
            defaults = (
                task.queue, task.max_attempts, task.priority, task.deadline_in,
                task.notice_after, self.payload_limit,
            )  # fmt: skip
            cached = task._template_cache
            if cached is not None and cached[0] == defaults:
                template: NewJob = cached[1]
            else:
                template = self._check_template(task_name, opts, task)
                template = replace(template, batch_id=None)
                task._template_cache = (defaults, template)
            batch_id = current_batch_id(cast("Registry", self))
            return template if batch_id is None else replace(template, batch_id=batch_id)
        return self._check_template(task_name, opts, task)

    def _check_template(
        self, task_name: str, opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> NewJob:
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
        batch_id = current_batch_id(
            cast("Registry", self)
        )  # inside `with dq.batch()`: the job joins it
        new = NewJob(
            queue, task_name, "", priority, run_at, max_attempts, None, meta, delay, batch_id
        )
        extras = self._parked_deadline_fields(opts, task)
        if extras:
            check_due_before_expiry(self.store.now, delay, run_at, extras)
        extras.update(workflow_fields(opts))
        return replace(new, **extras) if extras else new

    def _with_payload(
        self, t: NewJob, payload: Mapping[str, Any], key: str | None, passed: str | None = None
    ) -> NewJob:
        """The template with its payload and key; ``passed`` names an argument a parent's
        result will fill (dq.chain), so the signature check counts it as given."""
        if type(payload) is not dict and isinstance(payload, Mapping):
            payload = _as_dict(payload, "payload")
        task = self.tasks.get(t.task)
        if task is not None and task.typed.checked:  # typed payloads, checked and converted
            payload = task.typed.to_payload(payload, task.name)
        body = encode_payload(payload, self.payload_limit)
        if self.codec is not None:  # at rest: e.g. durq.codecs.Encrypted
            body = self.codec.encode(body)
            problem = nul_problem("the payload", body, self.store.holds_nul)
            if problem is not None:  # refused here, before any row of the enqueue
                raise PayloadError(f"{problem}; nothing was enqueued")
        if task is not None:  # the producer knows the function: refuse what cannot fit it now
            problem = task.payload_problem(payload if passed is None else {**payload, passed: 0})
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
        if t.has_workflow or (task is not None and task.fair_key is not None):
            new = with_workflow(new, t, task, payload)
        return with_limit(new, task.limits if task is not None else None, payload)

    def _plain_payloads(
        self, template: NewJob, items: Sequence[Mapping[str, Any]]
    ) -> list[str] | None:
        """The encoded payloads of ``enqueue_many`` without keys, when nothing but the
        payload differs between its rows (they go to :meth:`Store.enqueue_rows` with the
        template, or as one NewJob each where it cannot take them): the task is registered
        here, its payloads are not typed or encoded at rest, it has no hooks, limit or fair
        key and the template no workflow. None when
        that is not so (each item then goes through :meth:`_with_payload`). Each payload is
        checked exactly as there.

        Raises:
            PayloadError, PayloadTooLarge: an item is not a fitting payload.
        """
        task = self.tasks.get(template.task)
        if (
            task is None
            or task.typed.checked
            or self.codec is not None
            or task.on_fail is not None
            or task.hook_queue is not None
            or task.limits is not None
            or task.fair_key is not None
            or template.has_workflow
        ):
            return None
        limit = self.payload_limit
        # Task.payload_problem's first test, inline (no call a row); it decides the rest
        required, names, any_kwargs = task._required, task._names, task._any_kwargs
        bodies: list[str] = []
        for i, item in enumerate(items):
            try:
                payload = item if type(item) is dict else _as_dict(item, "payload")
                bodies.append(encode_payload(payload, limit))
            except PayloadError as exc:
                _raise_for_item(exc, i, len(items))
            keys = payload.keys()
            if not (required <= keys and (any_kwargs or keys <= names)):
                problem = task.payload_problem(payload)
                if problem is not None:
                    raise PayloadError(
                        f"item {i} of {len(items)}: payload does not fit {task.name}(): {problem}"
                    )
        return bodies

    def _rows_jobs(self, template: NewJob, bodies: Sequence[str], rows: InsertedRows) -> list[Job]:
        """The jobs (:class:`Job`) of :meth:`durq.store.base.Store.enqueue_rows` (``template``
        plain, one new row per payload), built here: nothing is read back."""
        store, t = self.store, template
        run_at, created_at = rows.run_at, rows.created_at
        # positional to the end: a keyword argument costs a dataclass 0.3 µs more per row
        return [
            Job(store, JobRecord(
                job_id, t.queue, t.task, body, t.priority, run_at, 0, t.max_attempts, "queued",
                None, None, None, None, created_at, None, None, None, None, "[]", t.meta, 0,
            ))
            for job_id, body in zip(rows.ids, bodies, strict=True)
        ]  # fmt: skip

    def _plain_jobs(
        self, template: NewJob, bodies: Sequence[str], inserted: Sequence[Inserted]
    ) -> list[Job]:
        """:meth:`_job_after_insert` for the rows of :meth:`_plain_payloads` (no parents,
        no parked / deadline columns) with no event to log: the records are built here, and
        only a row whose key existed (none, without keys) is read back."""
        store = self.store
        t = template
        queue, task, priority, max_attempts = t.queue, t.task, t.priority, t.max_attempts
        meta, batch_id = t.meta, t.batch_id
        jobs: list[Job] = []
        for body, ins in zip(bodies, inserted, strict=True):
            if not ins.created:
                jobs.append(self._job_after_insert(t.with_payload(body), ins, False))
                continue
            jobs.append(Job(store, JobRecord(
                ins.id, queue, task, body, priority, ins.run_at, 0, max_attempts, "queued",
                None, None, None, None, ins.created_at, None, None, None, None, "[]", meta, 0,
                None, None, None, None, batch_id,
            )))  # fmt: skip
        return jobs

    def _job_after_insert(self, new: NewJob, ins: Inserted, log: bool) -> Job:
        if not ins.created or new.parents:  # a child's state is the store's decision
            record = self.store.get(ins.id)
            if record is None:  # pruned between the insert and the read
                raise JobNotFound(f"job {ins.id} vanished")
            if ins.created and log:
                events.emit(events.JOB_ENQUEUED, id=ins.id, queue=new.queue, task=new.task,
                            run_at=ins.run_at, state=record.state)  # fmt: skip
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


def _raise_for_item(exc: PayloadError | ConfigError, index: int, count: int) -> NoReturn:
    """Raise ``exc`` again as the same class with its message prefixed by which item of an
    ``enqueue_many`` it is about (``item 3 of 1000: ...``, counting from 0), chained to
    ``exc``; ``exc`` itself when its class takes more than a message."""
    try:
        again: Exception | None = type(exc)(f"item {index} of {count}: {exc}")
    except TypeError:
        again = None
    if again is None:
        raise exc
    raise again from exc
