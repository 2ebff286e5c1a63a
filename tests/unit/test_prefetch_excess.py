"""``Prefetch.take_excess``: jobs claimed ahead while runs were short, that the longer mean
run time now says would wait past the 50 ms rule, are taken out (newest first) to be
given back, once they have waited; nothing else is."""

from __future__ import annotations

import time

from durq.model import Claimed
from durq.worker.prefetch import Prefetch


def job(n: int) -> Claimed:
    return Claimed(n, "default", "work", "{}", 1, 3, 1000 + n)


def test_a_longer_mean_gives_back_the_newest_jobs_beyond_the_rule() -> None:
    ahead = Prefetch(depth=64, slots=2)
    ahead.ran(0.0001)  # no-ops: the whole depth is allowed
    assert ahead.room() == 64
    ahead.put([job(n) for n in range(64)])
    assert ahead.take_excess(0.0) == []  # still no-ops: nothing is over the rule
    for _ in range(60):
        ahead.ran(0.1)  # now 100 ms jobs: 2 slots x 50 ms / ~100 ms = 1 may wait
    assert ahead.take_excess(60.0) == []  # none has waited a minute yet
    taken = ahead.take_excess(0.0)
    keep = int(ahead.max_wait * ahead.slots / ahead._mean_run)  # type: ignore[operator]
    assert [j.id for j in taken] == list(range(63, keep - 1, -1))  # the newest first
    assert len(ahead) == keep
    assert ahead.room() == 0
    assert ahead.take_excess(0.0) == []  # what is left is within the rule


def test_nothing_is_taken_before_a_run_time_is_known_or_after_close() -> None:
    ahead = Prefetch(depth=8, slots=1)
    ahead.put([job(1), job(2)])
    assert ahead.take_excess(0.0) == []  # no job returned yet
    ahead.ran(10.0)
    ahead.close()
    assert ahead.take_excess(0.0) == []


def test_jobs_waiting_for_an_earlier_body_are_left_alone() -> None:
    ahead = Prefetch(depth=8, slots=1)
    ahead.ran(0.0001)
    ahead.put([job(1), job(2)])
    parked = ahead.start(lambda: 1, lambda _j: None, running={1})  # job 1's body runs here
    assert [j.id for j in parked] == [1]
    ahead.ran(10.0)  # long runs now: nothing may wait
    time.sleep(0.001)
    assert [j.id for j in ahead.take_excess(0.0)] == []  # job 2 started; job 1 waits
    assert len(ahead) == 1
