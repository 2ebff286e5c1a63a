"""What a worker does when a task raised :class:`durq.PauseQueue`: give the job back to
its queue without spending an attempt, pause the queue, raise the alert (see
:mod:`durq.pause` for the names and docs/features/pause.md for the contract)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from durq.model import Outcome
from durq.observability import events
from durq.pause import AUTO_SOURCE, JOB_PAUSED, QUEUE_PAUSED, REQUEUE_TRIES, alert_key
from durq.worker.service import passing
from durq.worker.state import Attempt

if TYPE_CHECKING:
    from durq.worker.host import WorkerHost

log = logging.getLogger("durq.worker")


def settle_pause(worker: WorkerHost, attempt: Attempt, outcome: Outcome) -> None:
    """Record a PauseQueue outcome, on the calling (task) thread, outside the claimer's batch.

    In one store transaction the job goes back to ``queued`` with its attempt handed back
    (only if its lease token still holds) and its queue is paused with source ``auto`` (if
    it is not paused already). Then the attempt is settled and the claimer woken, and the
    alert ``pause:<queue>`` is raised through the app's hooks. Never raises: a store that
    stays unavailable leaves the job to its lease and the reaper.
    """
    job = attempt.job
    reason = outcome.error.message if outcome.error else ""
    store = worker.app.store
    result: tuple[bool, bool] | None = None
    pause = 0.05
    try:
        for n in range(REQUEUE_TRIES):
            try:
                result = store.requeue_paused(job.id, job.lease_token, job.queue, reason)
                break
            except Exception as exc:  # noqa: BLE001 - logged; the lease covers the job
                if not passing(exc) or n == REQUEUE_TRIES - 1:
                    log.warning(
                        "could not requeue job %s after PauseQueue: %s (the reaper will)",
                        job.id,
                        exc,
                    )
                    break
                time.sleep(pause)
                pause *= 2
    finally:
        worker.inflight.settle(attempt)
        worker.claimer.wake()
    if result is None:
        return
    requeued, paused_now = result
    if not requeued:
        worker.report(attempt, outcome, False)  # stale_outcome: reaped or cancelled meanwhile
    else:
        events.emit(
            JOB_PAUSED,
            logging.INFO,
            id=job.id,
            queue=job.queue,
            task=job.task,
            attempt=job.attempt,
            reason=reason,
        )
    if paused_now:
        events.emit(
            QUEUE_PAUSED, logging.WARNING, queue=job.queue, source=AUTO_SOURCE, reason=reason
        )
    try:
        worker.app.alert(
            alert_key(job.queue),
            f"queue {job.queue!r} paused by task {job.task} (job {job.id}): {reason}",
            severity="warning",
        )
    except Exception as exc:  # noqa: BLE001 - an alert must not break the worker
        log.warning("could not raise the pause alert for queue %s: %s", job.queue, exc)
