"""Periodic schedules are stored, and the leader fires every stored one by name (issue 13,
defect 1). Before the fix a schedule only newer workers knew never fired while an older
worker led (0 times in 12 s of a rolling deploy), with no warning anywhere.

The scheduler's :func:`tick` is driven directly under the injected clock, as in
``test_periodic.py``; one app plays the old code, another the new.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import durq
from durq.worker.scheduler import ORPHAN_AFTER, TOUCH_INTERVAL, SchedulerState, register, tick
from tests.conftest import Clock


def old_code(app: durq.Durq) -> None:
    @app.periodic("* * * * *")
    @app.task(queue="cron")
    def beat() -> None:
        return None


def new_code(app: durq.Durq) -> None:
    old_code(app)

    @app.periodic("*/2 * * * *", name="report", tz="Europe/Berlin", payload={"kind": "daily"})
    @app.task(queue="reports", priority=7, max_attempts=5)
    def make_report(kind: str) -> str:
        return kind


def test_the_old_leader_fires_a_schedule_only_new_code_defines(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    old, new = make(), make()
    old_code(old)
    new_code(new)
    clock.now = datetime(2026, 5, 4, 12, 0, 30, tzinfo=UTC).timestamp()
    old_state = SchedulerState("old-worker", "v1")
    new_state = SchedulerState("new-worker", "v2")
    tick(old, old_state)  # the old worker leads
    tick(new, new_state)  # the new worker starts: it stores its schedules (and may tick)
    stored = {r.name: r for r in old.store.schedules()}
    assert set(stored) == {"beat", "report"}
    report = stored["report"]
    assert (report.cron, report.tz, report.task) == ("*/2 * * * *", "Europe/Berlin", "make_report")
    assert (report.code_version, report.defined_by) == ("v2", "new-worker")
    for _ in range(8):  # four minutes in which only the old code leads
        clock.advance(30)
        tick(old, old_state)
        if clock.now - new_state.touched_at >= TOUCH_INTERVAL:
            register(new, new_state, clock.now)  # the new worker lives, not leading
    jobs = old.jobs(task="make_report", limit=100)
    assert len(jobs) == 2  # 12:02 and 12:04
    assert all(j.queue == "reports" and j.priority == 7 for j in jobs)
    assert all(j.max_attempts == 5 and j.payload == {"kind": "daily"} for j in jobs)
    assert all(j.state == "queued" for j in jobs)  # waiting for a worker that knows the task
    assert len(old.jobs(task="beat", limit=100)) == 4


def test_a_schedule_no_live_worker_defines_is_orphaned_not_fired(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    old, new = make(), make()
    old_code(old)
    new_code(new)
    clock.now = datetime(2026, 5, 4, 12, 0, 30, tzinfo=UTC).timestamp()
    old_state = SchedulerState("old-worker", "v1")
    tick(new, SchedulerState("new-worker", "v2"))  # then every new worker goes away
    fired_before = len(old.jobs(task="make_report", limit=100))
    clock.advance(ORPHAN_AFTER + 1)
    for _ in range(10):
        tick(old, old_state)
        clock.advance(60)
    assert len(old.jobs(task="make_report", limit=100)) == fired_before
    assert "report" in old_state.reported  # reported once (event periodic_orphaned)
    assert len(old.jobs(task="beat", limit=100)) >= 10  # its own schedule goes on
    # a new worker comes back: the schedule is defined again and fires again
    back = SchedulerState("new-worker-2", "v2")
    register(new, back, clock.now)
    for _ in range(4):
        clock.advance(30)
        register(new, back, clock.now)
        tick(old, old_state)
    assert "report" not in old_state.reported
    assert len(old.jobs(task="make_report", limit=100)) > fired_before


def test_the_last_worker_to_start_wins_and_others_only_touch(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    first, second = make(), make()

    @first.periodic("* * * * *", name="sync")
    @first.task
    def sync_v1() -> None:
        return None

    @second.periodic("*/5 * * * *", name="sync")
    @second.task
    def sync_v2() -> None:
        return None

    clock.now = datetime(2026, 5, 4, 12, 0, 30, tzinfo=UTC).timestamp()
    a, b = SchedulerState("a", "v1"), SchedulerState("b", "v2")
    tick(first, a)
    tick(second, b)
    for _ in range(5):
        clock.advance(TOUCH_INTERVAL)
        tick(first, a)  # touches; does not write its older definition back
    (row,) = first.store.schedules()
    assert (row.cron, row.task, row.code_version) == ("*/5 * * * *", "sync_v2", "v2")
    assert row.seen_at == clock.now
