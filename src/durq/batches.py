"""Batches: ``with dq.batch(on_complete=task, meta={...}) as batch:`` (docs/features/batches.md).

Every job enqueued inside the block, on the same :class:`durq.Durq` and in the same thread
(or asyncio task: a :class:`contextvars.ContextVar` carries the open batch), joins the batch.
When its last member reaches a terminal state the store enqueues the ``on_complete`` job in
the same transaction as that state change, once; retrying a member reopens the batch.
"""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from durq.errors import ConfigError

if TYPE_CHECKING:
    from durq.model.batches import BatchRecord, NewBatch
    from durq.registry import Registry

#: The batches whose blocks are open in this context, innermost last.
_OPEN: ContextVar[tuple[Batch, ...]] = ContextVar("durq_open_batches", default=())

#: The keyword arguments ``on_complete`` is called with.
CALLBACK_ARGS = ("batch_id", "outcome", "counts", "meta")


def current_batch_id(app: Registry) -> int | None:
    """The id of the batch whose block is open for ``app`` in this context, or None."""
    for batch in reversed(_OPEN.get()):
        if batch.app is app:
            return batch.id
    return None


class Batch:
    """A batch being built: use as ``with dq.batch(...) as batch:``; ``batch.id`` is its id.

    Entering stores the batch (state ``building``). Leaving seals it (``open``): from then on
    the callback fires when the last member is terminal - at once, in the sealing
    transaction, if all members already are (an empty batch fires ``completed`` with empty
    counts). If the block raises, the members it stored that have not finished are
    cancelled, the batch is sealed as aborted (its outcome is ``partial`` or ``failed``,
    never ``completed``) and the exception propagates.
    """

    def __init__(self, app: Registry, on_complete: str | None, queue: str, priority: int,
                 max_attempts: int, meta: str) -> None:  # fmt: skip
        self.app = app
        self.on_complete = on_complete
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        self.meta = meta
        self._id: int | None = None
        self._token: Token[tuple[Batch, ...]] | None = None

    @property
    def id(self) -> int:
        """The batch id (available inside the block and after it).

        Raises:
            ConfigError: the block has not been entered yet.
        """
        if self._id is None:
            raise ConfigError("a batch has an id once its `with` block is entered")
        return self._id

    def __repr__(self) -> str:
        return f"<durq.Batch {self._id} on_complete={self.on_complete}>"

    def _spec(self) -> NewBatch:
        if self._id is not None:
            raise ConfigError("a Batch can be entered once; call dq.batch() for another")
        if current_batch_id(self.app) is not None:
            raise ConfigError("batches do not nest: a batch block is already open for this app")
        from durq.model.batches import NewBatch

        return NewBatch(self.on_complete, self.queue, self.priority, self.max_attempts, self.meta)

    def __enter__(self) -> Batch:
        self._id = self.app.store.create_batch(self._spec())
        self._token = _OPEN.set((*_OPEN.get(), self))
        return self

    def _leave(self, exc: BaseException | None) -> str | None:
        if self._token is not None:
            _OPEN.reset(self._token)
            self._token = None
        return None if exc is None else f"{type(exc).__name__}: {exc}"[:2000]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.app.store.seal_batch(self.id, self._leave(exc))

    async def __aenter__(self) -> Batch:
        """``async with dq.abatch(...)``: the same as ``with``, with the store writes off
        the event loop. The open batch is carried by the asyncio task's context, so
        ``aenqueue`` calls in the block join it."""
        self._id = await asyncio.to_thread(self.app.store.create_batch, self._spec())
        self._token = _OPEN.set((*_OPEN.get(), self))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.app.store.seal_batch, self.id, self._leave(exc))


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """What :meth:`durq.Durq.batch_status` returns.

    Attributes:
        id: the batch id.
        state: ``building`` (its block is open), ``open`` (sealed, waiting for members) or
            ``done`` (its callback was enqueued; a retried member makes it ``open`` again).
        outcome: of the last firing: ``completed``, ``partial`` or ``failed``; None before.
        counts: the members now, by stored state (``{"succeeded": 47, "failed": 3}``).
        meta: the batch's meta dict.
        fired: how many times the callback was enqueued (once per completion).
        size: how many jobs joined the batch.
        on_complete: the callback's task name, or None.
        queue: the callback's queue.
        aborted: why the block raised (``"ValueError: ..."``), or None.
        callback_job_id: the last callback job's id, or None.
        created_at, sealed_at, completed_at: seconds since the epoch (or None).
    """

    id: int
    state: str
    outcome: str | None
    counts: dict[str, int]
    meta: dict[str, Any]
    fired: int
    size: int
    on_complete: str | None
    queue: str
    aborted: str | None
    callback_job_id: int | None
    created_at: float
    sealed_at: float | None
    completed_at: float | None

    @classmethod
    def from_record(cls, r: BatchRecord) -> BatchStatus:
        try:
            meta = json.loads(r.meta)
        except ValueError:
            meta = {"unreadable": r.meta}
        return cls(
            id=int(r.id), state=r.state, outcome=r.outcome, counts=dict(sorted(r.members.items())),
            meta=meta, fired=int(r.fired), size=int(r.size), on_complete=r.on_complete,
            queue=r.queue, aborted=r.aborted,
            callback_job_id=None if r.callback_job_id is None else int(r.callback_job_id),
            created_at=float(r.created_at),
            sealed_at=None if r.sealed_at is None else float(r.sealed_at),
            completed_at=None if r.completed_at is None else float(r.completed_at),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
