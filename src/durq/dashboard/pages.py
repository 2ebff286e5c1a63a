"""What each dashboard page shows, built from :mod:`durq.observability.views` and the
:class:`durq.Durq` API (no SQL). Each builder takes the dashboard and the request's
parameters and returns (template name, context); it runs in a worker thread.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from durq.dashboard.charts import sparkline
from durq.errors import ConfigError, JobNotFound
from durq.model import JobFilter
from durq.model.dashboard import LIST_STATES
from durq.observability import views
from durq.observability.status import STATES

if TYPE_CHECKING:
    from durq.dashboard.context import Dashboard

Params = dict[str, str]
Page = tuple[str, dict[str, Any]]

PAGE_SIZE = 50
FILTERS = ("state", "queue", "task", "key", "tag", "q", "since", "until")


class NotFound(Exception):
    """The page's object does not exist (404)."""


def _time(value: str | None, what: str) -> float | None:
    """A time filter: epoch seconds, or an ISO date/time (local time when it has no zone)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ConfigError(
            f"{what} must be an ISO date/time or epoch seconds, not {value!r}"
        ) from None


def _int(value: str | None, what: str) -> int | None:
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{what} must be a whole number, not {value!r}") from None
    if not 0 < n < 2**63:
        raise ConfigError(f"{what} must be a positive id, not {value!r}")
    return n


def job_filter(params: Params, **fixed: str) -> JobFilter:
    """The :class:`JobFilter` of a jobs page's query parameters (``fixed`` wins).

    Raises:
        ConfigError: an unknown state, a bad time or cursor.
    """
    p = {**params, **fixed}
    state = p.get("state")
    if state is not None and state not in LIST_STATES:
        raise ConfigError(f"unknown state {state!r} (known: {', '.join(LIST_STATES)})")
    return JobFilter(
        state=state, queue=p.get("queue"), task=p.get("task"), key=p.get("key"),
        tag=p.get("tag"), text=p.get("q"), since=_time(p.get("since"), "since"),
        until=_time(p.get("until"), "until"), before=_int(p.get("before"), "before"),
        limit=PAGE_SIZE,
    )  # fmt: skip


def _overview_ctx(d: Dashboard) -> dict[str, Any]:
    snap = d.dq.status()
    series = views.series(d.dq.store, list(snap["queues"]), snap["now"])
    queues = []
    for name, q in snap["queues"].items():
        s = series["queues"].get(name, {"succeeded": [0] * 60, "failed": [0] * 60})
        queues.append(
            {
                "name": name, "counts": q["counts"], "oldest": q["oldest_queued_age"],
                "paused": q["paused"], "stranded": q["stranded"], "in_backoff": q["in_backoff"],
                "estimated": q.get("estimated", []),
                "chart": sparkline(s["succeeded"], s["failed"]),
                "done_hour": sum(s["succeeded"]), "failed_hour": sum(s["failed"]),
            }
        )  # fmt: skip
    return {"snap": snap, "queues": queues, "states": STATES, "workers": len(snap["workers"])}


def overview(d: Dashboard, _p: Params) -> Page:
    return "overview.html", _overview_ctx(d)


def overview_partial(d: Dashboard, _p: Params) -> Page:
    return "_overview.html", {**_overview_ctx(d), "here": "/"}


def _list(d: Dashboard, params: Params, title: str, **fixed: str) -> dict[str, Any]:
    f = job_filter(params, **fixed)
    found, cursor = views.job_page(d.dq.store, f)
    kept = {k: params[k] for k in FILTERS if params.get(k) and k not in fixed}
    rows = []
    for job in found:
        err = views.run_error(job)
        rows.append(
            {
                "job": job,
                "hook": views.is_hook(job.task),
                "payload": job.payload,
                "error": f"{err.type}: {err.message}" if err else "",
                "tone": views.tone(err.kind) if err else "",
            }
        )
    return {
        "title": title, "rows": rows, "filters": kept, "fixed": fixed, "states": LIST_STATES,
        "next": {**kept, "before": str(cursor)} if cursor else None, "first": bool(f.before),
    }  # fmt: skip


def jobs(d: Dashboard, params: Params) -> Page:
    return "jobs.html", _list(d, params, "Jobs")


#: Jobs one retry-matching or delete-matching press acts on at most (press again for more).
MATCHING_LIMIT = 1000


def matching(d: Dashboard, params: Params) -> dict[str, Any]:
    """What the failed set's bulk actions would act on, for their confirmations: ``count``
    (up to :data:`MATCHING_LIMIT`, ``more`` when there are further ones), across every
    queue unless the filters name one, and ``below``, one past the newest matching id (the
    action touches nothing newer than what was confirmed)."""
    f = job_filter({k: v for k, v in params.items() if k != "before"}, state="failed")
    n = d.dq.store.count_jobs(f, MATCHING_LIMIT + 1)
    newest = d.dq.store.job_page(replace(f, limit=1)) if n else []
    return {
        "count": min(n, MATCHING_LIMIT), "more": n > MATCHING_LIMIT,
        "below": newest[0].id + 1 if newest else None,
    }  # fmt: skip


def failed(d: Dashboard, params: Params) -> Page:
    ctx = _list(d, params, "Failed jobs", state="failed")
    return "jobs.html", {**ctx, "failed_set": True, "matching": matching(d, params)}


def parked(d: Dashboard, params: Params) -> Page:
    return "jobs.html", {**_list(d, params, "Parked jobs", state="parked"), "parked_set": True}


def job(d: Dashboard, params: Params) -> Page:
    job_id = int(params["job_id"])
    try:
        found = d.dq.get(job_id)
    except JobNotFound as exc:
        raise NotFound(str(exc)) from None
    record = d.dq.store.get(job_id)
    if record is None:
        raise NotFound(f"job {job_id} is gone")
    batch = None
    if found.batch_id is not None:
        try:
            batch = d.dq.batch_status(found.batch_id)
        except Exception:  # noqa: BLE001 - the batch row may have been pruned
            batch = None
    return "job.html", {
        "job": found, "d": found.to_dict(), "why": views.why(d.dq.store, record),
        "steps": d.dq.steps(job_id), "batch": batch, "hook": views.is_hook(found.task),
        "tags": d.dq.store.tags_of(job_id), "deps": views.relatives(d.dq.store, job_id),
        "cancelled_by": views.cancelled_by(found),
        "attempts": [{**a, "tone": views.tone(a["outcome"])} for a in views.attempts(found)],
    }  # fmt: skip


def batches(d: Dashboard, params: Params) -> Page:
    before = _int(params.get("before"), "before")
    ids = d.dq.store.recent_batches(before, PAGE_SIZE)
    rows = [d.dq.batch_status(i) for i in ids]
    return "batches.html", {"rows": rows, "next": ids[-1] if len(ids) == PAGE_SIZE else None}


def schedules(d: Dashboard, _p: Params) -> Page:
    slots = d.dq.store.periodic_slots()
    known = d.dq.periodics  # empty unless the dashboard was given the app's code
    rows = []
    for name in sorted(set(slots) | set(known)):
        last, job_id = slots.get(name, (None, None))
        nxt = None
        periodic = known.get(name)
        if periodic is not None:
            try:
                nxt = periodic.next_slot(last if last is not None else d.dq.store.now())
            except Exception:  # noqa: BLE001 - shown as unknown
                nxt = None
        rows.append({"name": name, "last": last, "job_id": job_id, "next": nxt})
    return "schedules.html", {"rows": rows}


def limits(d: Dashboard, _p: Params) -> Page:
    return "limits.html", {"rows": d.dq.limits()}


def _workers_ctx(d: Dashboard) -> dict[str, Any]:
    return {"rows": views.workers(d.dq.store)}


def workers(d: Dashboard, _p: Params) -> Page:
    return "workers.html", _workers_ctx(d)


def workers_partial(d: Dashboard, _p: Params) -> Page:
    return "_workers.html", {**_workers_ctx(d), "here": "/workers"}


def api_status(d: Dashboard) -> dict[str, Any]:
    """The JSON snapshot of ``/api/status``: ``durq status --json`` plus live workers."""
    snap: dict[str, Any] = d.dq.status()
    snap["workers"] = views.workers(d.dq.store)
    return snap
