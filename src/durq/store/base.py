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
from durq.store.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult


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

    # -- blobs --

    def blob_put(
        self,
        key: str,
        size: int,
        *,
        name: str | None,
        holder: str | None,
        job_id: int | None,
        alias: str | None,
        only_if_stored: bool,
    ) -> PutResult:
        """Record blob ``key`` (``size`` bytes) as stored, in one transaction with an optional
        reference (``holder``, and ``job_id`` for a job's) and ``alias``. With
        ``only_if_stored`` only touch a record that is already stored (else ``absent``)."""
        ...

    def blob_ref(self, key: str, holder: str, job_id: int | None) -> RefResult:
        """Add a reference (one transaction; touches the blob)."""
        ...

    def blob_unref(self, key: str, holder: str, release: bool) -> BlobRelease:
        """Remove a reference; with ``release``, when none is left (dead job references
        swept), release the bytes in the same transaction: exactly one caller wins."""
        ...

    def blob_collect(self, grace: float, limit: int) -> BlobCollected:
        """Sweep dead job references and release up to ``limit`` blobs that nothing holds and
        nothing touched for ``grace`` seconds (conditional: one caller wins each)."""
        ...

    def blob_stored(self, keys: Sequence[str]) -> set[str]:
        """The keys among ``keys`` recorded as stored."""
        ...

    def blob_get(self, key: str) -> BlobRecord | None: ...

    def blob_list(self, after: str, limit: int) -> list[BlobRecord]:
        """Records with key > ``after``, by key."""
        ...

    def blob_holders(self, key: str) -> list[tuple[str, int | None, float]]:
        """(holder, job_id, created_at) of each reference to ``key``."""
        ...

    def blob_aliases(self, key: str) -> list[str]: ...

    def blob_set_external(self, key: str, external_id: str | None) -> bool:
        """False: no record for ``key``."""
        ...

    def blob_alias(self, name: str, key: str) -> bool:
        """Point alias ``name`` at ``key`` (replacing); False: no record for ``key``."""
        ...

    def blob_unalias(self, name: str) -> bool: ...

    def blob_lookup(self, name: str) -> BlobRecord | None: ...


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
