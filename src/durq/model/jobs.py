"""The job model: plain data shared by every layer. Imports nothing else from durq."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar


class JobState(enum.StrEnum):
    """States of DESIGN §2. ``scheduled`` is derived: a queued job whose ``run_at`` is ahead."""

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    #: Stored but not runnable until :meth:`durq.Durq.adopt` (or cancelled / expired).
    PARKED = "parked"
    #: Has parents that have not all finished (docs/features/dependencies.md).
    WAITING = "waiting"


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED}
)
#: The states :meth:`durq.Durq.retry` replays (every finished state).
RETRYABLE_STATES = TERMINAL_STATES

#: Deadline hooks run as jobs of the task ``durq.hook:<task>`` (docs/features/deadlines.md),
#: keyed ``durq.expire:<job id>`` / ``durq.slow:<job id>`` so that each is enqueued once.
HOOK_TASK_PREFIX = "durq.hook:"

#: Attempts of a hook job (on_expire, on_slow, on_fail) before it fails for good.
HOOK_MAX_ATTEMPTS = 5


#: The most characters of an attempt's message, and of its traceback, kept in the job's
#: error history (64 Ki each): an exception carrying a whole response body (say 30 MB)
#: otherwise added twice its size to the row at every attempt.
MAX_ERROR_TEXT = 64 * 1024


#: The entries a job's error history keeps: its first, and its last HISTORY_KEPT (20). An
#: older one gives way to a marker entry (kind :data:`HISTORY_TRIMMED_KIND`, second in the
#: history) that counts the entries dropped, so that a job retried for ever (say
#: max_attempts=10,000) holds at most 22 entries, not one per attempt.
HISTORY_KEPT = 20

#: The kind of the marker entry: ``{"kind": "history_trimmed", "dropped": n, ...}``.
HISTORY_TRIMMED_KIND = "history_trimmed"


def cut_text(text: str, *, tail: int = 0) -> str:
    """``text`` when it has at most :data:`MAX_ERROR_TEXT` characters; else its start
    (and its last ``tail`` characters) around a note of how many were cut, in
    :data:`MAX_ERROR_TEXT` characters all told (so a cut text is never cut again)."""
    if len(text) <= MAX_ERROR_TEXT:
        return text
    longest = len(f" [... {len(text)} characters cut ...] ")  # the cut has fewer digits
    head = MAX_ERROR_TEXT - tail - longest
    note = f" [... {len(text) - head - tail} characters cut ...] "
    return text[:head] + note + (text[len(text) - tail :] if tail else "")


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One failed attempt, as kept in a job's error history.

    Attributes:
        attempt: the attempt number that failed (1-based).
        at: when it was recorded, seconds since the epoch.
        type: the exception's qualified type name, or a reason such as ``lease_expired``.
        message: the exception's text; past :data:`MAX_ERROR_TEXT` characters its start,
            with a note of how many were cut.
        traceback: the formatted traceback ('' when there was none); past
            :data:`MAX_ERROR_TEXT` characters its start and its end (the innermost frames
            and the exception's line), with a note of how many were cut between them.
        kind: the classification: ``transient``, ``permanent``, ``timeout``, ``lease_lost``,
            ``shutdown``, ``undecodable_payload`` ...
        started_at: when that attempt started (epoch s), or None: the store writes it
            from the row into the entry, in the statement that records the failure
            (entries written before durq 0.x and those of jobs that never ran have none).
        worker_id: the worker that held the attempt's lease, or None (as ``started_at``).
    """

    attempt: int
    at: float
    type: str
    message: str
    traceback: str = ""
    kind: str = "transient"
    started_at: float | None = None
    worker_id: str | None = None

    def __post_init__(self) -> None:
        if len(self.message) > MAX_ERROR_TEXT:
            object.__setattr__(self, "message", cut_text(self.message))
        if len(self.traceback) > MAX_ERROR_TEXT:
            object.__setattr__(self, "traceback", cut_text(self.traceback, tail=48 * 1024))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "attempt": self.attempt,
            "at": self.at,
            "type": self.type,
            "message": self.message,
            "traceback": self.traceback,
            "kind": self.kind,
        }
        if self.started_at is not None:
            out["started_at"] = self.started_at
        if self.worker_id is not None:
            out["worker_id"] = self.worker_id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptError:
        """An entry of a stored error history. A damaged entry (a number that is not one)
        reads as 0 there (``started_at``: None) rather than raising: reading a job must
        not fail because one entry was damaged."""
        started = _number(data.get("started_at"), float, None)
        return cls(
            attempt=_number(data.get("attempt", 0), int, 0),
            at=_number(data.get("at", 0.0), float, 0.0),
            type=str(data.get("type", "")),
            message=str(data.get("message", "")),
            traceback=str(data.get("traceback", "")),
            kind=str(data.get("kind", "transient")),
            started_at=started,
            worker_id=str(data["worker_id"]) if data.get("worker_id") is not None else None,
        )


N = TypeVar("N", int, float)
D = TypeVar("D")


def _number(value: Any, kind: type[N], default: D) -> N | D:
    """``kind(value)``, or ``default`` when value is None or not a finite number."""
    if value is None or isinstance(value, bool):
        return default
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if math.isfinite(number) else default


@dataclass(slots=True)
class JobRecord:
    """A job row as the store returns it (payload and JSON columns still encoded)."""

    id: int
    queue: str
    task: str
    payload: str
    priority: int
    run_at: float
    attempts: int
    max_attempts: int
    state: str
    lease_token: int | None
    lease_expires_at: float | None
    worker_id: str | None
    key: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: str | None
    progress: str | None
    errors: str
    meta: str | None
    shutdown_requeues: int
    # parked jobs and deadlines (absolute epoch seconds; None: none)
    deadline: float | None = None
    notice_at: float | None = None
    noticed_at: float | None = None
    park_expires_at: float | None = None
    batch_id: int | None = None
    #: times the job was snoozed (put back without spending an attempt) since its last
    #: replay; bounded by the task's ``max_snoozes`` (docs/features/snooze.md)
    snoozes: int = 0


@dataclass(frozen=True, slots=True)
class Claimed:
    """A job handed to a worker by a claim: what it needs to run and to fence its writes."""

    id: int
    queue: str
    task: str
    payload: str
    attempt: int
    max_attempts: int
    lease_token: int
    shutdown_requeues: int = 0
    #: the batch the job belongs to (``dq.batch``), or None; hand it on in its Outcome.
    batch_id: int | None = None
    #: when the job became runnable (epoch s, the store's clock): its wait is the time from
    #: here to its start (the worker's ``durq_wait_seconds``). None where a store omits it.
    run_at: float | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt came to, handed to the store to record under the lease token.

    ``kind`` is one of ``succeeded``, ``retry``, ``failed``, ``snooze``. A retry or a
    snooze runs again ``delay`` seconds after the store's clock at the time it is recorded
    (the database's clock on PostgreSQL), never at a time computed from the worker's clock.
    A snooze hands the attempt back and counts one more snooze on the job, or fails the
    job when it was snoozed ``max_snoozes`` times already (docs/features/snooze.md).
    """

    job_id: int
    lease_token: int
    kind: str
    result: str | None = None
    error: AttemptError | None = None
    delay: float = 0.0
    #: the job's batch (from :attr:`Claimed.batch_id`): the store then closes the batch in
    #: the same transaction when this outcome makes its last member terminal.
    batch_id: int | None = None
    #: the job's task has an ``on_fail`` hook (set by the worker): if this outcome leaves
    #: the job ``failed`` (also a retry the store turns into a failure), the store inserts
    #: the hook job in the same transaction (docs/features/hooks.md).
    on_fail: bool = False
    #: for a ``snooze``: the task's ``max_snoozes`` (the store fails the job past it).
    max_snoozes: int = 0


#: The outcome kind of :class:`durq.Snooze` (docs/features/snooze.md).
SNOOZE_KIND = "snooze"


@dataclass(frozen=True, slots=True)
class ReapSummary:
    """What one reaper pass did: leases returned to the queue, jobs failed for lack of attempts."""

    at: float
    recovered: int = 0
    failed: int = 0
    job_ids: tuple[int, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class RescueSummary:
    """What one rescue pass did (docs/guarantees.md, "Rescue of a dead worker's jobs").

    Attributes:
        at: the store's clock at the pass, seconds since the epoch.
        workers: ids of the workers found dead (liveness row stale, or process gone)
            whose running jobs were returned.
        recovered: jobs returned to the queue (their attempt stays counted).
        failed: jobs failed because they had no attempts left.
        job_ids: ids of every job the pass took back.
    """

    at: float
    workers: tuple[str, ...] = field(default_factory=tuple)
    recovered: int = 0
    failed: int = 0
    job_ids: tuple[int, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """What one deadline sweeper pass did (see :meth:`durq.Durq.sweep`).

    Attributes:
        at: the store's clock at the pass, seconds since the epoch.
        expired: ids of the jobs it moved to ``expired`` (deadline or park TTL passed).
        noticed: ids of the jobs whose ``on_slow`` notice it arranged.
    """

    at: float
    expired: tuple[int, ...] = field(default_factory=tuple)
    noticed: tuple[int, ...] = field(default_factory=tuple)
