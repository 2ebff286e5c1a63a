"""The pruner: the worker's retention service (DESIGN §2: terminal rows are pruned by a
retention policy). Leader-only, like the reaper: on PostgreSQL one process prunes — among
the workers that run a pruner: the duty ``"pruner"`` is led on its own (with a stand-in when
the leader's stamp goes stale, harmless since each delete is conditional);
on SQLite every worker may, each chunk being its own short write transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from durq.errors import ConfigError
from durq.observability import events
from durq.retention import DEFAULT_CHUNK, prune, prune_fair_turns, worker_policy
from durq.worker.service import Service, passing, store_waiting

if TYPE_CHECKING:
    from durq.worker.host import WorkerHost

#: Event logged after a pass that deleted anything: ``{"deleted": n, "states": {...},
#: "fair_turns": n}`` (jobs per state; the turn rows of fair keys left without a live job).
JOBS_PRUNED = "jobs_pruned"

#: Seconds between passes by default, and before the first one (so that a worker's start
#: is not slowed, and a crash loop does not prune in a loop).
DEFAULT_PRUNE_INTERVAL = 300.0
FIRST_PASS_AFTER = 5.0


class Pruner(Service):
    """Deletes finished jobs past their state's retention every ``interval`` seconds, and
    then the fair-claim turns of keys left without a live job.

    Args:
        worker: the worker it belongs to.
        retention: state -> seconds (or None: keep for ever), applied over
            :data:`durq.retention.DEFAULT_RETENTION` (succeeded 7 days, failed, cancelled
            and expired 30 days).
        interval: seconds between passes (> 0).
        chunk: rows deleted per transaction.

    Raises:
        ConfigError: a bad state, age, interval or chunk.
    """

    name = "pruner"

    def __init__(
        self,
        worker: WorkerHost,
        retention: Mapping[str, float | str | None] | None = None,
        interval: float = DEFAULT_PRUNE_INTERVAL,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        super().__init__(worker)
        if not (isinstance(interval, int | float) and interval > 0):
            raise ConfigError(f"prune_interval must be > 0 seconds, not {interval!r}")
        self.worker = worker
        self.ages = worker_policy(retention)
        self.interval = float(interval)
        self.chunk = chunk
        self.last: dict[str, int] | None = None

    @classmethod
    def configure(
        cls,
        worker: WorkerHost,
        retention: Mapping[str, float | str | None] | None,
        interval: float | None,
    ) -> Pruner | None:
        """The worker's hook: a Pruner, or None when pruning is off (``interval`` None or
        0). A retention that keeps every state still gets one: it deletes no job but sweeps
        the fair-claim turns of keys without a live job, which nothing else would."""
        if interval is None or interval == 0:
            return None
        return cls(worker, retention, interval)

    def run(self) -> None:
        wait = min(FIRST_PASS_AFTER, self.interval)
        while not self.sleep(wait):
            wait = self.interval
            try:
                self.prune_once()
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)

    def prune_once(self) -> dict[str, int] | None:
        """One pass, if this process leads now; the counts per state, or None."""
        w = self.worker
        store = w.app.store
        # its own duty (issue 13): a worker started with --no-prune has no Pruner and never
        # asks, so it cannot hold retention back for the workers that prune; the stamp is
        # renewed once a pass, so a stand-in waits three passes
        if not store.lead("pruner", stale_after=max(3 * self.interval, 1.0)):
            return None
        counts = prune(store, self.ages, None, self.chunk)
        turns = prune_fair_turns(store, None, self.chunk)  # after the jobs: theirs go too
        self.last = counts
        deleted = sum(counts.values())
        if deleted or turns:
            events.emit(JOBS_PRUNED, deleted=deleted, states=counts, fair_turns=turns)
        return counts
