"""One status snapshot, used by ``durq status``, its ``--json`` and (later) the dashboard."""

from __future__ import annotations

from typing import Any

from durq.model import StatusData
from durq.observability import processes

STATES = (
    "scheduled", "queued", "running", "succeeded", "failed", "cancelled", "expired",
    "parked", "waiting",
)  # fmt: skip


def snapshot(data: StatusData) -> dict[str, Any]:
    """Turn raw store figures into the status document.

    Returns a dict::

        {"now": float,
         "queues": {name: {"counts": {state: int, ...}, "oldest_queued_age": seconds | None,
                           "in_backoff": int, "stranded": int, "paused": {...} | None,
                           "estimated": [state, ...]}},
         "stranded": [{"queue", "task", "jobs"}],   # queued jobs no live worker can run
         "workers": [{"id", "host", "pid", "queues", "tasks", "last_seen_age",
                      "wedged", "loop_blocked"}],  # wedged: slots held by bodies
                      # that would not stop; loop_blocked: seconds its async loop is blocked
         "last_reap": {"at", "recovered", "failed"} | None}

    ``in_backoff`` counts scheduled jobs that already used an attempt (retries waiting).
    ``estimated`` names the states whose count is an estimate (PostgreSQL, a finished state
    of over 10,000 jobs in that queue: the planner's figure, not a count).
    A worker is live while it beat within its lease (its ``rescue_after`` when shorter)
    and, on this host, its process is still there (:func:`durq.observability.processes.live`).
    """
    now = data.now
    queues: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        if name not in queues:
            queues[name] = {
                "counts": dict.fromkeys(STATES, 0),
                "oldest_queued_age": None,
                "in_backoff": 0,
                "stranded": 0,
                "paused": None,
                "estimated": [],
            }
        return queues[name]

    for (queue, state, later, retried), n in data.counts.items():
        q = entry(queue)
        shown = "scheduled" if state == "queued" and later else state
        q["counts"][shown] = q["counts"].get(shown, 0) + n
        if shown == "scheduled" and retried:
            q["in_backoff"] += n
    for queue, state in sorted(data.estimated):
        entry(queue)["estimated"].append(state)
    for queue, oldest in data.oldest_ready.items():
        entry(queue)["oldest_queued_age"] = max(0.0, now - oldest)
    for queue, info in data.paused.items():
        entry(queue)["paused"] = info

    live = processes.live(data.workers, now)
    served = {(q, t) for w in live for q in w.queues for t in w.tasks}
    stranded = []
    for queue, task, n in data.queued_tasks:
        if (queue, task) not in served:
            stranded.append({"queue": queue, "task": task, "jobs": n})
            entry(queue)["stranded"] += n
    return {
        "now": now,
        "queues": dict(sorted(queues.items())),
        "stranded": stranded,
        "workers": [
            {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "queues": list(w.queues),
                "tasks": list(w.tasks),
                "last_seen_age": max(0.0, now - w.last_seen),
                "wedged": w.wedged,
                "loop_blocked": w.loop_blocked,
            }
            for w in live
        ],
        "last_reap": data.last_reap,
    }
