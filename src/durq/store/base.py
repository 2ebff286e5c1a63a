"""The store protocol: the transitions of DESIGN §2 that every backend implements.

Nothing above the store knows SQL. Every transition that touches a running job is
conditional on its lease token, so a worker whose lease was taken over cannot change
the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from durq.model import Claimed, JobRecord, Outcome, ReapSummary
from durq.store.limits import JobLimit, LimitUsage


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert. ``payload`` and ``meta`` are already JSON-encoded.

    It may run at ``run_at`` (seconds since the epoch) when given, else ``delay`` seconds
    after the store's clock at insert time.
    """

    queue: str
    task: str
    payload: str
    priority: int
    run_at: float | None
    max_attempts: int
    key: str | None = None
    meta: str | None = None
    delay: float = 0.0
    limit: JobLimit | None = None


@dataclass(frozen=True, slots=True)
class Inserted:
    """What an insert came to: the job's id, whether it is new (False: its key existed),
    and, for a new job, its run_at and created_at on the store's clock."""

    id: int
    created: bool
    run_at: float
    created_at: float


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as registered in the store (for status: live workers, stranded jobs)."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    tasks: tuple[str, ...]
    started_at: float
    last_seen: float
    lease: float


@dataclass(slots=True)
class StatusData:
    """Raw figures for the status snapshot, read in one transaction."""

    now: float
    # (queue, state, later, retried) -> count; `later` is 1 for queued rows whose run_at is ahead.
    counts: dict[tuple[str, str, int, int], int] = field(default_factory=dict)
    oldest_ready: dict[str, float] = field(default_factory=dict)
    queued_tasks: list[tuple[str, str, int]] = field(default_factory=list)
    paused: dict[str, dict[str, Any]] = field(default_factory=dict)
    workers: list[WorkerInfo] = field(default_factory=list)
    last_reap: dict[str, Any] | None = None


class Store(Protocol):
    """What a backend provides. Times are seconds since the epoch from :meth:`now`."""

    url: str
    #: True when the backend pushes wake-ups (LISTEN/NOTIFY); False means poll :meth:`changed`.
    supports_notify: bool

    def now(self) -> float: ...

    def close(self) -> None: ...

    def migrate(self) -> int: ...

    def verify(self) -> None:
        """Raise StoreError if the database this store opened is no longer the one at its URL."""
        ...

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        """Insert jobs in one transaction; one :class:`Inserted` per job, in order.

        With ``connection`` (the caller's own open connection to the same database), the
        rows are written inside the caller's transaction and commit or roll back with it.
        """
        ...

    def claim(
        self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
    ) -> list[Claimed]: ...

    def finish(self, outcomes: Sequence[Outcome]) -> list[bool]:
        """Record outcomes in one transaction; True per outcome whose token still held."""
        ...

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        lease: float,
        worker_id: str,
    ) -> tuple[list[bool], list[Claimed]]:
        """Record ``outcomes`` and claim up to ``limit`` jobs (queues in the order given) in
        one transaction: the worker's hot path, one commit per batch."""
        ...

    def extend_leases(self, leases: Sequence[tuple[int, int]], lease: float) -> list[int]:
        """Extend (job_id, token) leases; returns the ids whose lease was lost."""
        ...

    def set_progress(self, job_id: int, token: int, progress: str) -> bool: ...

    def release(
        self, job_id: int, token: int, free_requeues: int, error: str
    ) -> tuple[str, int] | None: ...

    def reap(self) -> ReapSummary: ...

    def get(self, job_id: int) -> JobRecord | None: ...

    def list_jobs(
        self, *, state: str | None, queue: str | None, task: str | None, limit: int
    ) -> list[JobRecord]: ...

    def retry(self, job_id: int) -> bool: ...

    def cancel(self, job_id: int) -> bool: ...

    def purge(self, queue: str, states: Sequence[str]) -> int:
        """Delete the jobs of ``queue`` whose stored state is one of ``states``; the count."""
        ...

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool: ...

    def register_worker(self, info: WorkerInfo) -> None: ...

    def touch_worker(self, worker_id: str) -> None: ...

    def unregister_worker(self, worker_id: str) -> None: ...

    def status_data(self) -> StatusData: ...

    def lead(self, what: str = "maintenance", stale_after: float = 15.0) -> bool:
        """True when this process should run leader-only services (the reaper) now;
        also True for a stand-in when the leader has not been seen for ``stale_after`` s."""
        ...

    def changed(self) -> bool:
        """True when another connection committed since the last call (cheap; for polling)."""
        ...

    # -- limits --

    def acquire_hold(self, name: str, concurrency: int, lease: float, holder: str) -> int | None:
        """Take a slot of limit ``name`` if its running jobs plus live holds are below
        ``concurrency`` (one transaction, serialised with limited claims of the key); the
        hold's id, or None when the limit is full. The hold lasts ``lease`` seconds."""
        ...

    def extend_hold(self, hold_id: int, lease: float) -> bool:
        """Extend a live hold by ``lease`` seconds from now; False if it expired or is gone."""
        ...

    def release_hold(self, hold_id: int) -> bool:
        """Delete a hold; False if it was already gone."""
        ...

    def limit_usage(self) -> list[LimitUsage]:
        """Every limit key with running or queued jobs or live holds, by name."""
        ...


class Shortcuts:
    """``claim`` and ``finish`` on their own, for tests and tools; both backends inherit
    them. The worker uses :meth:`Store.finish_and_claim`, one transaction for both."""

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        lease: float,
        worker_id: str,
    ) -> tuple[list[bool], list[Claimed]]:
        raise NotImplementedError

    def claim(
        self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
    ) -> list[Claimed]:
        """Claim up to ``limit`` ready jobs of one queue (one transaction)."""
        return self.finish_and_claim((), [queue], tasks, limit, lease, worker_id)[1]

    def finish(self, outcomes: Sequence[Outcome]) -> list[bool]:
        """Record outcomes (one transaction); True per outcome whose token still held."""
        return self.finish_and_claim(outcomes, (), (), 0, 0.0, "")[0]
