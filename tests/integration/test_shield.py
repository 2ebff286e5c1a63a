"""An interruption never lands inside durq's own code (durq/shield.py), on both backends:
a ``def`` body stopped while it is in the store (``ctx.progress``, ``ctx.step``, an
enqueue) leaves no write turn or pooled connection taken, so the worker goes on; and a
body's ``finally`` gets time to clean up before the next raise."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import durq
from durq.worker.interrupt import RAISE_EVERY
from tests.support.procs import wait_for, workers

LOOPS = ("progress_loop", "step_loop", "enqueue_loop")


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_bodies_stopped_inside_the_store_leave_the_worker_running(
    url: str, tmp_path: Path, pool: str
) -> None:
    """The adversarial repro: 40 bodies that loop on store calls with ``timeout=0.2`` and
    40 trivial jobs, ``-c 4``. Before the shield, on SQLite a raise landed between taking
    the write turn and giving it back: no job finished and every loop logged store_busy.
    In the process pool the children write progress themselves: there the SIGTERM
    handler's raise waits for the store call too."""
    producer = durq.Durq(url)
    try:
        loops = [
            producer.enqueue(LOOPS[i % 3], {}, queue="shield", max_attempts=1) for i in range(40)
        ]
        trivial = [producer.enqueue("trivial", {"n": i}, queue="shield") for i in range(40)]
        forever = [producer.enqueue("progress_forever", {}, queue="shield-forever")]
    finally:
        producer.close()
    ids = [j.id for j in loops + trivial]
    spec = {"app": "tests.apps.shield", "url": url, "log": tmp_path / "w.log",
            "args": ("-c", "4", "--grace", "2", "--queues", "shield,shield-forever",
                     "--pool", pool),
            "env": {"DURQ_MARKS": str(tmp_path), "PYTHONFAULTHANDLER": "1"}}  # fmt: skip
    check = durq.Durq(url)
    try:
        with workers(spec) as (worker,):

            def finished() -> bool:
                return all(check.get(i).state in ("succeeded", "failed") for i in ids)

            wait_for(finished, 240, 0.25, "the 80 jobs to end")
            started = tmp_path / f"started-{forever[0].id}"
            wait_for(started.exists, 60, 0.05, "the body without a timeout to start")
            time.sleep(0.5)  # it is deep in its progress loop
            sent = time.monotonic()
            worker.signal(signal.SIGTERM)
            code = worker.wait(60)
            took = time.monotonic() - sent
            events = worker.events()
        records = {i: check.get(i) for i in ids}
    finally:
        check.close()
    print(f"\nSIGTERM with --grace 2 and a body in a progress loop: exited in {took:.2f} s")
    assert code == 0
    assert took < 2 + 8  # the grace, and a bound for a loaded machine (minutes before)
    for job in loops:
        record = records[job.id]
        assert record.state == "failed", (job.id, record.state)
        assert [e.kind for e in record.errors] == ["timeout"], (record.task, record.errors)
    assert all(records[j.id].state == "succeeded" for j in trivial)
    assert "store_busy" not in [e["event"] for e in events]


def test_a_finally_block_runs_to_its_end(
    make_any: Callable[..., durq.Durq], drain, tmp_path: Path
) -> None:
    """A body stopped at its timeout gets :data:`RAISE_EVERY` seconds before the next
    raise: its 10 cleanup steps of 0.05 s (with a store call in each) all run."""
    app = make_any()
    log = tmp_path / "cleanup.txt"

    @app.task(timeout=0.3, max_attempts=1)
    def tidy() -> None:
        ctx = durq.context()
        try:
            while True:
                time.sleep(0.01)
        finally:
            for step in range(1, 11):
                time.sleep(0.05)
                ctx.progress(step / 10, f"cleanup {step}")
                with open(log, "a") as out:
                    out.write(f"{step}\n")

    job = tidy.enqueue()
    drain(app, timeout=60)
    assert RAISE_EVERY >= 1.0
    assert log.read_text().split() == [str(s) for s in range(1, 11)]
    record = job.refresh()
    assert record.state == "failed" and record.errors[0].kind == "timeout"
