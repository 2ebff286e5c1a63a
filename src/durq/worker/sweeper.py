"""The deadline sweeper: a leader-only worker service next to the reaper.

Each pass (:meth:`durq.Durq.sweep`, one transaction) expires jobs past their deadline and
parked jobs past their park TTL, then marks jobs past ``notice_after`` as slow, enqueuing one
hook job for each (:mod:`durq.deadlines`). Everything is computed from stored times, so a
worker that was down for longer than a job's deadline expires it at its first pass, and the
job gets no slow notice first (the notice step skips jobs past their deadline).

The worker runs one pass at start (after the reaper, before it claims anything) and then one
every ``sweep_interval`` seconds (default 1).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from durq.deadlines import install_hooks
from durq.model import HOOK_MAX_ATTEMPTS
from durq.observability import events
from durq.worker.service import Service, passing, store_waiting

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.host import WorkerHost

#: Seconds between passes (read when a worker starts; an app may set it before that).
SWEEP_INTERVAL = 1.0

#: Events of a pass that changed something (JSON lines, like every durq event).
JOBS_EXPIRED = "jobs_expired"
JOBS_SLOW = "jobs_slow"

#: Jobs per step and pass; a pass that hit it runs again at once.
SWEEP_LIMIT = 500


class Sweeper(Service):
    """Runs the deadline sweep on the leader of the duty ``"sweeper"`` (``store.lead``; a
    stand-in that sweeps beside a frozen leader is harmless, since every
    change is conditional and each hook job has a unique key)."""

    name = "sweeper"

    def __init__(self, worker: WorkerHost, interval: float | None = None) -> None:
        super().__init__(worker)
        self.worker = worker
        self.interval = SWEEP_INTERVAL if interval is None else interval

    def run(self) -> None:

        while not self.sleep(self.interval):
            try:
                self.sweep_once()
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)

    def sweep_once(self) -> None:
        """One pass if this process leads; repeated while a step hit :data:`SWEEP_LIMIT`."""
        store = self.worker.app.store
        stale = max(3 * self.worker.reap_interval, 1.0)
        if not store.lead("sweeper", stale_after=stale):
            return
        while True:
            summary = store.sweep(HOOK_MAX_ATTEMPTS, SWEEP_LIMIT)
            if summary.expired:
                ids = list(summary.expired[:50])
                events.emit(JOBS_EXPIRED, logging.WARNING, count=len(summary.expired), ids=ids)
            if summary.noticed:
                ids = list(summary.noticed[:50])
                events.emit(JOBS_SLOW, logging.WARNING, count=len(summary.noticed), ids=ids)
            if max(len(summary.expired), len(summary.noticed)) < SWEEP_LIMIT:
                return
            if self.stopping:
                return


def attach(worker: WorkerHost, app: Registry) -> Sweeper:
    """The worker's hook, called before it lists its task names: register the hook task of
    each of ``app``'s tasks (so the worker claims their hook jobs), and make its sweeper."""
    install_hooks(app)
    return Sweeper(worker)
