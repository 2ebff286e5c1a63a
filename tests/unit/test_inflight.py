"""The worker's table of attempts (durq.worker.state.InFlight) with two attempts of one
job: a job cancelled while its body runs and replayed at once is claimed again under a new
lease token while the old body is still in the table. Each attempt keeps its own entry
and bookkeeping (lease, limit hold, slot, shutdown). That the store names a lost lease by
(id, token) is a conformance test (tests/conformance/test_store.py)."""

from __future__ import annotations

from durq.context import JobContext
from durq.model import Claimed
from durq.worker.state import Attempt, InFlight


def _attempt(job_id: int, token: int) -> Attempt:
    job = Claimed(job_id, "default", "work", "{}", 1, 3, token)
    ctx = JobContext(job_id, "work", "default", 1, 3, token, lambda _i, _t, _p: True)
    return Attempt(job, ctx)


def test_two_attempts_of_one_job_keep_their_own_entries() -> None:
    freed: list[int] = []
    table = InFlight(4, on_free=lambda: freed.append(1))
    old, new = _attempt(7, 111), _attempt(7, 222)
    table.add(old)
    assert table.body_of(7) is old
    # the old body is stopped for a cancel; the replay is claimed again meanwhile
    assert table.mark_interrupted(old, "cancelled", 0.0)
    old.ctx.mark_lease_lost()
    assert table.returned(old) is False  # its outcome is dropped (it was cancelled)...
    assert table.body_of(7) is None  # ...and its body is gone: a new attempt may start
    table.add(new)
    assert len(table) == 1 and table.get(7, 222) is new and table.get(7, 111) is None
    assert table.take_unheld() == [(7, 111)]  # the cancel's hold: the old token's only

    # the other order: the new attempt is in the table while the old body still runs
    table = InFlight(4)
    old, new = _attempt(7, 111), _attempt(7, 222)
    table.add(old)
    table.add(new)
    assert len(table) == 2
    assert table.get(7, 111) is old and table.get(7, 222) is new
    assert sorted(table.leases()) == [(7, 111), (7, 222)]  # both heartbeated
    assert table.free_slots() == 2
    assert table.mark_interrupted(old, "cancelled", 0.0)
    assert table.holding() == [(7, 111)]  # only the old one keeps a cancel's hold
    assert table.running() == [new]  # the old one's outcome no longer counts
    assert table.body_of(7) is old  # the oldest body of the job that still runs
    assert table.returned(old) is False
    assert len(table) == 1 and table.get(7, 222) is new  # the old entry left, not the new
    assert table.body_of(7) is new
    assert table.holding() == []
    assert table.take_unheld() == [(7, 111)]
    assert table.abandon_unreturned() == [new]  # at shutdown: the new one is given back
    assert table.returned(new) is False
    assert len(table) == 0 and table.free_slots() == 4


def test_an_old_attempt_leaving_does_not_take_the_new_ones_entry() -> None:
    table = InFlight(2)
    old, new = _attempt(9, 1), _attempt(9, 2)
    table.add(old)
    table.add(new)
    assert table.returned(new) is True  # the new body returned first; its outcome counts
    table.settle(new)
    assert table.get(9, 1) is old and table.get(9, 2) is None
    assert table.body_of(9) is old  # the old body still runs
    assert table.returned(old) is True
    table.settle(old)
    assert len(table) == 0 and table.body_of(9) is None
