"""A cancelled or expired job keeps its concurrency slot until its body is gone (issue 11,
item 4), on both backends, with real worker processes.

The body of ``held`` (tests/apps/interrupts.py, ``concurrency=1``) is in ``time.sleep`` (6 s; 5 s for the expiry), a
blocking C call the interruption cannot cut short, when its job is cancelled (``durq
cancel`` from another process) or expired by its deadline. The job's row ends at once, but
the next job of the key must not start before the first body has returned: the bodies'
recorded start/end intervals never overlap. (Before this change the cancel freed the slot
at once and the second body started beside the first.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import durq
from tests.integration.test_interrupts import cancel_cli
from tests.support.procs import wait_for, workers


def _intervals(path: Path) -> dict[int, tuple[float, float]]:
    """job id -> (start, end) epoch seconds of each body that returned."""
    if not path.exists():
        return {}
    spans = {}
    for line in path.read_text().splitlines():
        job_id, start, end = line.split()
        spans[int(job_id)] = (float(start), float(end))
    return spans


def _limit_held(url: str) -> tuple[int, int]:
    """(running, held) of the key ``held`` as ``dq.limits()`` reports them."""
    check = durq.Durq(url)
    try:
        for usage in check.limits():
            if usage["name"] == "held":
                return int(usage["running"]), int(usage["held"])
    finally:
        check.close()
    return 0, 0


@pytest.mark.parametrize("how", ["cancel", "expire"])
def test_a_stopped_body_keeps_its_concurrency_slot_until_it_returns(
    url: str, tmp_path: Path, how: str
) -> None:
    spec = {"app": "tests.apps.interrupts", "url": url,
            "args": ("--concurrency", "2"), "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip
    intervals = tmp_path / "intervals.txt"
    producer = durq.Durq(url)
    try:  # the limit is the task's, taken at enqueue: declare it as the worker's app does

        @producer.task(
            name="held", queue="interrupts", max_attempts=1, concurrency=1, concurrency_key="held"
        )
        def held(seconds: float) -> None: ...

        with workers({**spec, "log": tmp_path / "a.log"}, {**spec, "log": tmp_path / "b.log"}):
            warm = held.enqueue(seconds=0.0)  # the workers are up and claiming
            wait_for(lambda: warm.id in _intervals(intervals), 60, 0.05, "a first body")
            if how == "cancel":  # long enough for `durq cancel` to start on a loaded machine
                first = held.enqueue(seconds=6.0)
            else:  # expired by the sweeper (every 1 s) while its body sleeps
                first = held.options(deadline_in=2.5).enqueue(seconds=5.0)
            second = held.enqueue(seconds=0.0)
            wait_for((tmp_path / f"started-{first.id}").exists, 60, 0.02, "the body to start")
            if how == "cancel":
                cancel_cli(url, first.id)
            wait_for(
                lambda: producer.get(first.id).state in ("cancelled", "expired"),
                30, 0.02, "the job to end",
            )  # fmt: skip
            ended_at = time.time()
            usage = _limit_held(url)
            seen = first.id not in _intervals(intervals)  # the body still ran at that read:
            if seen:
                assert usage == (0, 1)  # its slot is a hold of the key, not a running job
            wait_for(lambda: second.id in _intervals(intervals), 60, 0.05, "the second body")
            wait_for(lambda: first.id in _intervals(intervals), 60, 0.05, "the first body")
            # once the body is gone its hold is deleted (the worker's next tick)
            wait_for(lambda: _limit_held(url) == (0, 0), 30, 0.05, "the hold to go")
        record = producer.get(first.id)
    finally:
        producer.close()
    spans = _intervals(intervals)
    first_span, second_span = spans[first.id], spans[second.id]
    print(
        f"\n{how}: row ended {first_span[1] - ended_at:.3f} s before the body returned; the "
        f"next body started {second_span[0] - first_span[1]:+.3f} s after it (hold "
        f"{'seen' if seen else 'not read in time'} in dq.limits())"
    )
    assert record.state == ("cancelled" if how == "cancel" else "expired")
    assert second_span[0] >= first_span[1], f"the next body started beside it: {spans}"
    assert not (tmp_path / f"done-{first.id}").exists()  # stopped as the sleep returned
