"""Queue pauses: the names, the alert key and the outcome of a task that raised
:class:`PauseQueue` (the worker's part is :mod:`durq.worker.pausing`).

A paused queue is not claimed (both backends' claim statements skip it); jobs already
running finish. ``dq.pause`` / ``dq.resume`` (and ``durq pause`` / ``durq resume``) set and
clear the pause; a task that raises :class:`durq.PauseQueue` gives its job back to the
queue without spending an attempt, pauses the queue with ``source="auto"``, and raises the
alert ``pause:<queue>``, whose cooldown makes many such jobs one alert.
"""

from __future__ import annotations

from durq.errors import PauseQueue
from durq.model import AttemptError, Claimed, Outcome

#: The outcome kind the executor gives an attempt whose task raised PauseQueue. It never
#: reaches the claimer's batch: :func:`durq.worker.pausing.settle_pause` records it on its own statement.
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
