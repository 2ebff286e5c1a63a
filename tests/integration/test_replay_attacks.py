"""Attacks on "a replayed job waits for its earlier body" (docs/features/replay.md), with a
real in-process worker on both backends.

The first body blocks in one C call (``threading.Event.wait``), which an interruption
cannot cut short (docs/features/timeouts.md), until the test lets it return; so the test
decides when the old body ends relative to the cancels and replays. Every body records
(attempt, lease token, start, end, why it was stopped) in a list.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durq
from tests.integration.test_replay_running import _runs, pool_spec
from tests.support.procs import wait_for, workers
from tests.support.threads import running


@dataclass
class Run:
    attempt: int
    token: int
    start: float
    end: float
    stopped: str | None


class Bodies:
    """A task ``held`` whose first body waits for :attr:`release`; later ones return."""

    def __init__(self, app: durq.Durq, **options: Any) -> None:
        self.release = threading.Event()
        self.runs: list[Run] = []
        self.started: list[int] = []  # lease tokens, as bodies start
        self.lock = threading.Lock()

        @app.task(max_attempts=3, **options)
        def held() -> str:
            ctx = durq.context()
            start = time.monotonic()
            with self.lock:
                first = not self.started
                self.started.append(ctx.lease_token)
            try:
                if first:
                    assert self.release.wait(60), "the test never released the first body"
                return "done"
            finally:
                with self.lock:
                    self.runs.append(
                        Run(ctx.attempt, ctx.lease_token, start, time.monotonic(), ctx.interrupted)
                    )

        self.task = held


def token_of(app: durq.Durq, job_id: int) -> int | None:
    record = app.store.get(job_id)
    assert record is not None
    return record.lease_token


def test_cancel_replay_cancel_replay_runs_one_body_after_the_old_one(
    make_any: Any,
) -> None:
    """Cancel, replay, cancel the replay while it waits for the old body, replay again,
    then let the old body return at once (before the 0.25 s check of the claims waiting):
    the claim of the second replay proves the first's lease gone, so only the last claim
    may run, once, after the old body; the cancelled claim between never starts."""
    app = make_any()
    bodies = Bodies(app)
    other = make_any()  # the operator's own handle
    with running(app, lease=5.0, concurrency=4) as w:
        job = bodies.task.enqueue()
        wait_for(lambda: len(bodies.started) == 1, 20, 0.005, "the first body")
        first = bodies.started[0]
        other.cancel(job.id)
        other.retry(job.id)
        wait_for(lambda: token_of(other, job.id) not in (None, first), 10, 0.002, "claim 2")
        second = token_of(other, job.id)
        other.cancel(job.id)
        other.retry(job.id)
        wait_for(lambda: token_of(other, job.id) not in (None, first, second), 10, 0.002, "claim 3")
        third = token_of(other, job.id)
        # the worker holds claim 3 once its claimer has put it in the prefetch, a moment
        # after the commit the operator saw: a body returning before that starts claim 2
        # (the worker cannot yet know it was revoked; its outcome is fenced off)
        wait_for(lambda: (job.id, third) in w.prefetch.leases(), 10, 0.002, "claim 3 held")
        # both later claims wait (unless the 0.25 s check dropped the cancelled one first)
        waiting = len(w.prefetch)
        assert waiting in (1, 2), waiting
        print(f"\n{waiting} claim(s) waiting for the old body when it returned")
        bodies.release.set()  # the old body returns now
        wait_for(lambda: other.get(job.id).state == "succeeded", 20, 0.01, "the last replay")
        time.sleep(0.3)  # a late start, if any, would show by now
        assert w.exit_code == 0
    final = other.get(job.id)
    assert (final.state, final.attempts) == ("succeeded", 1)
    assert bodies.started[0] == first
    assert bodies.started[1:] == [third], (
        f"bodies started under {bodies.started}: the first claim {first}, the cancelled "
        f"replay {second}, the last {third}"
    )
    old, new = sorted(bodies.runs, key=lambda r: r.start)
    assert new.start >= old.end  # never beside the old body
    kinds = [e.kind.split(":")[0] for e in final.errors]
    assert kinds == ["cancelled", "replayed", "cancelled", "replayed"], kinds


def test_a_replay_claimed_while_the_worker_shuts_down_is_given_back(make_any: Any) -> None:
    """The worker is stopping (grace long enough for the old body) when the job is
    cancelled and replayed: the replay is not started here, and is left queued with its
    attempt handed back (given back, or never claimed), never running without a body."""
    app = make_any()
    bodies = Bodies(app)
    other = make_any()
    with running(app, lease=5.0, concurrency=4, grace=10.0) as w:
        job = bodies.task.enqueue()
        wait_for(lambda: len(bodies.started) == 1, 20, 0.005, "the first body")
        w.request_stop()  # the old body keeps its slot through the grace
        time.sleep(0.05)
        other.cancel(job.id)
        other.retry(job.id)
        time.sleep(0.3)
        bodies.release.set()
    final = other.get(job.id)
    assert len(bodies.started) == 1  # the replay never ran on the stopping worker
    assert (final.state, final.attempts) == ("queued", 0), (final.state, final.attempts)


def test_a_replay_of_a_job_whose_old_body_never_returns_is_given_back_at_shutdown(
    make_any: Any,
) -> None:
    """The old body is stuck (it returns only after the test): the replay waits for it,
    claimed and heartbeated; at shutdown with a short grace the replay goes back to the
    queue without an attempt spent, and the worker stops within its grace and 1 s."""
    app = make_any()
    bodies = Bodies(app)
    other = make_any()
    try:
        with running(app, concurrency=2, grace=0.5, lease=2.0) as w:
            job = bodies.task.enqueue()
            wait_for(lambda: len(bodies.started) == 1, 20, 0.005, "the first body")
            other.cancel(job.id)
            other.retry(job.id)
            wait_for(lambda: len(w.prefetch) == 1, 10, 0.005, "the replay to wait")
            time.sleep(2.5)  # past a lease: the waiting claim is heartbeated, not reaped
            row = other.get(job.id)
            assert (row.state, row.attempts) == ("running", 1)
            assert [e.kind for e in row.errors if e.kind == "lease_lost"] == []
            stopping = time.monotonic()
            w.request_stop()
        took = time.monotonic() - stopping
        final = other.get(job.id)
        assert len(bodies.started) == 1  # the replay never ran beside the stuck body
        assert (final.state, final.attempts) == ("queued", 0)
        print(f"\nstopped {took:.2f} s after the request, with a stuck body")
    finally:
        bodies.release.set()


def test_cancel_replay_cancel_replay_in_the_process_pool(url: str, tmp_path: Path) -> None:
    """``--pool processes``: the same sequence against a body in a child (a 3 s
    ``time.sleep``; the cancel's SIGTERM ends it in the child). Whatever the order the
    worker sees it in, one body of the job runs at a time, every earlier run was stopped,
    and the last replay runs to its end as attempt 1."""
    spec = pool_spec(url, tmp_path)
    runs = tmp_path / "runs.txt"
    app = durq.Durq(url)
    try:
        job = app.enqueue("replayed", {"seconds": 3.0}, queue="interrupts", max_attempts=3)
        with workers(spec) as (worker,):
            wait_for((tmp_path / f"started-{job.id}").exists, 60, 0.01, "the body to start")
            for _ in range(2):
                app.cancel(job.id)
                app.retry(job.id)
                # claimed again (it waits for the old body, or runs if that one is gone)
                wait_for(lambda: app.get(job.id).state in ("running", "succeeded"), 20, 0.002)
            wait_for(lambda: app.get(job.id).state == "succeeded", 60, 0.05, "the last replay")
            time.sleep(0.5)  # a late run, if any, is recorded by now
            assert worker.proc.poll() is None  # the worker goes on
        final = app.get(job.id)
    finally:
        app.close()
    mine = sorted((r for r in _runs(runs) if r[0] == job.id), key=lambda r: r[2])
    assert 2 <= len(mine) <= 3, mine
    for before, after in itertools.pairwise(mine):
        assert after[2] >= before[3], f"two bodies of the job at once: {mine}"
    assert all(r[4] != "-" for r in mine[:-1]), mine  # every earlier run was stopped
    assert mine[-1][4] == "-" and mine[-1][1] == 1
    assert (final.state, final.attempts) == ("succeeded", 1)
    kinds = [e.kind.split(":")[0] for e in final.errors]
    assert kinds == ["cancelled", "replayed", "cancelled", "replayed"], kinds
