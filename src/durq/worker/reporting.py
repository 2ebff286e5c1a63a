"""What the worker logs of each outcome once the claimer has committed it: one event per
attempt (``job_succeeded`` at INFO; retries, snoozes, failures and stale outcomes above)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from durq.model import SNOOZE_KIND, Outcome
from durq.observability import events

if TYPE_CHECKING:
    from durq.worker.state import Attempt, InFlight


def report_outcome(
    worker_id: str, inflight: InFlight, attempt: Attempt, outcome: Outcome, applied: bool
) -> None:
    """Log what became of ``attempt``'s ``outcome`` once the claimer committed it
    (``applied``: the store took it; False: its lease token was no longer current, and a
    limit hold a cancel or an expiry left for it is released through ``inflight``).
    ``worker_id`` names the worker in each line."""
    job = attempt.job
    if applied and outcome.kind == "succeeded":  # every job: no dict, one call
        if events.enabled():
            # whole microseconds by int(): round(x, 6) alone cost a sixth of the line
            took = int((time.monotonic() - attempt.started) * 1_000_000) / 1_000_000
            events.emit_succeeded(job.id, job.queue, job.task, job.attempt, worker_id, took)
        return
    base: dict[str, Any] = {
        "id": job.id,
        "queue": job.queue,
        "task": job.task,
        "attempt": job.attempt,
        "worker_id": worker_id,
    }
    if not applied:  # a cancel or an expiry may have left the job's limit slot held
        inflight.unhold(job.id, job.lease_token)
        events.emit(
            events.STALE_OUTCOME,
            logging.WARNING,
            outcome=outcome.kind,
            **base,
            reason="lease token no longer current (reaped, cancelled or timed out)",
        )
    elif outcome.kind == SNOOZE_KIND:  # the store may have failed it: max_snoozes
        events.emit(events.JOB_SNOOZED, **base, delay=outcome.delay)
    elif outcome.kind == "retry":
        err = outcome.error
        events.emit(
            events.JOB_RETRY_SCHEDULED,
            logging.WARNING,
            **base,
            delay=outcome.delay,
            error=f"{err.type}: {err.message}" if err else "",
            kind=err.kind if err else "",
            traceback=err.traceback if err else "",
        )
    else:
        err = outcome.error
        events.emit(
            events.JOB_FAILED,
            logging.ERROR,
            **base,
            error=f"{err.type}: {err.message}" if err else "",
            kind="failed",
            cause=err.kind if err else "",
            traceback=err.traceback if err else "",
        )
