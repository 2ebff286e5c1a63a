"""The default prefetch depth (64) with a real in-process worker on both backends: a pause
while 64 jobs are claimed ahead gives every one back before any starts, and jobs with a
limit are still never claimed ahead however deep the buffer (tests/integration/
test_prefetch.py proves the same at a depth of 3 or 4)."""

from __future__ import annotations

from collections.abc import Callable

import durq
from durq.worker.prefetch import MIN_DEPTH
from tests.integration.test_prefetch import Gate, running, states
from tests.support.procs import wait_for


def test_a_pause_while_64_are_prefetched_gives_every_one_back_before_it_starts(
    make_any: Callable[..., durq.Durq],
) -> None:
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1) as w:  # the default depth: max(2 x 1, 64)
        assert w.prefetch.depth == MIN_DEPTH
        busy = app.tasks["gated"].enqueue()
        wait_for(lambda: busy.id in gate.started, 10, what="the slot to fill")
        waiting = app.tasks["gated"].enqueue_many([{"n": i} for i in range(100)])
        # the warm-up's mean run time is tiny: the whole depth is claimed ahead
        wait_for(lambda: len(w.prefetch) == MIN_DEPTH, 10, what="64 prefetched")
        assert states(app, waiting).count("running") == MIN_DEPTH
        app.pause("default", reason="maintenance")
        # a claim already under way as the pause committed may still take a job or two:
        # those go back at the prefetch's next check, like the rest
        wait_for(
            lambda: (
                {(r.state, r.attempts) for r in (app.get(j.id) for j in waiting)} == {("queued", 0)}
            ),
            5,
            what="every one back in the queue, no attempt spent",
        )
        assert len(w.prefetch) == 0
        assert all(app.get(j.id).errors == [] for j in waiting)
        gate.open.set()
        wait_for(lambda: app.get(busy.id).state == "succeeded", 10, what="the running job")
        assert gate.started == [busy.id]  # none of the 100 started while paused
        app.resume("default")
        wait_for(lambda: states(app, waiting) == ["succeeded"] * 100, 30, what="after resume")
    assert sorted(gate.started[1:]) == sorted(j.id for j in waiting)  # each once
    assert {app.get(j.id).attempts for j in waiting} == {1}


def test_a_limited_job_is_not_claimed_ahead_at_the_default_depth(
    make_any: Callable[..., durq.Durq],
) -> None:
    app = make_any()
    gate = Gate(app)
    with running(app, concurrency=1) as w:
        busy = app.tasks["gated"].enqueue()
        wait_for(lambda: busy.id in gate.started, 10, what="the slot to fill")
        capped = app.tasks["capped"].enqueue_many([{"n": i} for i in range(3)])
        plain = app.tasks["gated"].enqueue_many([{"n": i} for i in range(100)])
        wait_for(lambda: len(w.prefetch) == MIN_DEPTH, 10, what="64 prefetched")
        assert states(app, capped) == ["queued"] * 3  # the slot is taken: none claimed ahead
        gate.open.set()
        wait_for(
            lambda: states(app, capped + plain) == ["succeeded"] * 103, 30, what="all to finish"
        )
