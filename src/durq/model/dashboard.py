"""Records of the operator's views: what a worker reports about itself, a filtered page of
jobs, and the overview's time series. Plain data; no SQL, no other part of durq."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: States a job list may filter on (``scheduled`` is derived: queued with run_at ahead):
#: every state the overview counts and links to (``waiting`` has its index, ``jobs_waiting``).
LIST_STATES = (
    "scheduled", "queued", "running", "succeeded", "failed", "cancelled", "expired", "parked",
    "waiting",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class InHand:
    """One job a worker holds: its id, task and when its attempt started (epoch seconds)."""

    id: int
    task: str
    started_at: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "task": self.task, "started_at": self.started_at}


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker writes about itself at each beat.

    Attributes:
        pool: where its ``def`` bodies run: ``"threads"`` or ``"processes"`` (``--pool``).
        concurrency: attempts at once.
        version: the durq version it runs.
        in_hand: the jobs it holds now.
        done: attempts that succeeded since it started.
        failed: attempts that failed (retry or for good) since it started.
    """

    pool: str
    concurrency: int
    version: str
    in_hand: tuple[InHand, ...] = ()
    done: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class WorkerDetail:
    """A registered worker with its last report, for ``durq workers`` and the dashboard.

    Times are epoch seconds on the store's clock; ``lease`` and ``rescue_after`` are
    seconds; ``rescue_after`` and ``proc`` as in :class:`durq.model.WorkerInfo`.
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    tasks: tuple[str, ...]
    started_at: float
    last_seen: float
    lease: float
    report: WorkerReport
    rescue_after: float | None = None
    proc: str | None = None


@dataclass(frozen=True, slots=True)
class JobFilter:
    """A page of the job list: filters, and the keyset cursor (no OFFSET).

    Attributes:
        state: one of :data:`LIST_STATES`, or None for any.
        queue, task, key: exact matches, or None.
        tag: only jobs carrying this tag (``options(tags=[...])``; the ``job_tags`` primary
            key), or None.
        text: a substring searched in the payload, meta and errors (a scan: combine it with
            other filters or a time range on a big table), or None.
        since, until: ``created_at`` bounds in epoch seconds (inclusive, exclusive), or None.
        before: the cursor: only jobs whose id is below it (the last id of the previous
            page), or None for the first page.
        limit: rows per page (1 to 500).
    """

    state: str | None = None
    queue: str | None = None
    task: str | None = None
    key: str | None = None
    tag: str | None = None
    text: str | None = None
    since: float | None = None
    until: float | None = None
    before: int | None = None
    limit: int = 50


@dataclass(slots=True)
class Series:
    """Finished jobs per minute over a window: ``start`` (epoch seconds), ``step`` (seconds),
    and per state (``succeeded``, ``failed``) a list of counts, one per step, oldest first."""

    start: float
    step: float
    counts: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WhyFacts:
    """Stored facts about why a job waits, read in one go (see :mod:`durq.observability.why`).

    Attributes:
        now: the store's clock, epoch seconds.
        limit_key, limit_concurrency, limit_rate, limit_per: the job's stored limit (None:
            none); ``limit_per`` in seconds.
        limit_running: ids of running jobs holding ``limit_key`` (at most 10).
        limit_busy: slots of the key in use: running jobs plus live holds.
        limit_starts: starts of the key in the last ``limit_per`` seconds.
        limit_oldest_start: the oldest of those starts (epoch seconds), or None.
        paused: the pause of the job's queue ({"reason", "source", "at"}) or None.
        served: a live worker claims the job's task on its queue.
        holder_alive: for a running job, whether its lease holder is a live worker.
    """

    now: float
    limit_key: str | None = None
    limit_concurrency: int | None = None
    limit_rate: int | None = None
    limit_per: float | None = None
    limit_running: tuple[int, ...] = ()
    limit_busy: int = 0
    limit_starts: int = 0
    limit_oldest_start: float | None = None
    paused: dict[str, Any] | None = None
    served: bool = False
    holder_alive: bool = False


def in_hand_json(report: WorkerReport) -> str:
    """The ``workers.in_hand`` column of a report: a JSON list of {"id", "task", "started_at"}."""
    return json.dumps([h.to_dict() for h in report.in_hand])


def detail_from_row(r: Sequence[Any]) -> WorkerDetail:
    """A :class:`WorkerDetail` from a row of (id, host, pid, queues, tasks, started_at,
    last_seen, lease, pool, concurrency, version, in_hand, done, failed, rescue_after,
    proc), as both backends store it (queues, tasks and in_hand as JSON text)."""
    in_hand = tuple(
        InHand(int(h["id"]), str(h["task"]), float(h["started_at"])) for h in json.loads(r[11])
    )
    report = WorkerReport(str(r[8]), int(r[9]), str(r[10]), in_hand, int(r[12]), int(r[13]))
    return WorkerDetail(
        r[0], r[1], int(r[2]), tuple(json.loads(r[3])), tuple(json.loads(r[4])),
        float(r[5]), float(r[6]), float(r[7]), report,
        float(r[14]) if r[14] is not None else None, str(r[15]) if r[15] is not None else None,
    )  # fmt: skip
