"""The worker's cancel watch (durq.worker.stopping.Cancels), run against every backend:
a cancel by another process is signalled, and one read names the jobs in hand it ended."""

from __future__ import annotations

import time
from collections.abc import Callable

import durq
from durq.model import Outcome

LEASE = 30.0


def wait_signal(app: durq.Durq, seconds: float = 10.0) -> bool:
    """Poll the cancel signal as the watch does (PostgreSQL: the NOTIFY arrives on the
    LISTEN thread a little after the commit)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if app.store.cancel_signalled():
            return True
        time.sleep(0.02)
    return False


def drain_signal(app: durq.Durq) -> None:
    """Consume the signals pending now (the first call starts the watch)."""
    time.sleep(0.3)
    while app.store.cancel_signalled():
        time.sleep(0.05)


def test_a_cancel_elsewhere_is_signalled_and_named_among_the_jobs_in_hand(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    @app.task
    def work() -> None: ...

    ids = [work.enqueue().id for _ in range(3)]
    claimed = app.store.claim("default", ["work"], 3, LEASE, "w1")
    assert sorted(c.id for c in claimed) == ids
    assert app.store.ended_among(ids) == {}
    drain_signal(app)

    other = make()  # another process cancels one running job
    assert other.cancel(ids[1])
    assert wait_signal(app)
    assert app.store.ended_among(ids) == {ids[1]: "cancelled"}
    assert app.store.ended_among([]) == {}


def test_ended_among_ignores_jobs_that_ended_by_their_own_outcome(app: durq.Durq) -> None:
    @app.task
    def work() -> None: ...

    job = work.enqueue()
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    assert job.refresh().state == "succeeded"
    assert app.store.ended_among([job.id]) == {}
