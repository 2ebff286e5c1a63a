"""The operator's views, built from the store's reads: live workers, the overview's series,
pages of jobs and why a job waits. ``durq workers``, ``durq jobs show``, ``durq status`` and
the dashboard all read through here; none of them holds SQL.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from durq.job import Job
from durq.model import AttemptError, Edge, JobFilter, JobRecord, WorkerDetail
from durq.model.dependencies import PARENT_FAILED_KIND, UNSTORABLE_PAYLOAD_KIND
from durq.model.jobs import HISTORY_TRIMMED_KIND, HOOK_TASK_PREFIX, TERMINAL_STATES
from durq.observability import processes
from durq.observability.why import Why, why_not_running
from durq.store.base import Store

#: The overview's window (seconds) and bucket (seconds): the last hour, per minute.
SERIES_WINDOW = 3600.0
SERIES_STEP = 60.0


def is_hook(task: str) -> bool:
    """True for durq's internal hook jobs (``durq.hook:<task>``: on_fail, on_expire,
    on_slow), which lists mark as such."""
    return task.startswith(HOOK_TASK_PREFIX)


def worker_row(w: WorkerDetail, now: float) -> dict[str, Any]:
    """One live worker as a JSON-ready dict (times in epoch seconds, ages in seconds)."""
    r = w.report
    return {
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "pool": r.pool,
        "queues": list(w.queues),
        "concurrency": r.concurrency,
        "version": r.version,
        "started_at": w.started_at,
        "uptime": max(0.0, now - w.started_at),
        "last_beat": w.last_seen,
        "last_beat_age": max(0.0, now - w.last_seen),
        "busy": len(r.in_hand),
        "state": "busy" if r.in_hand else "idle",
        "in_hand": [
            {
                "id": h.id,
                "task": h.task,
                "started_at": h.started_at,
                "running_for": max(0.0, now - h.started_at),
            }
            for h in r.in_hand
        ],
        "done": r.done,
        "failed": r.failed,
    }


def workers(store: Store) -> list[dict[str, Any]]:
    """Live workers (:func:`durq.observability.processes.live`: beaten within their lease,
    or their ``rescue_after`` when shorter, and not gone from this host), by host and id:
    see :func:`worker_row`."""
    now = store.now()
    return [worker_row(w, now) for w in processes.live(store.worker_details(), now)]


def series(store: Store, queues: list[str], now: float | None = None) -> dict[str, Any]:
    """Throughput and failures per minute over the last hour, for each of ``queues`` (the
    queues of a status snapshot)::

        {"start": epoch s, "step": 60.0, "buckets": 60,
         "queues": {queue: {"succeeded": [int] * 60, "failed": [int] * 60}}}
    """
    now = store.now() if now is None else now
    buckets = int(SERIES_WINDOW // SERIES_STEP)
    # whole minutes, the current one last: [start, start + step) ... [.., now's minute end)
    start = (now // SERIES_STEP + 1) * SERIES_STEP - SERIES_WINDOW
    raw = store.finished_series(start, SERIES_STEP, queues)
    out: dict[str, dict[str, list[int]]] = {}
    for (queue, state), by_bucket in raw.items():
        row = out.setdefault(queue, {"succeeded": [0] * buckets, "failed": [0] * buckets})
        for bucket, n in by_bucket.items():
            if 0 <= bucket < buckets:
                row[state][bucket] += n
    return {"start": start, "step": SERIES_STEP, "buckets": buckets, "queues": out}


def job_page(store: Store, f: JobFilter) -> tuple[list[Job], int | None]:
    """A page of jobs and the cursor of the next one (None: this was the last page).

    Raises:
        ConfigError: a bad filter.
    """
    records = store.job_page(f)
    cursor = records[-1].id if len(records) == f.limit else None
    return [Job(store, r) for r in records], cursor


def why(store: Store, record: JobRecord) -> Why:
    """Why the stored job is not running now (:func:`durq.observability.why.why_not_running`)."""
    return why_not_running(record, store.why_facts(record))


#: History entries that are no failure: an operator's action (a replay, a cancel of a
#: running job) or an attempt handed back without spending it (a snooze).
INFO_KINDS = frozenset({"replayed", "cancelled", "snoozed", HISTORY_TRIMMED_KIND})
#: The entry a replay appends (``dq.retry``): it starts a new run of the job.
REPLAYED_KIND = "replayed"
#: Attempts that ended for a reason outside the body: its worker died or lost the lease (a
#: rescue, the reaper), was stopped (a shutdown past the free requeues), the deadline
#: passed, a parent failed.
WARN_KINDS = frozenset({"lease_lost", "shutdown", "expired", "parent_failed"})


def tone(outcome: str) -> str:
    """How a page colours an attempt's outcome (an entry's kind, or ``succeeded`` /
    ``running``): ``ok``, ``running``, ``info`` (:data:`INFO_KINDS`), ``warn``
    (:data:`WARN_KINDS`), else ``error`` (the body raised, timed out, could not run)."""
    if outcome in ("succeeded", "running"):
        return "ok" if outcome == "succeeded" else "running"
    if outcome in INFO_KINDS:
        return "info"
    return "warn" if outcome in WARN_KINDS else "error"


#: Entries of a job that ended without running, by kind: what a page calls them instead
#: of an attempt (they carry ``attempt`` 0).
NOT_RUN_LABELS = {PARENT_FAILED_KIND: "cancelled", UNSTORABLE_PAYLOAD_KIND: "not run"}


def attempts(job: Job) -> list[dict[str, Any]]:
    """Every attempt of ``job`` that has a record, oldest first, as JSON-ready dicts:
    ``attempt`` (its number, or None for a row that is no attempt), ``label`` (``attempt
    N``, or what the row is), ``started_at``, ``ended_at`` (epoch s or None),
    ``worker_id`` (the lease holder, or None), ``outcome`` (the error's kind,
    ``succeeded`` or ``running``), ``error`` (``Type: message`` or ''), ``traceback`` (''
    when none).

    A failed attempt is its error-history entry (its start and worker were written with it;
    entries from before they were have None there); the attempt that succeeded or is
    running now comes from the row. A re-queued job (``durq retry``) counts its attempts
    from 1 again, so numbers repeat: the list stays in the order they ran, ``run`` counts
    the replays before a row (1 before any), and the label of an attempt after one reads
    ``run R, attempt N``; the replay's own entry is labelled ``replayed``.

    Rows that are no attempt: a child that ended without running (label ``cancelled``,
    error ``parent job N (task) ended failed``, from the ``parent_failed`` entry; label
    ``not run`` for ``unstorable_payload``), and, after the first entry, the entries the
    store dropped (label and error ``N earlier attempts not kept``, outcome
    ``history_trimmed``; the history keeps the first and the last
    :data:`durq.model.jobs.HISTORY_KEPT`).
    """
    rows: list[dict[str, Any]] = []
    run = 1  # a replay starts a new run, whose attempts count from 1 again
    for e in job.errors:
        row = {
            "attempt": e.attempt,
            "label": _label(run, e.attempt),
            "run": run,
            "started_at": e.started_at,
            "ended_at": e.at,
            "worker_id": e.worker_id,
            "outcome": e.kind,
            "error": f"{e.type}: {e.message}",
            "traceback": e.traceback,
        }
        if e.kind in NOT_RUN_LABELS and e.attempt == 0:
            found = _PARENT_FAILED.match(e.message)
            error = e.message if found is None else found.group(0).rstrip("; ")
            row.update(attempt=None, label=NOT_RUN_LABELS[e.kind], error=error)
        elif e.kind == REPLAYED_KIND:
            row["label"] = REPLAYED_KIND  # an operator's action, not an attempt of its own
            run += 1
        rows.append(row)
    dropped = job.errors_dropped
    if dropped and rows:
        note = f"{dropped} earlier attempt{'s' if dropped != 1 else ''} not kept"
        rows.insert(1, {
            "attempt": None, "label": note, "run": 1, "started_at": None, "ended_at": None,
            "worker_id": None, "outcome": HISTORY_TRIMMED_KIND, "error": note, "traceback": "",
        })  # fmt: skip
    if job.state in ("running", "succeeded") and job.attempts:
        rows.append(
            {
                "attempt": job.attempts,
                "label": _label(run, job.attempts),
                "run": run,
                "started_at": job.started_at,
                "ended_at": job.finished_at if job.state == "succeeded" else None,
                "worker_id": job.worker_id,
                "outcome": job.state,
                "error": "",
                "traceback": "",
            }
        )
    return rows


def run_error(job: Job) -> AttemptError | None:
    """The last error of the job's current run: the last entry after its last replay
    (``durq retry``), None when that run has none. What the job lists show in their
    "last error" column: a replayed job's own entry is an operator's action, and the
    errors before it belong to an earlier run."""
    errors = job.errors
    if not errors or errors[-1].kind == REPLAYED_KIND:
        return None
    return errors[-1]


def _label(run: int, attempt: int) -> str:
    """``attempt N``, and ``run R, attempt N`` after a replay (numbers repeat then)."""
    return f"attempt {attempt}" if run == 1 else f"run {run}, attempt {attempt}"


#: Parents or children a job's page lists one by one; the rest are counted by state.
RELATIVES_SHOWN = 50

#: The message of a child cancelled by its parent (``durq.store.*.dependencies.reason``).
_PARENT_FAILED = re.compile(r"^parent job (\d+) \((.*)\) ended (\w+); ", re.DOTALL)


def relatives(store: Store, job_id: int, shown: int = RELATIVES_SHOWN) -> dict[str, Any]:
    """A job's dependencies as its page shows them, from one read of its edges
    (:meth:`Store.edges`, as ``durq jobs show`` and ``durq jobs tree`` read them).

    Args:
        store: the store to read.
        job_id: the job.
        shown: how many parents, children and unfinished parents to list one by one (the
            first by id); default :data:`RELATIVES_SHOWN`.

    Returns:
        ``parents`` and ``children``, each ``{"rows": [{"id", "task", "state",
        "on_failure"}, ...] (the first ``shown`` by id), "total": int, "counts": {state: n}
        (all of them), "rest": {state: n} (those not listed)}``; and ``waiting_for``:
        ``{"rows": [...] (the first ``shown`` unfinished parents), "total": int}``.
    """
    done = {s.value for s in TERMINAL_STATES}
    ups: list[Edge] = []
    downs: list[Edge] = []
    for e in store.edges([job_id]):
        if e.child_id == job_id:
            ups.append(e)
        elif e.parent_id == job_id:
            downs.append(e)
    ups.sort(key=lambda e: e.parent_id)
    downs.sort(key=lambda e: e.child_id)
    parents = [(e.parent_id, e.parent_task, e.parent_state, e.on_failure) for e in ups]
    children = [(e.child_id, e.child_task, e.child_state, e.on_failure) for e in downs]
    pending = [r for r in parents if r[2] not in done]
    return {
        "parents": _side(parents, shown),
        "children": _side(children, shown),
        "waiting_for": {"rows": [_row(r) for r in pending[:shown]], "total": len(pending)},
    }


_Relative = tuple[int, str, str, str]


def _row(r: _Relative) -> dict[str, Any]:
    return {"id": r[0], "task": r[1], "state": r[2], "on_failure": r[3]}


def _side(rows: list[_Relative], shown: int) -> dict[str, Any]:
    """The first ``shown`` of ``rows`` (already in id order) as dicts, with counts by state
    of all of them and of the rest."""
    return {
        "rows": [_row(r) for r in rows[:shown]],
        "total": len(rows),
        "counts": dict(Counter(r[2] for r in rows)),
        "rest": dict(Counter(r[2] for r in rows[shown:])),
    }


def cancelled_by(job: Job) -> dict[str, Any] | None:
    """For a job cancelled because a parent did not succeed (its last error entry is of kind
    :data:`durq.model.dependencies.PARENT_FAILED_KIND`): ``{"message": str}`` plus, when
    the message is durq's own (``parent job N (task) ended state; ...``), ``parent_id``
    (int), ``parent_task`` and ``parent_state`` (str); else None."""
    err = job.last_error
    if str(job.state) != "cancelled" or err is None or err.kind != PARENT_FAILED_KIND:
        return None
    found = _PARENT_FAILED.match(err.message)
    if found is None:
        return {"message": err.message}
    return {"message": err.message, "parent_id": int(found.group(1)),
            "parent_task": found.group(2), "parent_state": found.group(3)}  # fmt: skip
