"""Why is this job not running now? One sentence from stored facts, for ``durq jobs show``
and the dashboard's job page.

The causes, in the order they are checked: finished; running (leased by worker W, or by a
worker no longer seen); waiting for its parents (after=); parked; the queue paused; a
damaged row (its run_at is not a time); waiting for backoff until T; scheduled for T; no
live worker has its task (stranded); its concurrency limit full (which key, held by which
jobs); its rate limit spent (until when); otherwise ready and waiting its turn.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from durq.model import JobRecord, WhyFacts


@dataclass(frozen=True, slots=True)
class Why:
    """The answer: ``cause`` is a stable word for programs (``finished``, ``running``,
    ``lease_orphaned``, ``waiting``, ``parked``, ``paused``, ``damaged``, ``backoff``,
    ``scheduled``, ``stranded``, ``concurrency_limit``, ``rate_limit``, ``ready``);
    ``sentence`` is for people."""

    cause: str
    sentence: str

    def to_dict(self) -> dict[str, str]:
        return {"cause": self.cause, "sentence": self.sentence}


def clock(ts: float | None) -> str:
    """Local time of ``ts`` (epoch seconds) as ``YYYY-MM-DD HH:MM:SS``; ``-`` for None."""
    if ts is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return str(ts)


def _in(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _last_error(job: JobRecord) -> str:
    try:
        errors = json.loads(job.errors or "[]")
    except ValueError:
        return ""
    if not errors:
        return ""
    last = errors[-1]
    return f" (attempt {last.get('attempt')} failed: {last.get('type')}: {last.get('message')})"


def why_not_running(job: JobRecord, facts: WhyFacts) -> Why:
    """Why ``job`` (as stored) is not running now, from ``facts`` read by
    :meth:`durq.store.base.Store.why_facts` in the same moment. Never raises."""
    now = facts.now
    if job.state in ("succeeded", "failed", "cancelled", "expired"):
        ended = {"succeeded": "it succeeded", "failed": "it failed for good",
                 "cancelled": "it was cancelled", "expired": "it expired"}[job.state]  # fmt: skip
        return Why("finished", f"{ended} (finished {clock(job.finished_at)}); "
                   "`durq retry` runs it again with a fresh attempt budget.")  # fmt: skip
    if job.state == "running":
        worker = job.worker_id or "?"
        if facts.holder_alive:
            return Why(
                "running",
                f"it is running: leased by worker {worker} until {clock(job.lease_expires_at)}.",
            )
        return Why(
            "lease_orphaned",
            f"it is leased by worker {worker}, which is no longer seen; the reaper returns it "
            f"to the queue once its lease ends at {clock(job.lease_expires_at)}.",
        )
    if job.state == "waiting":
        return Why(
            "waiting",
            "it is waiting for its parent jobs (after=) to finish: it is queued in the "
            "transaction that ends the last of them.",
        )
    if job.state == "parked":
        until = f" (it expires {clock(job.park_expires_at)})" if job.park_expires_at else ""
        return Why("parked", f"it is parked: it waits to be adopted or cancelled{until}.")
    paused = facts.paused
    if paused is not None:
        return Why(
            "paused",
            f"queue {job.queue!r} is paused since {clock(paused.get('at'))} by "
            f"{paused.get('source')}: {paused.get('reason')}; resume the queue to run it.",
        )
    if not isinstance(job.run_at, int | float):  # a damaged row (SQLite keeps any text)
        return Why("damaged", f"its run_at is {job.run_at!r}, not a time: the row is damaged.")
    if job.run_at > now:
        if job.attempts > 0:
            return Why(
                "backoff",
                f"it is waiting for backoff until {clock(job.run_at)} (in {_in(job.run_at - now)})"
                f"{_last_error(job)}.",
            )
        return Why("scheduled", f"it is scheduled for {clock(job.run_at)} (in {_in(job.run_at - now)}).")  # fmt: skip
    if not facts.served:
        return Why(
            "stranded",
            f"no live worker runs task {job.task!r} on queue {job.queue!r} (stranded): start a "
            f"worker that registers it.",
        )
    cap = facts.limit_concurrency
    if facts.limit_key is not None and cap is not None and facts.limit_busy >= cap:
        ids = facts.limit_running
        held = f"job{'s' if len(ids) > 1 else ''} {', '.join(str(i) for i in ids)}"
        return Why(
            "concurrency_limit",
            f"concurrency limit {facts.limit_key!r} is full ({facts.limit_busy}/{cap} in use, "
            f"held by {held if ids else 'holds outside the queue'}).",
        )
    rate, per = facts.limit_rate, facts.limit_per
    if facts.limit_key is not None and rate is not None and per and facts.limit_starts >= rate:
        nxt = (facts.limit_oldest_start or now) + per
        return Why(
            "rate_limit",
            f"rate limit {facts.limit_key!r} is spent ({facts.limit_starts} starts in the last "
            f"{per:g}s, at most {rate}); the next slot opens {clock(nxt)}.",
        )
    return Why("ready", "it is ready: the next free worker slot on its queue claims it.")
