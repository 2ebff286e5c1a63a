"""Prefetch and pipelined commits with a real worker on both backends (issue 14 item 1):
jobs claimed ahead are leased, start as soon as a slot frees even while no commit can
happen, never include a job a limit or a pause would refuse, and go back at shutdown
without spending an attempt."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import durq
from durq.worker.prefetch import Prefetch
from tests.support.procs import wait_for


class Gate:
    """Tasks that wait for ``open`` and record their starts."""

    def __init__(self, app: durq.Durq) -> None:
        self.open = threading.Event()
        self.started: list[int] = []

        @app.task(max_attempts=3)
        def gated(n: int = 0) -> int:
            self.started.append(durq.context().job_id)
            assert self.open.wait(20), "the test never opened the gate"
            return n

        @app.task
        def quick() -> None:
            return None

        @app.task(concurrency=1, concurrency_key="one")
        def capped(n: int = 0) -> int:
            self.started.append(durq.context().job_id)
            return n


@contextmanager
def running(app: durq.Durq, **options: Any) -> Iterator[durq.Worker]:
    """A worker on a thread, warmed up: a worker claims ahead only once a job has returned
    (until then it does not know how long its jobs run)."""
    options.setdefault("lease", 5.0)
    w = app.worker(**options)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        warm = app.tasks["quick"].enqueue()
        wait_for(lambda: app.get(warm.id).state == "succeeded", 10, what="the warm-up job")
        yield w
    finally:
        w.request_stop()
        t.join(20)
        assert not t.is_alive(), "the worker did not stop"


def states(app: durq.Durq, jobs: list[durq.Job]) -> list[str]:
    return [app.get(j.id).state for j in jobs]


def test_prefetched_jobs_are_leased_and_go_back_at_shutdown_without_an_attempt(
    make_any: Callable[..., durq.Durq],
) -> None:
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1, prefetch=3, grace=5.0) as w:
        jobs = [app.tasks["gated"].enqueue(n=i) for i in range(5)]
        wait_for(lambda: states(app, jobs).count("running") == 4, 10, what="1 + 3 claimed")
        assert states(app, jobs)[4] == "queued"  # the prefetch is bounded
        assert len(gate.started) == 1  # one slot: one runs, three wait in hand
        held = [j for j in jobs if app.get(j.id).state == "running" and j.id not in gate.started]
        before = [app.store.get(j.id).lease_expires_at for j in held]  # type: ignore[union-attr]
        w.heartbeat.beat()  # prefetched jobs are heartbeated like running ones
        after = [app.store.get(j.id).lease_expires_at for j in held]  # type: ignore[union-attr]
        assert all(b < a for b, a in zip(before, after, strict=True)), (before, after)
        w.request_stop()
        gate.open.set()  # the running job finishes within the grace
    assert app.get(gate.started[0]).state == "succeeded"
    for job in held:
        back = app.get(job.id)
        assert (back.state, back.attempts, back.errors) == ("queued", 0, [])
    assert len(gate.started) == 1  # none of the prefetched jobs ran


def test_a_slot_starts_its_next_job_while_no_commit_can_happen(
    make_any: Callable[..., durq.Durq], url: str
) -> None:
    """Pipelining: with the database locked against writes, prefetched jobs still start
    one after another on the single slot; none counts as done until its commit."""
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1, prefetch=3, lease=30.0):
        jobs = [app.tasks["gated"].enqueue(n=i) for i in range(4)]
        wait_for(lambda: states(app, jobs).count("running") == 4, 10, what="all 4 claimed")
        with write_lock(url):
            gate.open.set()
            wait_for(lambda: len(gate.started) == 4, 10, what="all 4 started under the lock")
            assert states(app, jobs) == ["running"] * 4  # no outcome counts before its commit
        wait_for(lambda: states(app, jobs) == ["succeeded"] * 4, 20, what="the outcomes")
    assert sorted(gate.started) == sorted(j.id for j in jobs)


@contextmanager
def write_lock(url: str) -> Iterator[None]:
    """Hold the write lock on the jobs (SQLite: the database's; PostgreSQL: the table's,
    reads still allowed) from another connection."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    base, _, query = url.partition("?")
    schema = dict(p.split("=", 1) for p in query.split("&"))["schema"]
    with psycopg.connect(base) as pg, pg.transaction():
        pg.execute(f'LOCK TABLE "{schema}".jobs IN EXCLUSIVE MODE')
        yield


def test_prefetch_never_takes_a_job_a_limit_would_refuse(
    make_any: Callable[..., durq.Durq],
) -> None:
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1, prefetch=4):
        busy = app.tasks["gated"].enqueue()
        wait_for(lambda: busy.id in gate.started, 10, what="the slot to fill")
        capped = [app.tasks["capped"].enqueue(n=i) for i in range(3)]
        plain = [app.tasks["gated"].enqueue(n=i) for i in range(2)]
        wait_for(lambda: states(app, plain) == ["running"] * 2, 10, what="plain jobs prefetched")
        # the slot is taken: a limited job claimed now would hold the limit without running
        assert states(app, capped) == ["queued"] * 3
        gate.open.set()
        wait_for(lambda: states(app, capped + plain) == ["succeeded"] * 5, 20, what="all to finish")


def test_prefetched_jobs_of_a_paused_queue_go_back(make_any: Callable[..., durq.Durq]) -> None:
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1, prefetch=3):
        busy = app.tasks["gated"].enqueue()
        waiting = [app.tasks["gated"].enqueue(n=i) for i in range(3)]
        wait_for(lambda: states(app, waiting) == ["running"] * 3, 10, what="3 prefetched")
        app.pause("default", reason="maintenance")
        wait_for(lambda: states(app, waiting) == ["queued"] * 3, 5, what="them to go back")
        assert [app.get(j.id).attempts for j in waiting] == [0, 0, 0]
        gate.open.set()
        wait_for(lambda: app.get(busy.id).state == "succeeded", 10, what="the running job")
        assert gate.started == [busy.id]  # none of the given-back jobs ran while paused
        app.resume("default")
        wait_for(lambda: states(app, waiting) == ["succeeded"] * 3, 10, what="after resume")


def test_prefetch_depth_shrinks_for_long_jobs_and_can_be_turned_off(db_url: str) -> None:
    ahead = Prefetch(depth=20, slots=10)
    assert ahead.room() == 0  # nothing ran yet: how long jobs run is unknown
    for _ in range(50):
        ahead.ran(0.001)
    assert ahead.room() == 20  # 1 ms jobs: 20 jobs wait 2 ms on 10 slots
    for _ in range(100):
        ahead.ran(1.0)
    assert ahead.room() == 0  # 1 s jobs: none waits in hand while other workers idle
    assert Prefetch(depth=0, slots=4).room() == 0
    app = durq.Durq(db_url)

    @app.task
    def noop() -> None:
        return None

    assert app.worker(concurrency=3).prefetch.depth == 64
    assert app.worker(concurrency=40).prefetch.depth == 320  # 8 per slot
    assert app.worker(concurrency=64).prefetch.depth == 512
    with pytest.raises(durq.ConfigError):
        app.worker(prefetch=-1)
