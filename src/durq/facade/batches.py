"""BatchesFacade: ``dq.batch()``, ``dq.batch_status()``, ``dq.seal_batch()``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from durq.batches import Batch, BatchStatus
from durq.checks import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    _as_dict,
    _as_id,
    _check_name,
    _check_text,
)
from durq.errors import BatchNotFound, ConfigError, JobGone, PayloadError
from durq.facade.base import FacadeBase
from durq.payload import encode

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.task import Task


class BatchesFacade(FacadeBase):
    """Batches: a mixin of :class:`durq.Durq`."""

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
            cast("Registry", self),
            name,
            _check_name("queue", chosen),
            task.priority if task else 0,
            task.max_attempts if task else DEFAULT_MAX_ATTEMPTS,
            meta_json,
        )

    def abatch(
        self,
        on_complete: Task[Any, Any] | str | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        queue: str | None = None,
    ) -> Batch:
        """:meth:`batch` for asyncio code: ``async with dq.abatch(on_complete=task) as b:``;
        the block's store writes run in a thread, so the event loop is not blocked, and
        ``await task.aenqueue(...)`` calls inside the block join the batch. Same arguments
        and errors as :meth:`batch`."""
        return self.batch(on_complete, meta=meta, queue=queue)

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
