"""Batches, the parts both backends share: the records and the outcome rule.

A batch row moves ``building`` (its ``with dq.batch()`` block is open; members are being
added) → ``open`` (sealed: it may fire) → ``done`` (its callback was enqueued). Retrying a
member of a ``done`` batch puts it back to ``open``, so it fires again when that member
lands. See docs/features/batches.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: States a member can end in. A member in any other state (queued, running, and states
#: other features add, such as parked) keeps its batch from completing.
TERMINAL = ("succeeded", "failed", "cancelled", "expired")

#: SQL text of TERMINAL for ``state NOT IN (...)``.
TERMINAL_SQL = "(" + ", ".join(f"'{s}'" for s in TERMINAL) + ")"

BUILDING, OPEN, DONE = "building", "open", "done"

#: ``aborted`` of a batch whose unfinished members were deleted by ``dq.purge``.
PURGED_REASON = "purged: unfinished members were deleted by dq.purge"


@dataclass(frozen=True, slots=True)
class NewBatch:
    """A batch to create. ``on_complete`` is the callback's task name (None: no callback);
    ``queue``, ``priority`` and ``max_attempts`` are its job's; ``meta`` is JSON text."""

    on_complete: str | None
    queue: str
    priority: int
    max_attempts: int
    meta: str


@dataclass(slots=True)
class BatchRecord:
    """A batch as stored, with its members counted by stored state at read time."""

    id: int
    state: str
    on_complete: str | None
    queue: str
    priority: int
    max_attempts: int
    meta: str
    size: int
    fired: int
    outcome: str | None
    counts: str | None  # the counts the last callback was given (JSON), or None
    aborted: str | None
    callback_job_id: int | None
    created_at: float
    sealed_at: float | None
    completed_at: float | None
    members: dict[str, int] = field(default_factory=dict)


def outcome_of(counts: dict[str, int], aborted: bool) -> str:
    """``completed`` when every member succeeded, ``failed`` when none did, else ``partial``.

    An empty batch is ``completed``. A batch whose block raised (``aborted``) is never
    ``completed``: it lacks the members the block did not get to add, so it is ``partial``
    when some member succeeded and ``failed`` otherwise.
    """
    total = sum(counts.values())
    ok = counts.get("succeeded", 0)
    if aborted:
        return "partial" if ok else "failed"
    if ok == total:
        return "completed"
    return "failed" if ok == 0 else "partial"


def callback_payload(batch_id: int, outcome: str, counts: dict[str, int], meta: str) -> str:
    """The callback job's payload: its keyword arguments as JSON."""
    try:
        meta_value: Any = json.loads(meta)
    except ValueError:  # a damaged row still fires; the callback sees the raw text
        meta_value = meta
    body = {"batch_id": batch_id, "outcome": outcome, "counts": counts, "meta": meta_value}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def callback_key(batch_id: int, firing: int) -> str:
    """The idempotency key of the ``firing``-th callback job (1-based): a second insert of
    the same firing finds the key taken and adds nothing (a backstop; the batch row's lock
    is what makes it fire once)."""
    return f"durq:batch:{batch_id}:{firing}"
