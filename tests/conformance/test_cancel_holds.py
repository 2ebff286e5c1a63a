"""A cancelled or expired running job keeps its limit slot as a hold until its worker
reports the body gone (issue 11 item 4; docs/features/limits.md), on every backend."""

from __future__ import annotations

import pytest

import durq
from durq.errors import JobGone
from durq.model import Outcome
from tests.conformance.test_limits import LEASE, claim, register, usage
from tests.conftest import Clock


def _downloads(app: durq.Durq, n: int, **options: float) -> list[int]:
    task = app.tasks["download"].options(**options) if options else app.tasks["download"]
    return [task.enqueue(n=i).id for i in range(n)]


def test_a_cancelled_running_job_keeps_its_slot_until_its_body_is_reported_gone(
    app: durq.Durq,
) -> None:
    register(app)  # download: concurrency 2, key "downloads"
    _downloads(app, 3)
    a, _b = claim(app)
    assert app.cancel(a.id)
    assert app.get(a.id).state == "cancelled"
    assert usage(app) == {"downloads": (1, 1)}  # b runs; a's body may still run
    assert claim(app) == []  # so the third job waits
    # the old body is fenced out as before, and its refused outcome frees nothing
    assert app.store.finish([Outcome(a.id, a.lease_token, "succeeded")]) == [False]
    assert claim(app) == []
    assert app.store.release_job_holds([(a.id, a.lease_token + 1)]) == 0  # another attempt's
    assert app.store.release_job_holds([(a.id, a.lease_token)]) == 1  # the body is gone
    assert usage(app) == {"downloads": (1, 0)}
    assert len(claim(app)) == 1
    assert app.store.release_job_holds([(a.id, a.lease_token)]) == 0
    assert app.store.release_job_holds([]) == 0


def test_a_dead_workers_hold_lapses_with_its_lease_unless_the_heartbeat_extends_it(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    _downloads(app, 4)
    a, b = claim(app)
    clock.advance(LEASE / 2)  # half the lease left at the cancel
    assert app.cancel(a.id) and app.cancel(b.id)
    app.store.extend_job_holds([(a.id, a.lease_token)], LEASE)  # a's worker still beats
    app.store.extend_job_holds([], LEASE)
    clock.advance(LEASE / 2 + 1)  # b's worker died: its hold lapsed with the lease b had
    assert usage(app) == {"downloads": (0, 1)}
    assert len(claim(app)) == 1
    assert claim(app) == []
    clock.advance(LEASE / 2)  # a's extended hold lapses too when no beat follows
    assert usage(app) == {"downloads": (1, 0)}
    assert len(claim(app)) == 1


def test_an_expired_running_job_keeps_its_slot_until_its_body_is_reported_gone(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    (a_id,) = _downloads(app, 1, deadline_in=5.0)
    _downloads(app, 2)
    claimed = claim(app)
    assert len(claimed) == 2 and claimed[0].id == a_id
    a = claimed[0]
    clock.advance(6)
    assert app.store.extend_leases([(c.id, c.lease_token) for c in claimed], LEASE) == []
    summary = app.store.sweep(hook_max_attempts=1)
    assert summary.expired == (a_id,)
    assert app.get(a_id).state == "expired"
    assert usage(app) == {"downloads": (1, 1)}
    assert claim(app) == []
    assert app.store.sweep(hook_max_attempts=1).expired == ()  # no second hold
    assert usage(app) == {"downloads": (1, 1)}
    assert app.store.release_job_holds([(a.id, a.lease_token)]) == 1
    assert len(claim(app)) == 1


def test_only_a_running_limited_job_leaves_a_hold(app: durq.Durq) -> None:
    register(app)
    queued = _downloads(app, 1)[0]
    assert app.cancel(queued)  # never ran: nothing to hold
    assert usage(app) == {}
    plain = app.tasks["plain"].enqueue(n=1)
    (running,) = claim(app)
    assert running.id == plain.id
    assert app.cancel(plain.id)  # no limit: nothing to hold
    assert usage(app) == {}
    assert app.store.release_job_holds([(running.id, running.lease_token)]) == 0
    (job,) = (_downloads(app, 1), claim(app))[1]
    assert app.cancel(job.id)
    with pytest.raises(JobGone):
        app.cancel(job.id)  # already ended: no second hold
    assert usage(app) == {"downloads": (0, 1)}
