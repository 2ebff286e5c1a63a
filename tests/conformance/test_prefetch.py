"""The store side of prefetch (durq/worker/prefetch.py), on every backend: jobs claimed
ahead go back as they were, a claim takes limited jobs only for free slots, and the worker
can see which of its queues are paused."""

from __future__ import annotations

import durq
from durq.model import Outcome

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(concurrency=1, concurrency_key="one")
    def capped(n: int = 0) -> int:
        return n


def test_give_back_hands_the_attempt_back_keeps_the_place_and_writes_no_error(
    app: durq.Durq,
) -> None:
    register(app)
    first = app.tasks["work"].enqueue(n=1)
    second = app.tasks["work"].enqueue(n=2)
    a, b = app.store.claim("default", ["work"], 2, LEASE, "w1")
    assert app.get(first.id).attempts == 1
    # b's token is stale (say the job was reaped and claimed again): only a goes back
    assert app.store.give_back([(a.id, a.lease_token), (b.id, b.lease_token + 1)]) == [a.id]
    back = app.get(first.id)
    assert (back.state, back.attempts, back.errors, back.run_at) == (
        "queued",
        0,
        [],
        first.run_at,
    )
    assert app.get(second.id).state == "running"
    # the token is gone with the give-back: the old claim cannot finish the job
    assert app.store.finish([Outcome(a.id, a.lease_token, "succeeded")]) == [False]
    # it is claimed again first (its run_at was kept), as attempt 1
    (again,) = app.store.claim("default", ["work"], 1, LEASE, "w2")
    assert (again.id, again.attempt) == (first.id, 1)
    assert app.store.give_back([]) == []


def test_limited_caps_jobs_with_a_limit_and_returns_them_first(app: durq.Durq) -> None:
    register(app)
    plain = [app.tasks["work"].enqueue(n=i) for i in range(3)]
    capped = app.tasks["capped"].options(priority=5).enqueue()  # after the plain ones
    # no free slot: claiming ahead takes no limited job, so it cannot hold the limit's slot
    ahead = app.store.finish_and_claim([], ["default"], ["work", "capped"], 10, LEASE, "w1", 0)[1]
    assert sorted(c.id for c in ahead) == sorted(j.id for j in plain)
    assert app.get(capped.id).state == "queued"
    app.store.give_back([(c.id, c.lease_token) for c in ahead])
    # one free slot: the limited job comes first in the list, then the plain ones
    _, got = app.store.finish_and_claim([], ["default"], ["work", "capped"], 10, LEASE, "w1", 1)
    assert got[0].id == capped.id
    assert sorted(c.id for c in got[1:]) == sorted(j.id for j in plain)


def test_paused_among_names_the_paused_queues(app: durq.Durq) -> None:
    register(app)
    assert app.store.paused_among(["default", "other"]) == set()
    app.pause("other", reason="maintenance")
    assert app.store.paused_among(["default", "other"]) == {"other"}
    assert app.store.paused_among(["default"]) == set()
    app.resume("other")
    assert app.store.paused_among(["other"]) == set()
