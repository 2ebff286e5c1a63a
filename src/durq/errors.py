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


# -- blobs --


class BlobError(DurqError):
    """Base of the blob store's errors (durq.blobs)."""


class BlobNotFound(BlobError, LookupError):
    """No blob record with that key (never stored, or its record was garbage-collected)."""


class BlobGone(BlobError):
    """The blob's record exists but its bytes do not (released by gc or an unref and kept
    only for its external id, or deleted from the root by hand): put the bytes again."""
