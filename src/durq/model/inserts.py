"""What an enqueue hands the store, and what the insert came to."""

from __future__ import annotations

from dataclasses import dataclass

from durq.model.dependencies import Parent
from durq.model.limits import JobLimit


@dataclass(slots=True)
class NewJob:
    """A job to insert. ``payload`` and ``meta`` are already JSON-encoded.

    It may run at ``run_at`` (seconds since the epoch) when given, else ``delay`` seconds
    after the store's clock at insert time.

    Treat it as immutable (change one with ``dataclasses.replace``): it is not declared
    frozen only because a frozen dataclass of 28 fields costs about 4 µs to build, which
    was a sixth of an enqueue's own time (issue 14).
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
    batch_id: int | None = None  # joins this batch (must be building); see durq.batches
    # -- parked / deadlines -- (all optional; see durq.deadlines)
    park: bool = False  # stored as 'parked' instead of 'queued'
    park_ttl: float | None = None  # seconds after created_at until a parked job expires
    deadline: float | None = None  # absolute, epoch seconds
    deadline_in: float | None = None  # seconds after created_at (when deadline is None)
    notice_after: float | None = None  # seconds after created_at until on_slow is due
    limit: JobLimit | None = None
    # -- hooks -- (see durq.hooks)
    on_fail: bool = False  # its task has on_fail: the reaper / a release insert the hook job
    hook_queue: str | None = None  # the queue of its hook jobs (None: its own queue)
    # -- workflows -- (docs/features/dependencies.md, tags.md, uniqueness.md, fairness.md)
    parents: tuple[Parent, ...] = ()  # it waits for these (ids, or earlier jobs of the insert)
    tags: tuple[str, ...] = ()
    unique_key: str | None = None  # options(key=..., unique="active" | "period:N")
    unique_period: float | None = None  # seconds the key is held (None: while active)
    fair_key: str | None = None  # claims go round-robin over these

    def with_payload(self, payload: str) -> NewJob:
        """This job with another (encoded) ``payload``, every other field the same: the
        rows of ``enqueue_many`` built from one template (``dataclasses.replace`` checks
        its keywords and costs several times as much)."""
        return NewJob(
            self.queue, self.task, payload, self.priority, self.run_at, self.max_attempts,
            self.key, self.meta, self.delay, self.batch_id, self.park, self.park_ttl,
            self.deadline, self.deadline_in, self.notice_after, self.limit, self.on_fail,
            self.hook_queue, self.parents, self.tags, self.unique_key, self.unique_period,
            self.fair_key,
        )  # fmt: skip

    @property
    def plain(self) -> bool:
        """True for a row that is one INSERT and nothing else: no key, batch, limit, hooks,
        parked / deadline columns or workflow (the stores' one-statement enqueue)."""
        return (
            self.key is None
            and self.batch_id is None
            and self.limit is None
            and not self.parents
            and not self.tags
            and self.unique_key is None
            and self.fair_key is None
            and not self.on_fail
            and self.hook_queue is None
            and not self.park
            and self.park_ttl is None
            and self.deadline is None
            and self.deadline_in is None
            and self.notice_after is None
        )

    @property
    def has_workflow(self) -> bool:
        """True when the row needs dependency, tag, uniqueness or fairness work."""
        return (
            bool(self.parents or self.tags)
            or self.unique_key is not None
            or (self.fair_key is not None)
        )

    @property
    def has_hooks(self) -> bool:
        """True when the row needs its on_fail flag or hook queue set after its insert."""
        return self.on_fail or self.hook_queue is not None

    @property
    def has_extras(self) -> bool:
        """True when the row needs the parked / deadline columns set after its insert."""
        return (
            self.park
            or self.park_ttl is not None
            or self.deadline is not None
            or self.deadline_in is not None
            or self.notice_after is not None
        )


@dataclass(slots=True)
class Inserted:
    """What an insert came to: the job's id, whether it is new (False: its key existed),
    and, for a new job, its run_at and created_at on the store's clock.

    Treat it as immutable: as :class:`NewJob`, it is not declared frozen because a frozen
    one costs about 1 µs to build (8 times a plain one), a third of the PostgreSQL
    store's own time per row of a COPY ``enqueue_many``.
    """

    id: int
    created: bool
    run_at: float
    created_at: float


@dataclass(slots=True)
class InsertedRows:
    """What :meth:`durq.store.base.Store.enqueue_rows` came to: the new jobs' ids in the
    order of their payloads, and the ``run_at`` and ``created_at`` they all share (epoch
    seconds on the store's clock)."""

    ids: list[int]
    run_at: float
    created_at: float
