"""The worker's cancel watch (durq.worker.stopping.Cancels), run against every backend:
a cancel, a replay or a rescue by another process is signalled, and one read names the
leases in hand, by (job id, token), that are no longer held, and why."""

from __future__ import annotations

import time
from collections.abc import Callable

import durq
from durq.model import Outcome, WorkerInfo
from tests.conftest import Clock

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
    leases = [(c.id, c.lease_token) for c in claimed]
    assert app.store.lost_among(leases) == {}
    drain_signal(app)

    other = make()  # another process cancels one running job
    assert other.cancel(ids[1])
    assert wait_signal(app)
    (cancelled,) = [lease for lease in leases if lease[0] == ids[1]]
    assert app.store.lost_among(leases) == {cancelled: "cancelled"}
    assert app.store.lost_among([]) == {}


def test_lost_among_names_each_lease_gone_with_why(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """A job cancelled, one expired, one replayed and claimed again under a new token, one
    requeued by a rescue, one deleted, and one still held: all but the last are named,
    each with why; the replayed job's new token holds."""

    @app.task(max_attempts=3)
    def work() -> None: ...

    cancelled, replayed, held = (work.enqueue().id for _ in range(3))
    expired = work.options(deadline_in=60, notice_after=None).enqueue().id
    rescued = work.enqueue().id
    deleted = work.options(queue="purged").enqueue().id
    info = WorkerInfo("frozen", "elsewhere", 1, ("default",), ("work",), 0.0, 0.0, LEASE)
    app.store.register_worker(info)
    app.store.beat_worker("frozen", 5.0, None)
    mine = app.store.claim("default", ["work"], 4, 3600.0, "w1")
    mine += app.store.claim("purged", ["work"], 1, 3600.0, "w1")
    (theirs,) = app.store.finish_and_claim([], ["default"], ["work"], 1, 3600.0, "frozen")[1]
    tokens = {c.id: c.lease_token for c in [*mine, theirs]}
    assert theirs.id == rescued
    assert set(tokens) == {cancelled, replayed, held, expired, rescued, deleted}
    leases = sorted(tokens.items())
    assert app.store.lost_among(leases) == {}

    other = make()  # the operator, the leader's sweeper and rescue, another worker
    assert other.cancel(cancelled)
    assert other.cancel(replayed)
    other.retry(replayed)
    (again,) = other.store.claim("default", ["work"], 1, 3600.0, "w2")
    assert again.id == replayed and again.lease_token != tokens[replayed]
    assert other.cancel(deleted)
    assert other.store.purge("purged", ["cancelled"]) == 1
    clock.advance(61)
    assert other.sweep().expired == (expired,)
    assert other.store.rescue().workers == ("frozen",)

    assert app.store.lost_among(leases) == {
        (cancelled, tokens[cancelled]): "cancelled",
        (expired, tokens[expired]): "expired",
        (replayed, tokens[replayed]): "lease_lost",
        (rescued, tokens[rescued]): "lease_lost",
        (deleted, tokens[deleted]): "lease_lost",
    }
    assert app.store.lost_among([(replayed, again.lease_token)]) == {}  # the new one holds


def test_lost_among_names_a_replay_that_ran_to_its_end_elsewhere(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    """Cancelled, replayed, claimed and finished by another worker before this one looked:
    the old lease is named (``lease_lost``). The store cannot tell that from an attempt's
    own outcome, which is why the watch asks only about bodies that have not returned."""

    @app.task
    def work() -> None: ...

    job = work.enqueue()
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    other = make()
    other.cancel(job.id)
    other.retry(job.id)
    (again,) = other.store.claim("default", ["work"], 1, LEASE, "w2")
    other.store.finish([Outcome(again.id, again.lease_token, "succeeded", result="null")])
    assert job.refresh().state == "succeeded"
    assert app.store.lost_among([(c.id, c.lease_token)]) == {(c.id, c.lease_token): "lease_lost"}


def test_a_replay_and_a_rescue_are_signalled(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """The watch looks after a replay (a cancelled job's body may still run when it is
    claimed again) and after a rescue (a worker found dead may still run its bodies)."""

    @app.task
    def work() -> None: ...

    job = work.enqueue()
    app.store.claim("default", ["work"], 1, LEASE, "w1")
    other = make()
    other.cancel(job.id)
    drain_signal(app)
    other.retry(job.id)
    assert wait_signal(app)

    info = WorkerInfo("frozen", "elsewhere", 1, ("default",), ("work",), 0.0, 0.0, LEASE)
    other.store.register_worker(info)
    other.store.beat_worker("frozen", 5.0, None)
    other.store.finish_and_claim([], ["default"], ["work"], 1, LEASE, "frozen")
    clock.advance(6)
    drain_signal(app)
    assert other.store.rescue().workers == ("frozen",)
    assert wait_signal(app)
