"""The async API (issue 16 §5): aenqueue, aenqueue_many, await_result, abatch, ctx.astep,
on both backends, none of them blocking the event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import durq


def test_aenqueue_await_result_and_astep_under_a_real_worker(make_any) -> None:
    dq = make_any()
    ran: list[str] = []

    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        ran.append(f"fetch {url}")
        return url.upper()

    def parse(text: str) -> int:
        ran.append("parse")
        return len(text)

    @dq.task(max_attempts=2, backoff=durq.retry.constant(0))
    async def crawl(url: str) -> int:
        ctx = durq.context()
        text = await ctx.astep("fetch", fetch, url)  # an async step, awaited on the loop
        size = await ctx.astep("parse", parse, text)  # a sync step, run in a thread
        if ctx.attempt == 1:
            raise ConnectionError("flaky")
        return size

    @dq.task
    def add(a: int, b: int) -> int:
        return a + b

    async def producer() -> list[Any]:
        one = await crawl.aenqueue(url="a.example")
        many = await add.aenqueue_many([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
        named = await dq.aenqueue("add", {"a": 5, "b": 6}, priority=-1)
        return [await j.await_result(timeout=30) for j in (one, *many, named)]

    worker = dq.worker(concurrency=4, prune_interval=None)
    worker.start()
    try:
        results = asyncio.run(producer())
    finally:
        worker.stop()
    assert results == [9, 3, 7, 11]
    assert ran == ["fetch a.example", "parse"]  # steps ran once across both attempts


def test_abatch_collects_aenqueued_jobs_and_fires_its_callback(make_any) -> None:
    dq = make_any()
    fired: list[tuple[str, dict[str, int]]] = []

    @dq.task
    def member(n: int) -> int:
        return n

    @dq.task
    def done(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
        fired.append((outcome, counts))

    async def build() -> int:
        async with dq.abatch(on_complete=done, meta={"k": 1}) as batch:
            await member.aenqueue(n=1)
            await member.aenqueue_many([{"n": 2}, {"n": 3}])
        return batch.id

    batch_id = asyncio.run(build())
    assert dq.batch_status(batch_id).size == 3
    dq.run_until_idle()
    assert fired == [("completed", {"succeeded": 3})]


def test_await_result_times_out_without_a_worker_and_says_so(make_app) -> None:
    dq = make_app()

    async def wait() -> None:
        job = await dq.aenqueue("nobody", {})
        await job.await_result(timeout=0.1)

    with pytest.raises(TimeoutError, match="no live worker watches queue 'default'"):
        asyncio.run(wait())


def test_the_loop_runs_other_coroutines_while_enqueues_are_in_flight(make_app) -> None:
    """Correctness, not speed: a blocking enqueue would let no tick run between the first
    and the last of these enqueues. The stall figure (max gap between ticks over 1,000
    enqueues) is measured in bench/async_stall.py, not asserted here."""
    dq = make_app()

    @dq.task
    def noop(i: int) -> None: ...

    dq.store.migrate()

    async def scenario() -> tuple[int, int]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0)

        tick_task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = time.monotonic()
        jobs = [await noop.aenqueue(i=i) for i in range(50)]
        end = time.monotonic()
        stop.set()
        await tick_task
        return len(jobs), sum(1 for t in ticks if start < t < end)

    count, ticks_during = asyncio.run(scenario())
    assert count == 50 and len(dq.jobs(limit=100)) == 50
    assert ticks_during >= 50  # at least one tick while each enqueue was in its thread
