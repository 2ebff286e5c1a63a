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
    """The database stayed locked by another connection (another process, or an open
    transaction of this one) for longer than the lock timeout."""


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
    (``reason="timeout"``), its job was cancelled (``"cancelled"``), expired past its
    deadline (``"expired"``), or its lease was lost — the job was reaped or rescued while
    this worker was frozen or cut off, and may run elsewhere (``"lease_lost"``).

    A ``BaseException`` (like ``KeyboardInterrupt``), so that a body's ``except Exception``
    does not swallow it; a body may clean up in ``finally``. In a ``def`` task it is raised
    in the body's thread at its next Python bytecode (never inside durq's own store calls:
    it waits for the call to return) and raised again every 1 s until the body is gone, so a
    ``finally`` block has 1 s to clean up before the next raise; a blocking C call
    (``time.sleep``, a socket read, ``Lock.acquire``) is not interrupted until it returns.
    At shutdown a body still running past the grace gets it with ``"lease_lost"``. ``async def`` bodies are cancelled instead
    (``asyncio.CancelledError``). See docs/features/timeouts.md.

    Attributes:
        reason: ``"timeout"``, ``"cancelled"``, ``"expired"`` or ``"lease_lost"``.
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
        retry_after: seconds to wait before the next attempt, overriding the backoff
            policy. Capped by the task's ``max_retry_after`` (default 3,600 s,
            :data:`durq.retry.MAX_RETRY_AFTER`; None: no cap): a longer wait is cut to the
            cap and the error entry says so. To wait longer without spending an attempt,
            raise :class:`Snooze`.
    """

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


#: The longest a job may snooze at once, in seconds (30 days): a longer delay is an error,
#: never a silent cap (enqueue a new job with ``run_at=`` for a date further out).
MAX_SNOOZE = 30 * 86400.0


class Snooze(TaskSignal):
    """Put the job back to run again ``seconds`` from now, without spending an attempt.

    Raise it from a task (or call ``durq.context().snooze(seconds)``, which raises it) when
    the job cannot do its work yet: a file not uploaded, a provider's Retry-After, a
    polling loop. The store records it under the attempt's lease token (a fenced-out
    worker's snooze changes nothing): the job goes back to ``queued`` with ``run_at`` =
    now + ``seconds`` on the store's clock, the attempt handed back, its ``snoozes``
    count plus one and a ``snoozed`` entry in its history. Past the task's
    ``max_snoozes`` (default 100) the job fails instead (kind ``snooze_limit``), so
    nothing loops for ever. docs/features/snooze.md.

    Args:
        seconds: the delay (a number, 0 to :data:`MAX_SNOOZE`).

    Raises:
        SnoozeError: ``seconds`` is not a number, negative, not finite, or over
            :data:`MAX_SNOOZE` (raised from a task body, it fails the job permanently
            with that message).
    """

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise SnoozeError(f"snooze seconds must be a number, not {seconds!r}")
        if not 0 <= seconds <= MAX_SNOOZE:  # NaN fails both comparisons
            raise SnoozeError(
                f"a snooze of {seconds} s is not between 0 and {MAX_SNOOZE:.0f} s (30 days); "
                "enqueue a job with run_at= for a time further out"
            )
        super().__init__(f"snoozed for {float(seconds):g} s")
        self.seconds = float(seconds)


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


class SnoozeError(ConfigError, Permanent):
    """A bad :class:`Snooze` delay. Raised in a task body it fails the job at once."""


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
