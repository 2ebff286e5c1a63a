"""The store protocol: the transitions of DESIGN §2 that every backend implements.

Nothing above the store knows SQL. Every transition that touches a running job is
conditional on its lease token, so a worker whose lease was taken over cannot change
the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from durq.codecs import Codec
from durq.errors import JobGone
from durq.model import (
    Alert,
    BatchRecord,
    BlobCollected,
    BlobRecord,
    BlobRelease,
    Claimed,
    Edge,
    Inserted,
    InsertedRows,
    JobRecord,
    LimitUsage,
    NewBatch,
    NewJob,
    Outcome,
    ParentResult,
    PutResult,
    QueuePause,
    ReapSummary,
    RefResult,
    RescueSummary,
    ScheduleDefinition,
    ScheduleRecord,
    StatusData,
    StepRecord,
    SweepSummary,
    WorkerInfo,
)
from durq.model.dashboard import JobFilter, WhyFacts, WorkerDetail, WorkerReport

T = TypeVar("T")


class Store(Protocol):
    """What a backend provides. Times are seconds since the epoch from :meth:`now`."""

    url: str
    #: How payloads, results and steps are stored at rest (durq.codecs); set by the app.
    codec: Codec | None
    #: The app's ``payload_limit`` (bytes of JSON, None: none); set by the app. A child's
    #: payload with its parents' results must keep it when the store writes them in
    #: (durq.store.passing); the default is durq.payload.DEFAULT_PAYLOAD_LIMIT.
    payload_limit: int | None
    #: True when the backend pushes wake-ups (LISTEN/NOTIFY); False means poll :meth:`changed`.
    supports_notify: bool
    #: True when text columns keep a NUL character (SQLite); False when the database refuses
    #: it (PostgreSQL): a codec's text holding one is then refused before the statement
    #: (durq.codecs.nul_problem), so it never fails a statement that writes other jobs too.
    holds_nul: bool

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

    def enqueue_rows(
        self, job: NewJob, payloads: Sequence[str], build: Callable[[InsertedRows], T]
    ) -> T:
        """Insert one job per payload in one transaction, each of them ``job`` with that
        payload (``job.payload`` is not used): the bulk path of ``enqueue_many``, with no
        :class:`NewJob` or :class:`Inserted` per row. Wakes the workers of ``job.queue``.

        ``job`` must be plain (:attr:`NewJob.plain`: no key, batch, limit, hooks, parked /
        deadline columns or workflow) and ``payloads`` encoded as :attr:`NewJob.payload`
        is; every row is new, and all of them share one ``run_at`` and ``created_at``.
        Returns ``build(rows)``, ``rows`` the :class:`InsertedRows` (ids in the payloads'
        order). ``build`` only makes records and must not raise: a store may call it before
        its commit, while the database still writes the rows (PostgreSQL does), and drops
        its result when the commit fails.

        Raises:
            ValueError: ``job`` is not plain.
            StoreError: the database refused the rows; none of them was written.
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
        limited: int | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """Record ``outcomes`` and claim up to ``limit`` jobs (queues in the order given) in
        one transaction: the worker's hot path, one commit per batch.

        Of the jobs claimed, at most ``limited`` (default ``limit``) have a concurrency or
        rate limit, and those come first in the list: a worker that claims ahead of its free
        slots passes its free slots here, so that a prefetched job never takes a limit's
        slot before it runs."""
        ...

    def give_back(self, leases: Sequence[tuple[int, int]]) -> list[int]:
        """Return claimed jobs that never started, given as (job_id, token), to the queue
        as they were: attempt handed back, no error entry, ``run_at`` kept (so they go
        first). Each row is conditional on its token. Returns the ids given back."""
        ...

    def paused_among(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` are paused now (a read)."""
        ...

    def extend_leases(
        self, leases: Sequence[tuple[int, int]], lease: float
    ) -> list[tuple[int, int]]:
        """Extend (job_id, token) leases by ``lease`` seconds from now (store time), each
        pair on its own: a job given twice, with its current token and a stale one, keeps
        the first and loses the second. Returns the pairs whose lease was lost (no longer
        that token's, or the job no longer ``running``), in the order given."""
        ...

    def set_progress(self, job_id: int, token: int, progress: str) -> bool: ...

    def release(
        self, job_id: int, token: int, free_requeues: int, error: str, on_fail: bool = False
    ) -> tuple[str, int] | None:
        """Give a running job back at shutdown (see docs/architecture.md). When this fails
        it, the on_fail hook job is inserted in the same transaction if ``on_fail`` (the
        worker knows the task has one) or the job was flagged at enqueue (durq.hooks)."""
        ...

    def reap(self, fail_tasks: Sequence[str] = ()) -> ReapSummary:
        """Requeue expired leases, or fail them when no attempts are left; a failed job
        whose task is in ``fail_tasks`` (the worker's tasks with on_fail) or was flagged at
        enqueue gets its on_fail hook job in the same transaction (durq.hooks)."""
        ...

    def beat_worker(
        self, worker_id: str, rescue_after: float | None, proc: str | None
    ) -> int | None:
        """The worker's liveness beat (about every second, apart from job leases): mark it
        seen now, with ``rescue_after`` (seconds without a beat after which the leader
        counts it dead; None: never by staleness) and ``proc`` (its process stamp, see
        :func:`durq.observability.processes.proc_stamp`). Returns how many times its jobs were
        rescued so far, or None when its row is gone."""
        ...

    def local_workers(self, host: str) -> list[tuple[str, int, str]]:
        """(id, pid, proc stamp) of the workers registered from ``host`` that stamped
        their process (a read)."""
        ...

    def rescue(self, dead: Sequence[str] = (), fail_tasks: Sequence[str] = ()) -> RescueSummary:
        """Return the running jobs of dead workers at once: those whose liveness row is
        older than their ``rescue_after``, and ``dead`` (ids whose process the caller saw
        gone; their rows are deleted). The same effect as a lease expiry (:meth:`reap`):
        attempt counted, ``lease_lost`` entry, token cleared, failed when no attempts
        are left (with its on_fail hook job). Rechecked in the transaction, so a worker
        that beat meanwhile keeps its jobs. Only a read when nobody is stale."""
        ...

    def get(self, job_id: int) -> JobRecord | None: ...

    def list_jobs(
        self,
        *,
        state: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        tag: str | None = None,
    ) -> list[JobRecord]: ...

    def retry(self, job_id: int) -> bool:
        """Replay a succeeded, failed, cancelled or expired job: back to queued with a fresh
        attempt budget, its history kept plus one ``replayed`` entry. False (nothing
        changed) in any other state.

        Raises:
            JobGone: another live job holds the job's active unique key (nothing changed).
        """
        ...

    def retry_matching(
        self,
        state: str,
        queue: str | None,
        task: str | None,
        after: int,
        upto: int,
        limit: int,
    ) -> tuple[list[int], int | None]:
        """Replay, in one transaction, the first ``limit`` jobs in ``state`` (of ``queue``
        and ``task`` when given) whose id is in ``(after, upto]``, lowest ids first; a
        chunk of ``durq retry --state``. Jobs whose active unique key another live job
        holds are skipped. Returns the ids replayed (sorted) and the highest id looked
        at (None: no job matched; the next chunk starts after it)."""
        ...

    def cancel(self, job_id: int) -> bool: ...

    def purge(self, queue: str, states: Sequence[str]) -> int:
        """Delete the jobs of ``queue`` whose stored state is one of ``states``, except
        those a child that has not ended still needs (a parent whose child waits, unless
        the child goes in this same purge); the count deleted."""
        ...

    def purge_held(self, queue: str, states: Sequence[str]) -> int:
        """How many jobs of ``queue`` in ``states`` a purge keeps now, because a child that
        has not ended (and that the purge would not delete) needs them."""
        ...

    def delete_failed(self, job_ids: Sequence[int]) -> int:
        """Delete those of ``job_ids`` whose state is ``failed``, except a parent that a
        child not yet ended waits for (as :meth:`purge`); the count deleted."""
        ...

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool: ...

    def register_worker(self, info: WorkerInfo) -> None: ...

    def touch_worker(self, worker_id: str, wedged: int = 0, loop_blocked: float = 0.0) -> None:
        """Mark the worker seen now, with ``wedged`` slots held by task bodies that would
        not stop and its event loop blocked for ``loop_blocked`` seconds (see
        :class:`durq.model.WorkerInfo`)."""
        ...

    def unregister_worker(self, worker_id: str) -> None: ...

    def status_data(self) -> StatusData:
        """The figures of one status snapshot, read in one consistent snapshot: counts by
        queue and state, the oldest ready job per queue, queued jobs per task, pauses, the
        last reaper pass, and every registered worker with its last liveness beat's
        ``rescue_after`` and process stamp (which of them is live is the caller's rule:
        :func:`durq.observability.processes.live`)."""
        ...

    def lead(self, what: str, stale_after: float = 15.0) -> bool:
        """True when this process should perform the leader duty ``what`` now.

        Each duty (``"reaper"``, ``"sweeper"``, ``"scheduler"``, ``"pruner"``) is led on
        its own, by one of the processes that perform it: only those ask, so a worker that
        opts out of a duty (``--no-prune``) never stands in the way of one that performs
        it. Also True for a stand-in when the duty's leader has not been seen for
        ``stale_after`` seconds."""
        ...

    def changed(self) -> bool:
        """True when another connection committed since the last call (cheap; for polling)."""
        ...

    def cancel_signalled(self) -> bool:
        """True when a running job's lease may have ended elsewhere since the last call
        (cheap; a worker's cancel watch calls it from one thread, then
        :meth:`lost_among`). PostgreSQL: the NOTIFY of a cancel, an expiry, a rescue or a
        replay arrived (and at least once a second, as a backstop: a reap sends none);
        SQLite: another connection committed (the database's data version changed)."""
        ...

    def lost_among(self, leases: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """Of these (job_id, token) leases, those no longer held: the job is not
        ``running`` under that token any more (cancelled, expired, requeued by a reap or a
        rescue, replayed and maybe claimed again under a new token, finished, or deleted).
        Each maps to why: the job's state when it is ``cancelled`` or ``expired``, else
        ``"lease_lost"``. The bodies a worker must stop. One read, no write.

        The store cannot tell a lease ended by its holder's own outcome from one taken
        away, so a caller asks only about attempts whose outcome it has not recorded."""
        ...

    # -- pause and alerts --

    def pause_queue(self, queue: str, reason: str, source: str) -> bool:
        """Pause ``queue`` unless it is paused already (the first pause wins and keeps its
        reason and source); True when this call paused it."""
        ...

    def resume_queue(self, queue: str, source: str | None) -> bool:
        """Clear the pause of ``queue`` (with ``source``: only a pause by that source); True
        when this call cleared one."""
        ...

    def queue_pause(self, queue: str) -> QueuePause | None:
        """The pause of ``queue``, or None when it is not paused."""
        ...

    def requeue_paused(self, job_id: int, token: int, queue: str, reason: str) -> tuple[bool, bool]:
        """In one transaction: the running job goes back to ``queued`` with the attempt its
        claim counted handed back (if ``token`` still holds), and ``queue`` is paused with
        source ``auto`` (if it is not paused already). Returns (requeued, paused_now)."""
        ...

    def raise_alert(self, key: str, message: str, severity: str, cooldown: float) -> Alert | None:
        """Record an alert in one statement: the :class:`Alert` to send when ``key`` is new
        or was last sent ``cooldown`` seconds ago or more, else None (counted as suppressed)."""

    # -- batches --

    def create_batch(self, spec: NewBatch) -> int:
        """Store a batch in state ``building``; its id. Jobs join it through
        ``NewJob.batch_id`` (checked: only while it is building)."""
        ...

    def seal_batch(self, batch_id: int, aborted: str | None = None) -> bool:
        """building → open, and fire it at once if every member is already terminal (same
        transaction). With ``aborted`` (why the block failed) unfinished members are
        cancelled first and the outcome is never ``completed``. False if not building."""
        ...

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        """The batch row with its members counted by state, or None."""

    # -- steps and retention --

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        """(the step's stored result as JSON text or None, whether ``token`` holds the
        job's lease), in one read."""
        ...

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        """Record a step's JSON ``result`` under ``(job_id, name)`` if ``token`` still holds
        the lease of the running job; False otherwise, or when ``name`` is already recorded
        (the first row is kept)."""
        ...

    def list_steps(self, job_id: int) -> list[StepRecord]:
        """A job's recorded steps, oldest first."""
        ...

    def clear_steps(self, job_id: int) -> int:
        """Delete a job's steps unless the job is running; the count deleted."""
        ...

    def prune_jobs(self, state: str, older_than: float, queue: str | None, limit: int) -> int:
        """Delete at most ``limit`` jobs whose stored state is the terminal ``state`` and
        whose ``finished_at`` is more than ``older_than`` seconds before the store's clock
        (of ``queue`` when given), with their steps, in one transaction; the count deleted.
        Never deletes a job that is not succeeded, failed, cancelled or expired."""
        ...

    def prune_fair_turns(
        self, queue: str | None, after: tuple[str, str] | None, limit: int
    ) -> tuple[int, tuple[str, str] | None]:
        """Look at up to ``limit`` ``fair_turns`` rows (of ``queue`` when given) after the
        (queue, fair key) ``after`` (None: from the first) in key order, and delete, in one
        transaction, those whose key has no live job (queued, scheduled, waiting, parked or
        running). Returns (rows deleted, the last row looked at, to pass as ``after`` next;
        None when no row is left after this window). An enqueue or replay of a key in
        flight keeps its row: the key's next jobs are served as a new key's (turn 0)."""
        ...

    def running_jobs(self, limit: int) -> list[JobRecord]:
        """Up to ``limit`` running jobs, newest first (status shows their progress)."""

    # -- periodic --

    def periodic_slots(self) -> dict[str, tuple[float, int | None]]:
        """Per periodic schedule name: (last slot enqueued, its job id or None) as stored."""
        ...

    def schedules(self) -> list[ScheduleRecord]:
        """Every stored periodic schedule, by name, as last registered by a worker."""
        ...

    def define_schedules(
        self,
        schedules: Sequence[ScheduleDefinition],
        code_version: str,
        worker_id: str,
        fresh: float,
    ) -> None:
        """Store the definitions of ``schedules`` (in one transaction), as registered by
        ``worker_id`` running ``code_version``, and mark them seen now. A schedule with no
        row yet is anchored now (its first slot is the next one); an existing row keeps its
        last slot. A row whose definition and code version are unchanged and that was seen
        within ``fresh`` seconds is left alone (no write)."""
        ...

    def touch_schedules(self, names: Sequence[str]) -> None:
        """Mark the stored schedules ``names`` as seen now by a live worker that defines
        them (a schedule nobody touches for a while is orphaned: reported, not fired)."""
        ...

    def enqueue_periodic(self, name: str, slot: float, job: NewJob) -> Inserted | None:
        """In one transaction: advance ``name``'s last slot to ``slot`` if it is later than
        the stored one, and enqueue ``job`` (which carries the slot's idempotency key).

        Returns the insert (``created`` False when a job with that key already existed), or
        None when the stored last slot is already at or past ``slot`` (another scheduler
        enqueued it, or a later one): nothing was written.
        """

    # -- parked / deadlines --

    def adopt(self, job_id: int) -> bool:
        """parked -> queued (runnable now), if the job is still parked and neither its park
        TTL nor its deadline has passed. False otherwise (nothing changed)."""
        ...

    def cancel_parked(self, job_id: int) -> bool:
        """parked -> cancelled, if the job is still parked; False otherwise. A terminal
        transition: exactly one of this and :meth:`adopt` wins for a parked job."""
        ...

    def sweep(self, hook_max_attempts: int, limit: int = 500) -> SweepSummary:
        """One deadline pass, in one transaction, in this order: (a) expire jobs that are not
        finished and are past their deadline, and parked jobs past their park TTL (a running
        job's lease token is revoked); (b) mark jobs past ``notice_at``, not finished, not
        yet noticed and not past their deadline as noticed. For each, in the same
        transaction, enqueue a hook job (task ``durq.hook:<task>``, key
        ``durq.expire:<id>`` / ``durq.slow:<id>``, so at most one per job and hook). At
        most ``limit`` jobs per step and pass."""

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

    def extend_job_holds(self, holds: Sequence[tuple[int, int]], lease: float) -> None:
        """Extend by ``lease`` seconds from now the live holds that a cancel or an expiry
        left for running limited jobs, given as (job id, lease token) pairs: the worker's
        heartbeat while their stopped bodies still run. Holds gone or lapsed stay so."""
        ...

    def release_job_holds(self, holds: Sequence[tuple[int, int]]) -> int:
        """Delete the holds a cancel or an expiry left for (job id, lease token): the
        bodies are gone, so their slots free (PostgreSQL: idle workers are woken). How many
        were deleted (none for a job that had no limit, or was not running)."""
        ...

    def limit_usage(self) -> list[LimitUsage]:
        """Every limit key with running or queued jobs or live holds, by name."""
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

    # -- soak --

    def storage_bytes(self) -> int:
        """Bytes the database takes on disk now: SQLite, the file with its ``-wal`` and
        ``-shm`` files; PostgreSQL, every table of the schema with its indexes
        and TOAST (``pg_total_relation_size``). ``durq soak`` watches it stay bounded.

        Raises:
            StoreError: PostgreSQL could not be read.
        """

    # -- dependencies and tags (docs/features/dependencies.md, tags.md) --

    def edges(self, job_ids: Sequence[int]) -> list[Edge]:
        """Every dependency edge into or out of these jobs, with both ends' task and state."""
        ...

    def parent_results(self, job_id: int) -> list[ParentResult]:
        """The parents of a job (id order) with their state and JSON result."""
        ...

    def tags_of(self, job_id: int) -> list[str]:
        """The job's tags, sorted."""
        ...

    def reseal(self, prefix: str, seal: Callable[[str], str], chunk: int) -> int:
        """Rewrite payloads, results and steps not stored under ``prefix`` (durq.codecs)."""
        ...

    def stuck_waiting(self) -> list[int]:
        """Ids of waiting jobs whose parents are all terminal (always empty unless a
        transition missed its children: a health check)."""
        ...

    # -- hooks --

    def find(self, queue: str, key: str) -> JobRecord | None:
        """The job of ``queue`` holding idempotency key ``key``, or None."""
        ...

    # -- operating: workers' reports and the dashboard's reads (store/*/dashboard.py) --

    def report_worker(self, worker_id: str, report: WorkerReport) -> None:
        """Mark the worker seen now and store what it reports about itself."""
        ...

    def worker_details(self) -> list[WorkerDetail]:
        """Workers seen within their lease, with their last report, ``rescue_after`` and
        process stamp (:func:`durq.observability.processes.live` narrows them down)."""
        ...

    def recent_batches(self, before: int | None, limit: int) -> list[int]:
        """Ids of up to ``limit`` batches below ``before`` (None: the newest), newest first."""
        ...

    def enqueued_total(self) -> int:
        """Jobs ever inserted (the id sequence; never decreases, also after pruning)."""
        ...

    def job_page(self, f: JobFilter) -> list[JobRecord]:
        """One keyset page of jobs matching ``f``, newest first (no OFFSET, no count).

        Raises:
            ConfigError: an unknown state or a page size outside 1..500.
        """
        ...

    def finished_series(
        self,
        start: float,
        step: float,
        queues: Sequence[str],
        states: Sequence[str] = ("succeeded", "failed"),
    ) -> dict[tuple[str, str], dict[int, int]]:
        """Jobs of ``queues`` finished since ``start`` (epoch s) per (queue, state):
        {bucket: count}, the bucket being ``(finished_at - start) // step``."""
        ...

    def count_jobs(self, f: JobFilter, cap: int) -> int:
        """How many jobs match ``f`` (its cursor included), counted up to ``cap``.

        Raises:
            ConfigError: an unknown state.
        """
        ...

    def finished_timings(
        self, since: float, queues: Sequence[str], limit: int = 10_000
    ) -> list[tuple[str, float, float]]:
        """``(queue, wait, run)`` in seconds of the jobs of ``queues`` that succeeded or
        failed since ``since`` (epoch s), the newest ``limit`` per queue and state: ``wait``
        from the last attempt's ``run_at`` (runnable) to its start, ``run`` from its start
        to its end. Reads the finished index only in that time range."""
        ...

    def why_facts(self, job: JobRecord) -> WhyFacts:
        """The stored facts about why ``job`` waits (limit, pause, live workers)."""
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
        limited: int | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        raise NotImplementedError

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        raise NotImplementedError

    def claim(
        self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
    ) -> list[Claimed]:
        """Claim up to ``limit`` ready jobs of one queue (one transaction)."""
        return self.finish_and_claim((), [queue], tasks, limit, lease, worker_id)[1]

    def finish(self, outcomes: Sequence[Outcome]) -> list[bool]:
        """Record outcomes (one transaction); True per outcome whose token still held."""
        return self.finish_and_claim(outcomes, (), (), 0, 0.0, "")[0]


def unique_key_held(job_id: int) -> JobGone:
    """The error of a replay (:meth:`Store.retry`) whose unique key another live job holds
    now (``unique="active"``: the index ``jobs_unique_active``)."""
    return JobGone(
        f"job {job_id} cannot be retried now: another queued or running job holds its "
        "unique key (unique='active'); retry it once that one has finished"
    )
