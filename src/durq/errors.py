"""One exception tree for durq.

Library errors derive from :class:`DurqError`. Task signals (raised *by* a task to
steer its job) derive from :class:`TaskSignal` and are kept apart, so that code
catching ``DurqError`` never swallows a task's request to retry or fail.
"""

from __future__ import annotations

from typing import Any


class DurqError(Exception):
    """Root of every error durq raises."""


class ConfigError(DurqError, ValueError):
    """A bad URL, option or argument given to durq (raised at call time, nothing written)."""


class PayloadError(DurqError, TypeError):
    """A payload that cannot be stored: not JSON-serialisable. Nothing was written."""


class PayloadTooLarge(PayloadError, ValueError):
    """A payload whose JSON encoding is larger than the limit (default 1 MiB). Nothing was written."""


class StoreError(DurqError):
    """The store could not be opened or used (not a database, unreadable file, ...)."""


class StoreBusy(StoreError):
    """The database stayed locked by another process for longer than the lock timeout."""


class StoreUnavailable(StoreError):
    """The database server cannot be reached (refused, timed out, connection lost)."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer durq than this one; refusing to touch it."""


class JobNotFound(DurqError, LookupError):
    """No job with that id exists."""


class JobGone(DurqError):
    """The job is no longer in a state that allows the requested change (another actor won)."""


class UnknownTask(DurqError, LookupError):
    """A task name that is not registered with this Durq instance."""


class JobFailed(DurqError):
    """Raised by :meth:`durq.Job.wait` when the job ended without a result.

    Attributes:
        job: the :class:`durq.Job` as last read.
        error: the last :class:`durq.AttemptError` recorded, or ``None``.
    """

    def __init__(self, job: Any, error: Any) -> None:
        self.job = job
        self.error = error
        detail = f"{error.type}: {error.message}" if error is not None else job.state
        super().__init__(f"job {job.id} ({job.task}) ended {job.state}: {detail}")


class Interrupted(BaseException):
    """Raised inside a running task body by its worker, to stop it: its timeout passed
    (``reason="timeout"``), its job was cancelled (``"cancelled"``) or expired past its
    deadline (``"expired"``).

    A ``BaseException`` (like ``KeyboardInterrupt``), so that a body's ``except Exception``
    does not swallow it; a body may clean up in ``finally``. In a ``def`` task it is raised
    in the body's thread at its next Python bytecode and raised again every 0.1 s until the
    body is gone; a blocking C call (``time.sleep``, a socket read, ``Lock.acquire``) is not
    interrupted until it returns. ``async def`` bodies are cancelled instead
    (``asyncio.CancelledError``). See docs/features/timeouts.md.

    Attributes:
        reason: ``"timeout"``, ``"cancelled"`` or ``"expired"``.
    """

    def __init__(self, reason: str = "timeout") -> None:
        super().__init__(f"durq interrupted the task body: {reason}")
        self.reason = reason


class TaskSignal(Exception):
    """Base of the exceptions a task raises to steer its own job."""


class Permanent(TaskSignal):
    """Fail the job now, whatever attempts are left (the dead-letter set)."""


class Transient(TaskSignal):
    """Retry the job (if attempts are left), with the task's backoff.

    Args:
        message: text stored in the job's error history.
        retry_after: seconds to wait before the next attempt, overriding the
            backoff policy (still capped by the worker's ``max_retry_after``).
    """

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PauseQueue(TaskSignal):
    """Pause this job's queue and put the job back, without spending an attempt.

    Raise it from a task when the queue cannot make progress for now (an API quota is
    exhausted, a downstream service is down, credentials expired). The worker then, in one
    transaction, returns the job to ``queued`` with its attempt handed back (conditional on
    its lease token) and pauses the job's queue with ``source="auto"`` and this reason,
    unless the queue is paused already. It raises the alert ``pause:<queue>`` through the
    app's ``on_alert`` hooks; the alert's cooldown makes any number of jobs hitting it one
    alert. Jobs of the queue already running finish; nothing more is claimed from it until
    ``dq.resume(queue)`` (or ``durq resume QUEUE``).

    Args:
        reason: why, shown by ``durq status`` and in the alert.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = str(reason)


class StoreFull(StoreError):
    """The database could not be written because its disk is full (SQLite: ``SQLITE_FULL``).

    The write was rolled back: nothing of it was stored and nothing stored is damaged. A
    worker waits it out (its outcomes are kept and written once space is freed)."""


class StoreReadOnly(StoreError):
    """The database cannot be written: a read-only file, directory or filesystem.

    Reads still work; the write was refused and nothing was changed."""


class BatchNotFound(DurqError, LookupError):
    """No batch with that id exists."""


# -- steps --


class LeaseLost(DurqError):
    """This attempt no longer holds its job's lease (reaped after a missed heartbeat,
    cancelled, timed out, or taken over by another worker), so what it tries to record for
    the job is refused. Raised by :meth:`durq.JobContext.step`; the task should stop. The
    worker's outcome for such an attempt is fenced out anyway."""


class StepResultError(PayloadError, Permanent):
    """A step's function returned a value that cannot be stored as JSON (or is over the
    size limit). The function has run, but its result was not recorded.

    It is also a :class:`Permanent` signal: unless the task catches it, the job fails at
    once instead of being retried, so that a retry does not repeat the step's side effect
    only to fail the same way."""


class LimitTimeout(DurqError, TimeoutError):
    """:meth:`durq.Durq.limit` found no free slot within its ``timeout``; nothing is held."""


# -- blobs --


class BlobError(DurqError):
    """Base of the blob store's errors (durq.blobs)."""


class BlobNotFound(BlobError, LookupError):
    """No blob record with that key (never stored, or its record was garbage-collected)."""


class BlobGone(BlobError):
    """The blob's record exists but its bytes do not (released by gc or an unref and kept
    only for its external id, or deleted from the root by hand): put the bytes again."""


class ParentNotFound(JobNotFound, ConfigError):
    """An enqueue named a parent job (``after=``) that does not exist. Nothing was written."""
