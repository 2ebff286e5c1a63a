"""The dashboard's actions: POSTs only, behind the token and the CSRF check
(:mod:`durq.dashboard.security`), refused in read-only mode. Each calls the
:class:`durq.Durq` API the CLI calls and redirects back (303) to a path on this site.

Verbs (form fields in brackets): ``retry`` [id], ``cancel`` [id], ``adopt`` [id],
``cancel-parked`` [id], ``pause`` [queue, reason], ``resume`` [queue],
``retry-matching`` and ``delete-matching`` [the failed set's filters, ``expected`` (the
count the confirmation named), ``before`` (one past the newest id it counted)]: across every
queue unless the filters name one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, parse_qsl, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from durq.dashboard import security
from durq.errors import ConfigError, DurqError
from durq.observability import views

if TYPE_CHECKING:
    from durq.dashboard.context import Dashboard


def _refuse(message: str, status: int = 403) -> Response:
    return Response(message + "\n", status_code=status, media_type="text/plain")


def _one(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise ConfigError(f"the form has no {name}")
    return value


def _job_id(form: dict[str, str]) -> int:
    raw = _one(form, "id")
    if not raw.isdigit() or not 0 < int(raw) < 2**63:
        raise ConfigError(f"not a job id: {raw!r}")
    return int(raw)


def run(d: Dashboard, verb: str, form: dict[str, str]) -> str:
    """Do ``verb``; returns what happened, for the flash message.

    Raises:
        ConfigError: an unknown verb or a missing field.
        DurqError: the API refused (a job in the wrong state, ...).
    """
    dq = d.dq
    if verb in ("retry", "cancel", "adopt"):
        job = getattr(dq, verb)(_job_id(form))
        return f"job {job.id}: {job.state}"
    if verb == "cancel-parked":
        job = dq.cancel(_job_id(form), parked_only=True)
        return f"job {job.id}: {job.state}"
    if verb == "pause":
        queue = _one(form, "queue")
        reason = form.get("reason", "").strip() or "paused from the dashboard"
        done = dq.pause(queue, reason, source="dashboard")
        return f"queue {queue} paused" if done else f"queue {queue} was paused already"
    if verb == "resume":
        queue = _one(form, "queue")
        return f"queue {queue} resumed" if dq.resume(queue) else f"queue {queue} was not paused"
    if verb in ("retry-matching", "delete-matching"):
        return _matching(d, verb, form)
    raise ConfigError(f"unknown action {verb!r}")


def _matching(d: Dashboard, verb: str, form: dict[str, str]) -> str:
    """Retry or delete the failed jobs matching the form's filters, across every queue
    unless it names one: at most the ``expected`` count the confirmation named (and
    :data:`MATCHING_LIMIT`), none newer than its ``before`` id."""
    from durq.dashboard.pages import MATCHING_LIMIT, job_filter

    fields = {k: v for k, v in form.items() if v and k not in ("csrf", "next", "expected")}
    f = job_filter(fields, state="failed")
    raw = form.get("expected", "")
    most = min(int(raw), MATCHING_LIMIT) if raw.isdigit() else MATCHING_LIMIT
    ids: list[int] = []
    while len(ids) < most:
        found, cursor = views.job_page(d.dq.store, f)
        ids.extend(job.id for job in found[: most - len(ids)])
        if cursor is None:
            break
        f = replace(f, before=cursor)
    where = f"of queue {f.queue}" if f.queue else "across queues"
    if verb == "delete-matching":
        return f"{d.dq.store.delete_failed(ids)} failed job(s) {where} deleted"
    retried = 0
    for job_id in ids:
        try:
            d.dq.retry(job_id)
            retried += 1
        except DurqError:
            continue  # no longer failed: retried or deleted meanwhile
    return f"{retried} failed job(s) {where} re-queued"


def endpoint(d: Dashboard) -> Callable[[Request], Awaitable[Response]]:
    """The POST handler of ``/actions/{verb}``."""

    async def handle(request: Request) -> Response:
        if d.read_only:
            return _refuse("refused: this dashboard is read-only")
        if d.token is None:
            return _refuse(
                "refused: actions need a token (start with --token or DURQ_DASHBOARD_TOKEN)"
            )
        authorization = request.headers.get("authorization")
        bearer = bool(authorization and authorization.startswith("Bearer "))
        if not d.signed_in(request):
            return _refuse("refused: sign in with the dashboard's token first", 401)
        if not security.origin_ok(request.headers.get("origin"), request.headers.get("host")):
            return _refuse("refused: cross-site request")
        raw = parse_qs((await request.body()).decode("utf-8", "replace"))
        form = {k: v[0] for k, v in raw.items() if v}
        if not security.csrf_ok(
            request.cookies.get(security.CSRF_COOKIE), form.get(security.CSRF_FIELD), bearer
        ):
            return _refuse("refused: the form's CSRF field does not match (reload the page)")
        verb = str(request.path_params["verb"])
        try:
            message = await run_in_threadpool(run, d, verb, form)
            ok = "1"
        except DurqError as exc:
            message, ok = str(exc), "0"
        target = security.safe_next(form.get("next"))
        return RedirectResponse(with_flash(target, message, ok), status_code=303)

    return handle


def with_flash(target: str, message: str, ok: str) -> str:
    """``target`` (a local path with its query) with this action's flash message in place of
    any earlier one (the page it was sent from may carry one: they must not pile up)."""
    path, _, query = target.partition("?")
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in ("flash", "ok")]
    return f"{path}?{urlencode([*kept, ('flash', message), ('ok', ok)])}"
