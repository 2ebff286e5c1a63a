"""Timeouts, cancels and limits that stop the running code (issue 11), on both backends:
``def`` bodies get :class:`durq.Interrupted` in their thread, ``async def`` bodies are
cancelled, and an attempt's outcome, slot and lease are let go only once its body stopped."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT, wait_for, workers


def test_timed_out_bodies_stop_and_free_their_slots(
    make_any: Callable[..., durq.Durq], drain, tmp_path: Path
) -> None:
    app = make_any()
    spans: list[tuple[float, float]] = []

    @app.task(timeout=0.3, max_attempts=1)
    def slow(n: int) -> None:
        start = time.monotonic()
        try:
            for _ in range(100):  # 5 s, in sleeps short enough to be interrupted between
                time.sleep(0.05)
            (tmp_path / f"marker-{n}").write_text("ran to its end")
        finally:
            spans.append((start, time.monotonic()))

    jobs = [slow.enqueue(n=i) for i in range(20)]
    drain(app, concurrency=4, timeout=120)
    assert sorted(tmp_path.glob("marker-*")) == []  # no body ran past its timeout
    assert len(spans) == 20
    late = [end - (start + 0.3) for start, end in spans]
    print(f"\nbodies stopped {min(late):.3f}..{max(late):.3f} s after their timeout")
    assert max(late) < 2.0
    starts, ends = sorted(s for s, _ in spans), sorted(e for _, e in spans)
    # each stop frees a slot: the body 4 places later (concurrency 4) starts within 2 s
    gaps = [starts[k + 4] - ends[k] for k in range(16)]
    print(f"a freed slot started its next body within {max(gaps):.3f} s")
    assert max(gaps) < 2.0
    for job in jobs:
        job.refresh()
        assert job.state == "failed"
        assert [e.kind for e in job.errors] == ["timeout"]
        assert "0.3 s" in job.errors[0].message


def test_a_blocking_c_call_is_interrupted_only_when_it_returns(
    make_any: Callable[..., durq.Durq], drain, tmp_path: Path
) -> None:
    """What the thread pool cannot do (docs/features/timeouts.md): ``time.sleep`` in C runs
    to its end; the interruption lands at the next bytecode, before anything after it."""
    app = make_any()
    spans: list[float] = []

    @app.task(timeout=0.2, max_attempts=1)
    def blocking() -> None:
        start = time.monotonic()
        try:
            time.sleep(1.0)
            (tmp_path / "marker").write_text("ran past the sleep")
        finally:
            spans.append(time.monotonic() - start)

    job = blocking.enqueue()
    drain(app, timeout=60)
    assert not (tmp_path / "marker").exists()
    print(f"\na 1 s time.sleep with a 0.2 s timeout stopped after {spans[0]:.3f} s")
    assert spans[0] >= 0.95
    assert job.refresh().state == "failed" and job.errors[0].kind == "timeout"


def test_a_blocked_loop_fails_no_healthy_async_job_and_is_reported(
    make_any: Callable[..., durq.Durq], drain, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_any()
    starts: list[tuple[int, int, str]] = []

    @app.task(max_attempts=2)
    async def blocker() -> None:
        time.sleep(5)  # blocking code on the event loop

    @app.task(timeout=1, max_attempts=2)
    async def healthy(n: int) -> int:
        ctx = durq.context()
        starts.append((n, ctx.attempt, app.store.get(ctx.job_id).state))
        await asyncio.sleep(0.2)
        return n

    blocked = blocker.enqueue()  # first: it blocks the loop before the others start
    jobs = [healthy.enqueue(n=i) for i in range(4)]
    shown: list[float] = []  # what `durq status` shows of the worker's loop meanwhile
    done = threading.Event()

    def watch_status() -> None:
        while not done.wait(0.1):
            shown.extend(w.get("loop_blocked", 0.0) for w in app.status()["workers"])

    watcher = threading.Thread(target=watch_status, daemon=True)
    watcher.start()
    try:
        with caplog.at_level(logging.INFO, logger="durq.events"):
            drain(app, concurrency=5, timeout=120)
    finally:
        done.set()
        watcher.join(10)
    print(f"\nstatus showed the loop blocked for up to {max(shown, default=0.0):.2f} s")
    assert max(shown, default=0.0) >= 1.0
    # each healthy body started once, on its first attempt, while its job was running
    assert sorted(starts) == [(i, 1, "running") for i in range(4)]
    for i, job in enumerate(jobs):
        assert job.wait(1) == i
        assert job.refresh().attempts == 1 and job.errors == []
    assert blocked.refresh().state == "succeeded"
    names = [r.getMessage().split(" ", 1)[0] for r in caplog.records]
    assert "loop_blocked" in names and "loop_unblocked" in names


def cancel_cli(url: str, job_id: int) -> float:
    """``durq cancel ID`` from another process; returns the time it returned (epoch)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "durq", "cancel", str(job_id), "--db", url],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return time.time()


@pytest.mark.parametrize("task", ["spin", "spin_async"])
def test_cancel_from_a_third_process_stops_the_running_body(
    url: str, tmp_path: Path, task: str
) -> None:
    producer = durq.Durq(url)
    try:
        job = producer.enqueue(task, {}, queue="interrupts")
    finally:
        producer.close()
    spec = {"app": "tests.apps.interrupts", "url": url, "log": tmp_path / "w.log",
            "args": ("--concurrency", "2"), "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip
    with workers(spec) as (worker,):
        wait_for((tmp_path / f"started-{job.id}").exists, 60, 0.05, "the body to start")
        returned_at = cancel_cli(url, job.id)
        stopped = tmp_path / f"stopped-{job.id}"
        wait_for(stopped.exists, 30, 0.02, "the body to stop")
        stopped_at = float(stopped.read_text())
        time.sleep(0.5)
        assert worker.proc.poll() is None  # the worker goes on
    check = durq.Durq(url)
    try:
        record = check.get(job.id)
    finally:
        check.close()
    assert record.state == "cancelled" and record.finished_at is not None
    took = stopped_at - record.finished_at  # from the cancel's commit (the same host's clock)
    print(f"\n{task}: body stopped {took:.3f} s after the cancel committed "
          f"({stopped_at - returned_at:+.3f} s from `durq cancel` returning)")  # fmt: skip
    assert took < 5.0
    assert "job_interrupted" in [e["event"] for e in worker.events()]
    assert not (tmp_path / f"done-{job.id}").exists()
    child = tmp_path / f"child-{job.id}"
    if child.exists():  # the sync body's subprocess, killed through ctx.on_interrupt
        pid = int(child.read_text())
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10, 0.05, "the child to go")


def running(pid: int) -> bool:
    """The process runs (a zombie waiting for whoever adopted it to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cancel_from_a_third_process_stops_a_body_in_the_process_pool(
    url: str, tmp_path: Path
) -> None:
    """Under ``--pool processes`` a cancel stops the body's child: the body gets
    ``durq.Interrupted`` (its ``finally`` runs), its whole process group goes (the
    subprocess the body started too), the job ends cancelled, the pool goes on."""
    producer = durq.Durq(url)
    try:
        job = producer.enqueue("spin", {}, queue="interrupts")
        after = producer.enqueue("quick", {}, queue="interrupts")
    finally:
        producer.close()
    spec = {"app": "tests.apps.interrupts", "url": url, "log": tmp_path / "w.log",
            "args": ("--concurrency", "1", "--pool", "processes"),
            "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip
    with workers(spec) as (worker,):
        wait_for((tmp_path / f"started-{job.id}").exists, 60, 0.05, "the body to start")
        pid = int((tmp_path / f"child-{job.id}").read_text())
        returned_at = cancel_cli(url, job.id)
        wait_for(lambda: not running(pid), 10, 0.02, "the body's group to go")
        gone_at = time.time()
        check = durq.Durq(url)
        try:  # the pool replaced the child and runs the next job
            wait_for(lambda: check.get(after.id).state == "succeeded", 60, 0.05, "the next job")
            record = check.get(job.id)
            pools = {d.report.pool for d in check.store.worker_details()}  # `durq workers`
        finally:
            check.close()
        assert worker.proc.poll() is None
    print(f"\nprocess pool: the body's group was gone {gone_at - returned_at:.3f} s after "
          "`durq cancel` returned")  # fmt: skip
    assert gone_at - returned_at < 5.0  # about 0.02 s here; bounded for a loaded machine
    # the body got durq.Interrupted in its child: its finally ran, with the reason told
    assert (tmp_path / f"stopped-{job.id}").exists()
    assert record.state == "cancelled"
    assert not (tmp_path / f"done-{job.id}").exists()
    assert "job_interrupted" in [e["event"] for e in worker.events()]
    assert pools == {"processes"}


def test_concurrency_one_with_a_timeout_never_runs_two_bodies_at_once(
    url: str, tmp_path: Path
) -> None:
    producer = durq.Durq(url)
    try:  # the limit is the task's, taken at enqueue: declare it as the worker's app does

        @producer.task(name="limited", queue="interrupts", concurrency=1, concurrency_key="one")
        def limited() -> None: ...

        for _ in range(10):
            limited.enqueue()
    finally:
        producer.close()
    spec = {"app": "tests.apps.interrupts", "url": url,
            "args": ("--concurrency", "3"), "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip
    intervals = tmp_path / "intervals.txt"

    def finished() -> int:
        return len(intervals.read_text().splitlines()) if intervals.exists() else 0

    with workers({**spec, "log": tmp_path / "a.log"}, {**spec, "log": tmp_path / "b.log"}):
        wait_for(lambda: finished() == 10, 120, 0.1, "10 bodies to stop")
    spans = sorted(
        (float(a), float(b))
        for _, a, b in (line.split() for line in intervals.read_text().splitlines())
    )
    overlaps = [(x, y) for x, y in itertools.pairwise(spans) if y[0] < x[1]]
    assert overlaps == [], f"bodies ran at once: {overlaps}"
    assert sorted(tmp_path.glob("done-*")) == []


def test_an_async_body_that_swallows_its_cancel_keeps_its_slot(url: str, tmp_path: Path) -> None:
    """``concurrency=1``, ``timeout=0.3``: a body that catches the cancel and runs on is
    never orphaned beside the next body (``asyncio.wait_for`` ran it in an inner task)."""
    producer = durq.Durq(url)
    try:

        @producer.task(
            name="stubborn_async", queue="interrupts", concurrency=1, concurrency_key="stub"
        )
        def stubborn_async() -> None: ...

        for _ in range(4):
            stubborn_async.enqueue()
    finally:
        producer.close()
    intervals = tmp_path / "intervals.txt"
    spec = {"app": "tests.apps.interrupts", "url": url, "log": tmp_path / "w.log",
            "args": ("--concurrency", "4"), "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip
    with workers(spec):
        wait_for(
            lambda: intervals.exists() and len(intervals.read_text().splitlines()) == 4,
            60,
            0.1,
            "4 bodies to end",
        )
    spans = sorted(
        (float(a), float(b))
        for _, a, b in (line.split() for line in intervals.read_text().splitlines())
    )
    overlaps = [(x, y) for x, y in itertools.pairwise(spans) if y[0] < x[1]]
    assert overlaps == [], f"bodies ran at once: {overlaps}"
