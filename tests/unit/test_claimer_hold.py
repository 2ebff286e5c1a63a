"""``Claimer.holding``: the claimer holds the outcomes waiting (to record more of them in
one statement) only while the prefetch still has two jobs per slot, fewer outcomes wait
than half its depth, for at most ``HOLD_WAIT`` seconds, and never once it stops claiming;
with nothing waiting there is nothing to hold. A real worker, not run."""

from __future__ import annotations

from pathlib import Path

import durq
from durq.model import Claimed, Outcome
from durq.worker.services import HOLD_WAIT


def job(n: int) -> Claimed:
    return Claimed(n, "default", "noop", "{}", 1, 3, 1000 + n)


def test_outcomes_are_held_only_while_every_slot_has_jobs_ahead(tmp_path: Path) -> None:
    app = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}")

    @app.task
    def noop() -> None:
        return None

    worker = app.worker(concurrency=2)
    claimer = worker.claimer
    depth = worker.prefetch.depth
    assert claimer.holding(None) is None  # nothing waiting

    def wait_one(n: int) -> None:  # an outcome handed over (what it says does not matter)
        claimer.outcomes.put((None, Outcome(n, 1000 + n, "succeeded")))  # type: ignore[arg-type]

    wait_one(1)
    assert claimer.holding(None) is None  # no job ahead: a slot would wait for the claim
    worker.prefetch.put([job(n) for n in range(10, 13)])
    assert claimer.holding(None) is None  # 3 ahead for 2 slots: fewer than 2 per slot
    worker.prefetch.put([job(13)])
    since = claimer.holding(None)
    assert since is not None  # 4 ahead: held
    assert claimer.holding(since) == since  # still within HOLD_WAIT
    assert claimer.holding(since - HOLD_WAIT) is None  # held long enough: record now
    for n in range(2, depth // 2 + 1):
        wait_one(n)
    assert claimer.outcomes.qsize() == depth // 2
    assert claimer.holding(None) is None  # half the depth waits: record now
    while claimer.outcomes.qsize() > 1:
        claimer.outcomes.get_nowait()
    assert claimer.holding(None) is not None
    claimer.stop_claiming()
    assert claimer.holding(None) is None  # stopping: outcomes are recorded at once
    app.close()
