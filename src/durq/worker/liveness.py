"""Rescue in seconds: each worker's liveness beat, and the leader duty ``rescue``.

Every worker process beats its own ``workers`` row about every second
(:data:`BEAT_INTERVAL`), apart from its job leases (extended every lease/3). The leader of
the duty ``rescue`` (every SQLite worker; one elected PostgreSQL worker, with stand-ins)
then returns at once the running jobs of a worker that is dead:

- its row was not beaten for its ``rescue_after`` seconds (default :data:`RESCUE_AFTER`,
  ``durq worker --rescue-after``), measured on the store's clock; or
- it runs on the leader's host, in the leader's pid namespace and since the same boot, and
  its process is gone (``os.kill(pid, 0)``) or its pid now belongs to another process (the
  start time in ``/proc/<pid>/stat`` differs from the one it stamped).

The effect is the reaper's (attempt counted, ``lease_lost`` entry, fencing token cleared),
only without waiting for each job's lease, which stays the backstop. A worker that was
merely frozen (SIGSTOP, a VM pause) and comes back is fenced out as before: its late
outcomes and lease extensions are refused, and at its first beat it sees that it was
rescued (the row's ``rescues`` count grew), checks its leases at once, and every attempt
taken from it reports ``lease_lost``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from durq.hooks import fail_tasks
from durq.observability import events
from durq.observability.processes import proc_stamp, process_gone
from durq.worker.service import Service, passing, store_waiting

if TYPE_CHECKING:
    from durq.worker.host import WorkerHost

#: Seconds between liveness beats.
BEAT_INTERVAL = 1.0
#: Default seconds without a beat after which a worker counts as dead.
RESCUE_AFTER = 5.0

#: Events: the leader returned dead workers' jobs; a worker learnt its own were taken.
WORKERS_RESCUED = "workers_rescued"
WORKER_FENCED = "worker_fenced"


class Liveness(Service):
    """Beats the worker's row every ``interval`` seconds and, on the leader of the duty
    ``rescue``, returns dead workers' jobs (one read per pass when nobody is dead).

    Args:
        worker: the worker (its app, id and stats).
        rescue_after: seconds without a beat after which this worker counts as dead
            (None: never by staleness; its jobs then come back by lease expiry or, on the
            same host, when its process is gone).
        on_rescued: called when a beat finds that this worker's jobs were rescued (the
            worker checks its leases at once), or that its row is gone.
        interval: seconds between beats and passes.
    """

    name = "liveness"

    def __init__(
        self,
        worker: WorkerHost,
        rescue_after: float | None,
        on_rescued: Callable[[], None],
        interval: float = BEAT_INTERVAL,
    ) -> None:
        super().__init__(worker)
        self.worker = worker
        self.rescue_after = rescue_after
        self.on_rescued = on_rescued
        self.interval = interval
        self.host = socket.gethostname()
        self.stamp = proc_stamp(os.getpid())
        self._rescues: int | None = None
        self._hand: tuple[int, ...] | None = None  # the job ids of the last report written

    def run(self) -> None:
        first = True
        while first or not self.sleep(self.interval):
            first = False
            try:
                self.beat()
                self.rescue_once()
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)

    def beat(self) -> None:
        """One liveness beat; on learning that this worker was rescued, ``on_rescued()``."""
        w = self.worker
        rescues = w.app.store.beat_worker(w.id, self.rescue_after, self.stamp)
        if rescues is None or (self._rescues is not None and rescues > self._rescues):
            events.emit(WORKER_FENCED, logging.WARNING, worker_id=w.id, row_gone=rescues is None)
            self.on_rescued()
        self._rescues = rescues
        self.report_changes()

    def report_changes(self) -> None:
        """Write the worker's report (:meth:`WorkerHost.self_report`) when the jobs in hand
        changed since the last one this loop wrote. The heartbeat writes it every lease / 3
        (10 s) anyway; without this, a job shorter than that never showed as in hand in
        ``durq workers`` and the dashboard. One small write a second at most, only while
        the jobs in hand change."""
        w = self.worker
        report = w.self_report()
        hand = tuple(h.id for h in report.in_hand)
        if hand != self._hand:
            w.app.store.report_worker(w.id, report)
            self._hand = hand

    def rescue_once(self) -> None:
        """One pass of the duty ``rescue`` if this process leads it."""
        w = self.worker
        store = w.app.store
        stale = max(3 * self.interval, self.rescue_after or RESCUE_AFTER)
        if not store.lead("rescue", stale_after=stale):
            return
        dead = [
            worker_id
            for worker_id, pid, stamp in store.local_workers(self.host)
            if worker_id != w.id and process_gone(pid, stamp, self.stamp)
        ]
        summary = store.rescue(dead, fail_tasks(w.app))
        if not summary.workers:
            return
        w.stats.rescued += summary.recovered
        events.emit(
            WORKERS_RESCUED,
            logging.WARNING,
            workers=list(summary.workers),
            recovered=summary.recovered,
            failed=summary.failed,
            ids=list(summary.job_ids[:50]),
        )
