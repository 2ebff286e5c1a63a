"""The context a running task sees through :func:`durq.context`."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from durq.errors import DurqError
from durq.payload import encode, is_finite_fraction

_current: contextvars.ContextVar[JobContext] = contextvars.ContextVar("durq_job_context")


@dataclass
class JobContext:
    """What a task can learn and say about its own job while it runs.

    Attributes:
        job_id: the job's id.
        task: the task name.
        queue: the job's queue.
        attempt: this attempt's number (1-based).
        max_attempts: the attempts the job may use in all.
        lease_token: the fencing token of this attempt's claim.
    """

    job_id: int
    task: str
    queue: str
    attempt: int
    max_attempts: int
    lease_token: int
    _write_progress: Callable[[int, int, str], bool] = field(repr=False)
    _lost: bool = field(default=False, repr=False)

    @property
    def lease_lost(self) -> bool:
        """True once this attempt's lease was taken over (reaped, cancelled, timed out).

        A task that sees it should stop: nothing it writes for this job will be kept.
        """
        return self._lost

    def mark_lease_lost(self) -> None:
        self._lost = True

    def progress(self, fraction: float, message: str = "", **extra: Any) -> bool:
        """Persist progress for this job (shown by ``durq jobs show`` and ``durq status``).

        Args:
            fraction: how far along, from 0.0 to 1.0.
            message: a short human-readable note.
            **extra: more JSON-serialisable fields to store with it.

        Returns:
            True if written; False when the lease was lost (the write was fenced out).

        Raises:
            DurqError: ``fraction`` is not a number in [0, 1].
            PayloadError: ``extra`` is not JSON-serialisable.
        """
        if not is_finite_fraction(fraction):
            raise DurqError(f"progress fraction must be a number in [0, 1], not {fraction!r}")
        body = encode({"fraction": float(fraction), "message": message, **extra}, what="progress")
        ok = self._write_progress(self.job_id, self.lease_token, body)
        if not ok:
            self.mark_lease_lost()
        return ok


def context() -> JobContext:
    """The :class:`JobContext` of the job running in this thread or asyncio task.

    Raises:
        LookupError: called outside a running durq task.
    """
    try:
        return _current.get()
    except LookupError:
        raise LookupError("durq.context() called outside a running durq task") from None


def bind(ctx: JobContext) -> contextvars.Token[JobContext]:
    return _current.set(ctx)


def unbind(token: contextvars.Token[JobContext]) -> None:
    _current.reset(token)
