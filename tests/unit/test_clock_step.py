"""SQLite: a backward step of the wall clock holds back no ready job (issue 13, defect 5).

Before the fix three ready jobs waited about an hour after a -3,600 s step, and so did the
jobs the reaper recovered. The wall clock here is injected (``steady=True`` guards it as it
guards ``time.time``); the database and the stores are real.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from durq.model import NewJob, Outcome
from durq.store.sqlite.clock import CLOCK_STEPPED_BACK, SteadyClock
from durq.store.sqlite.store import SqliteStore
from tests.conftest import Clock

STEP = 3600.0


def job(delay: float = 0.0) -> NewJob:
    return NewJob("q", "t", "{}", 0, None, 3, None, None, delay)


def open_store(path: Path, wall: Clock) -> SqliteStore:
    return SqliteStore(f"sqlite:///{path}", clock=wall, steady=True)


def test_ready_jobs_stay_ready_after_a_backward_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wall = Clock()
    store = open_store(tmp_path / "jobs.db", wall)
    try:
        store.enqueue([job(), job(), job()])
        wall.advance(5)
        store.now()  # time is read all the time (heartbeats, claims)
        wall.advance(-STEP)
        with caplog.at_level(logging.WARNING):
            claimed = store.claim("q", ["t"], 10, 30.0, "w1")
        assert len(claimed) == 3
        assert any(CLOCK_STEPPED_BACK in r.getMessage() for r in caplog.records)
        assert isinstance(store._clock, SteadyClock)
        assert store._clock.steps == [pytest.approx(STEP)]
    finally:
        store.close()


def test_a_process_started_after_the_step_sees_the_store_wide_mark(tmp_path: Path) -> None:
    wall = Clock()
    first = open_store(tmp_path / "jobs.db", wall)
    first.enqueue([job(), job(), job()])
    first.touch_worker("nobody")  # a heartbeat raises the stored mark
    first.close()
    wall.advance(-STEP)  # the machine's clock is fixed while nothing runs
    second = open_store(tmp_path / "jobs.db", wall)
    try:
        assert len(second.claim("q", ["t"], 10, 30.0, "w2")) == 3
    finally:
        second.close()


def test_recovered_jobs_are_not_held_back(tmp_path: Path) -> None:
    wall = Clock()
    store = open_store(tmp_path / "jobs.db", wall)
    try:
        store.enqueue([job(), job()])
        store.claim("q", ["t"], 10, 10.0, "dead-worker")
        wall.advance(11)  # the lease expires, then the clock steps back
        store.now()
        wall.advance(-STEP)
        summary = store.reap()
        assert summary.recovered == 2
        assert len(store.claim("q", ["t"], 10, 10.0, "w2")) == 2
    finally:
        store.close()


def test_a_delayed_job_shifts_by_at_most_the_step(tmp_path: Path) -> None:
    wall = Clock()
    store = open_store(tmp_path / "jobs.db", wall)
    try:
        (ins,) = store.enqueue([job(delay=60)])
        wall.advance(-STEP)
        store.now()  # the step is seen
        wall.advance(59)
        assert store.claim("q", ["t"], 1, 30.0, "w") == []  # not early
        wall.advance(2)  # 61 s of real time after the enqueue: due
        (c,) = store.claim("q", ["t"], 1, 30.0, "w")
        assert c.id == ins.id
        store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    finally:
        store.close()


def test_small_jitter_is_not_a_step() -> None:
    wall = Clock()
    clock = SteadyClock(wall)
    first = clock()
    wall.advance(-0.5)
    assert clock() == first  # held still, never back
    wall.advance(1.0)
    assert clock() == pytest.approx(first + 0.5)
    assert clock.steps == []
