"""Raw figures the store reads for the status snapshot: workers, counts, pauses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as registered in the store (for status: live workers, stranded jobs).

    ``wedged`` is the number of its slots held by task bodies past their timeout, as of its
    last heartbeat (a ``def`` task that never returns keeps its thread and its slot).
    ``loop_blocked`` is how long (seconds) the event loop of its ``async def`` tasks had
    run no callback at its last heartbeat, once past its threshold (0.0 otherwise).
    ``rescue_after`` (seconds without a liveness beat after which it counts as dead; None:
    never by staleness) and ``proc`` (its process stamp) are what its liveness beats wrote
    (None before the first): :func:`durq.observability.processes.live` reads them.
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    tasks: tuple[str, ...]
    started_at: float
    last_seen: float
    lease: float
    wedged: int = 0
    loop_blocked: float = 0.0
    rescue_after: float | None = None
    proc: str | None = None


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
    # (queue, state) pairs whose count is an estimate (PostgreSQL: big finished states)
    estimated: set[tuple[str, str]] = field(default_factory=set)
