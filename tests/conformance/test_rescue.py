"""Rescue in seconds (store side): a worker whose liveness row went stale, or whose process
is gone, has its running jobs returned at once, with a lease expiry's effect; a worker that
beat keeps them, and a frozen worker that comes back is fenced out."""

from __future__ import annotations

import json
import os
import socket

import durq
from durq.model import Outcome, WorkerInfo
from durq.observability.processes import proc_stamp, process_gone
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n


def join(app: durq.Durq, worker_id: str, rescue_after: float | None = 5.0) -> None:
    info = WorkerInfo(worker_id, "elsewhere", 1, ("default",), ("work",), 0.0, 0.0, LEASE)
    app.store.register_worker(info)
    assert app.store.beat_worker(worker_id, rescue_after, None) == 0


def claim(app: durq.Durq, worker_id: str, limit: int = 10) -> list[durq.model.Claimed]:
    return app.store.finish_and_claim([], ["default"], ["work"], limit, LEASE, worker_id)[1]


def test_a_stale_workers_jobs_come_back_at_once_as_after_a_lease_expiry(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    jobs = [app.tasks["work"].enqueue(n=i) for i in range(3)]
    join(app, "frozen")
    join(app, "alive")
    held = claim(app, "frozen", 2)
    mine = claim(app, "alive", 1)
    assert len(held) == 2 and len(mine) == 1
    starts = {c.id: app.get(c.id).started_at for c in held}
    assert all(starts.values())
    clock.advance(3)
    assert app.store.rescue().workers == ()  # 3 s < rescue_after: nobody is dead
    assert app.store.beat_worker("alive", 5.0, None) == 0
    clock.advance(3)  # "frozen" last beat 6 s ago, "alive" 3 s ago; leases have 24 s left
    summary = app.store.rescue()
    assert summary.workers == ("frozen",)
    assert summary.recovered == 2 and summary.failed == 0
    assert set(summary.job_ids) == {c.id for c in held}
    for c in held:
        job = app.get(c.id)
        assert job.state == "queued" and job.attempts == 1  # the attempt stays counted
        assert job.errors[-1].kind == "lease_lost" and job.errors[-1].type == "WorkerLost"
        assert "frozen" in job.errors[-1].message
        # the lost attempt keeps its start and its worker, as after a lease expiry
        assert job.errors[-1].worker_id == "frozen"
        assert job.errors[-1].started_at == starts[c.id]
    assert app.get(mine[0].id).state == "running"  # the live worker keeps its job
    # the frozen worker comes back: its outcomes and lease extensions are refused ...
    late = [Outcome(c.id, c.lease_token, "succeeded", result="1") for c in held]
    assert app.store.finish(late) == [False, False]
    leases = [(c.id, c.lease_token) for c in held]
    assert app.store.extend_leases(leases, LEASE) == leases
    # ... and its first beat tells it that it was rescued
    assert app.store.beat_worker("frozen", 5.0, None) == 1
    assert app.store.rescue().workers == ()  # nothing left to rescue, and it beats again
    again = claim(app, "alive")
    assert {c.id for c in again} == {c.id for c in held}
    assert all(c.attempt == 2 for c in again)
    assert {j.id for j in jobs} == {c.id for c in held} | {mine[0].id}


def test_a_worker_without_liveness_beats_waits_for_its_leases(app: durq.Durq, clock: Clock) -> None:
    """An older worker (no rescue_after on its row) is never rescued by staleness."""
    register(app)
    app.tasks["work"].enqueue()
    join(app, "old", rescue_after=None)
    (c,) = claim(app, "old")
    clock.advance(LEASE - 1)
    assert app.store.rescue().workers == ()
    assert app.get(c.id).state == "running"
    clock.advance(2)
    assert app.store.reap().recovered == 1  # the lease stays the backstop


def test_a_dead_process_is_rescued_at_once_and_forgotten(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].options(max_attempts=1).enqueue()
    app.tasks["work"].enqueue()
    join(app, "gone")
    got = claim(app, "gone")
    assert len(got) == 2
    summary = app.store.rescue(dead=["gone"])
    assert summary.workers == ("gone",)
    assert (summary.recovered, summary.failed) == (1, 1)  # no attempt left: failed
    assert app.store.beat_worker("gone", 5.0, None) is None  # its row was deleted
    states = sorted(app.get(c.id).state for c in got)
    assert states == ["failed", "queued"]
    assert "process is gone" in app.get(got[0].id).errors[-1].message


def test_rescue_without_anyone_stale_changes_nothing(app: durq.Durq, clock: Clock) -> None:
    register(app)
    app.tasks["work"].enqueue()
    join(app, "w1")
    (c,) = claim(app, "w1")
    clock.advance(10)
    assert app.store.beat_worker("w1", 5.0, None) == 0  # it beat just now
    assert app.store.rescue().workers == ()
    assert app.get(c.id).state == "running"
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="0")]) == [True]


def test_local_workers_and_the_process_checks(app: durq.Durq) -> None:
    host = socket.gethostname()
    mine = proc_stamp(os.getpid())
    info = WorkerInfo("here", host, os.getpid(), ("default",), ("work",), 0.0, 0.0, LEASE)
    app.store.register_worker(info)
    app.store.beat_worker("here", 5.0, mine)
    rows = app.store.local_workers(host)
    if mine is None:  # no /proc here: nothing is stamped, nothing judged by pid
        assert rows == []
        return
    assert rows == [("here", os.getpid(), mine)]
    assert not process_gone(os.getpid(), mine, mine)
    # the same pid with another start time: a reused pid, so the stamping process is gone
    boot_ns, _, started = mine.rpartition("/")
    assert process_gone(os.getpid(), f"{boot_ns}/{int(started) + 1}", mine)
    # another boot or pid namespace: cannot tell, so never dead by pid
    assert not process_gone(os.getpid(), f"other-boot/x/{started}", mine)
    assert app.store.local_workers("another-host") == []
    assert json.loads(json.dumps(rows[0][2])) == mine
