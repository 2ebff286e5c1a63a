"""Queue pauses: the data, and what a worker does when a task raises :class:`PauseQueue`.

A paused queue is not claimed (both backends' claim statements skip it); jobs already
running finish. ``dq.pause`` / ``dq.resume`` (and ``durq pause`` / ``durq resume``) set and
clear the pause; a task that raises :class:`durq.PauseQueue` gives its job back to the
queue without spending an attempt, pauses the queue with ``source="auto"``, and raises the
alert ``pause:<queue>``, whose cooldown makes many such jobs one alert.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from durq.errors import PauseQueue
from durq.model import AttemptError, Claimed, Outcome
from durq.observability import events

if TYPE_CHECKING:
    from durq.worker.state import Attempt
    from durq.worker.worker import Worker

log = logging.getLogger("durq.worker")

#: The outcome kind the executor gives an attempt whose task raised PauseQueue. It never
#: reaches the claimer's batch: :func:`settle_pause` records it on its own statement.
PAUSE_KIND = "pause_queue"

#: The source recorded for a pause made by a task raising PauseQueue.
AUTO_SOURCE = "auto"

JOB_PAUSED = "job_requeued_paused"
QUEUE_PAUSED = "queue_paused"

#: Tries of the requeue when the store is busy or unreachable before leaving the job to its
#: lease (the reaper then requeues it, with the attempt counted).
REQUEUE_TRIES = 5


def alert_key(queue: str) -> str:
    """The alert key of an automatic pause of ``queue``."""
    return f"pause:{queue}"


def pause_outcome(job: Claimed, exc: PauseQueue, at: float) -> Outcome:
    """The executor's outcome for a task that raised PauseQueue (never stored as is)."""
    error = AttemptError(job.attempt, at, "durq.PauseQueue", exc.reason, "", PAUSE_KIND)
    return Outcome(job.id, job.lease_token, PAUSE_KIND, error=error)


def settle_pause(worker: Worker, attempt: Attempt, outcome: Outcome) -> None:
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
                from durq.worker.services import passing

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
