"""Jobs that depend on jobs (issue 15 item 1, case 33), on every backend.

Driven through the store's claim and finish, as a worker would, so every transition that
ends a parent (success, failure, a retry with no attempts left, the reaper, a release,
cancel, a deadline) is checked for releasing or cancelling its dependents in the same
transaction.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

import durq
from durq.errors import ConfigError, ParentNotFound, PayloadError
from durq.model import AttemptError, Claimed, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=2)
    def step(n: int = 0, prev: Any = None) -> int:
        return n

    @app.task
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task
    def total(values: list[int]) -> int:
        return sum(values)


def claim(app: durq.Durq, tasks: tuple[str, ...] = ("step", "add", "total")) -> list[Claimed]:
    return app.store.claim("default", list(tasks), 1000, LEASE, "w1")


def ok(c: Claimed, result: str = "null") -> Outcome:
    return Outcome(c.id, c.lease_token, "succeeded", result=result)


def bad(c: Claimed, kind: str = "failed") -> Outcome:
    error = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "permanent")
    return Outcome(c.id, c.lease_token, kind, error=error)


def state(app: durq.Durq, job: durq.Job | int) -> str:
    return str(app.get(job if isinstance(job, int) else job.id).state)


def run_all(app: durq.Durq, results: dict[str, Any] | None = None) -> list[int]:
    """Claim and succeed until nothing is ready; each add/total computes its real result."""
    import json

    order: list[int] = []
    while True:
        claimed = claim(app)
        if not claimed:
            return order
        outs = []
        for c in claimed:
            payload = json.loads(c.payload)
            value = app.tasks[c.task].fn(**payload)
            outs.append(ok(c, json.dumps(value)))
            order.append(c.id)
        assert all(app.store.finish(outs))


def test_a_child_waits_and_is_queued_when_its_last_parent_succeeds(app: durq.Durq) -> None:
    register(app)
    step = app.tasks["step"]
    a, b = step.enqueue(n=1), step.enqueue(n=2)
    child = step.options(after=[a, b.id]).enqueue(n=3)
    assert child.state == "waiting"
    assert child.parents == [a.id, b.id] and a.children == [child.id]
    assert [c.id for c in claim(app)] == [a.id, b.id]  # the waiting child is not claimable
    assert app.status()["queues"]["default"]["counts"]["waiting"] == 1


def test_fan_in_releases_the_child_once_in_the_transaction_of_the_last_parent(
    app: durq.Durq,
) -> None:
    register(app)
    step = app.tasks["step"]
    parents = [step.enqueue(n=i) for i in range(3)]
    child = app.enqueue("step", {"n": 9}, after=parents)
    claimed = {c.id: c for c in claim(app)}
    assert set(claimed) == {p.id for p in parents}
    assert app.store.finish([ok(claimed[parents[0].id])]) == [True]
    assert state(app, child) == "waiting"
    assert app.store.finish([ok(claimed[parents[2].id])]) == [True]
    assert state(app, child) == "waiting"
    assert app.store.finish([ok(claimed[parents[1].id])]) == [True]
    assert state(app, child) == "queued"
    assert [c.id for c in claim(app)] == [child.id]
    assert app.store.stuck_waiting() == []


def test_a_failed_parent_cancels_its_dependents_with_the_reason_down_the_graph(
    app: durq.Durq,
) -> None:
    register(app)
    step = app.tasks["step"]
    p1, p2 = step.enqueue(n=1), step.enqueue(n=2)
    q = step.options(after=[p1, p2]).enqueue()
    grandchild = step.options(after=[q]).enqueue()
    runs_anyway = step.options(after=[p2], on_parent_failure="run").enqueue()
    claimed = {c.id: c for c in claim(app)}
    assert app.store.finish([bad(claimed[p2.id])]) == [True]  # p1 still running
    q_job = app.get(q.id)
    assert q_job.state == "cancelled"
    assert q_job.last_error is not None and q_job.last_error.kind == "parent_failed"
    assert f"parent job {p2.id} (step) ended failed" in q_job.last_error.message
    g = app.get(grandchild.id)
    assert g.state == "cancelled" and f"parent job {q.id}" in g.errors[-1].message
    assert state(app, runs_anyway) == "queued"
    assert app.store.finish([ok(claimed[p1.id])]) == [True]  # q stays cancelled
    assert state(app, q) == "cancelled"
    assert [c.id for c in claim(app)] == [runs_anyway.id]


def test_a_retry_is_not_an_ending_the_child_starts_after_the_successful_attempt(
    app: durq.Durq,
) -> None:
    """Case 33 step 4: P2 fails on attempt 1 and succeeds on attempt 2."""
    register(app)
    step = app.tasks["step"]
    p = step.enqueue(n=1)
    child = step.options(after=[p]).enqueue()
    (c,) = claim(app)
    assert app.store.finish([bad(c, "retry")]) == [True]
    assert state(app, p) == "queued" and state(app, child) == "waiting"
    (c,) = claim(app)
    assert app.store.finish([ok(c)]) == [True]
    assert state(app, child) == "queued"


def test_every_ending_path_settles_dependents(app: durq.Durq, clock: Clock) -> None:
    """Case 33: the reaper (a parent abandoned by a dead worker), cancel of a queued and
    of a running parent, a shutdown release that fails, a deadline."""
    register(app)
    step = app.tasks["step"]
    # the reaper: P3 (one attempt) loses its lease; R runs whatever P3's outcome
    p3 = step.options(max_attempts=1).enqueue(n=3)
    r = step.options(after=[p3], on_parent_failure="run").enqueue()
    s_after_p3 = step.options(after=[p3]).enqueue()
    (c,) = claim(app)
    clock.advance(LEASE + 1)
    app.store.reap()
    assert state(app, p3) == "failed"
    assert state(app, r) == "queued" and state(app, s_after_p3) == "cancelled"
    app.cancel(r.id)
    # cancel while queued, and while running
    p4 = step.enqueue(n=4)
    s4 = step.options(after=[p4]).enqueue()
    app.cancel(p4.id)
    assert state(app, s4) == "cancelled"
    assert "ended cancelled" in app.get(s4.id).errors[-1].message
    p5 = step.enqueue(n=5)
    s5 = step.options(after=[p5]).enqueue()
    (c,) = claim(app)
    app.cancel(p5.id)
    assert state(app, s5) == "cancelled"
    assert app.store.finish([ok(c)]) == [False]  # the cancelled parent's outcome is fenced
    # a release with no attempts left fails the parent
    p6 = step.options(max_attempts=1).enqueue(n=6)
    s6 = step.options(after=[p6]).enqueue()
    (c,) = claim(app)
    assert app.store.release(c.id, c.lease_token, 0, '{"kind": "shutdown"}') is not None
    assert state(app, p6) == "failed" and state(app, s6) == "cancelled"
    # a deadline: the parent expires
    p7 = step.options(deadline_in=10).enqueue(n=7)
    s7 = step.options(after=[p7]).enqueue()
    clock.advance(11)
    app.sweep()
    assert state(app, p7) == "expired" and state(app, s7) == "cancelled"
    assert app.store.stuck_waiting() == []


def test_a_parent_that_already_ended_is_judged_at_enqueue(app: durq.Durq) -> None:
    register(app)
    step = app.tasks["step"]
    good, failing = step.enqueue(n=1), step.enqueue(n=2)
    claimed = {c.id: c for c in claim(app)}
    app.store.finish([ok(claimed[good.id]), bad(claimed[failing.id])])
    assert step.options(after=[good]).enqueue().state == "queued"
    late = step.options(after=[failing]).enqueue()
    assert late.state == "cancelled" and late.errors[-1].kind == "parent_failed"
    assert step.options(after=[failing], on_parent_failure="run").enqueue().state == "queued"


def test_a_parent_that_does_not_exist_is_a_clear_error_and_nothing_is_written(
    app: durq.Durq,
) -> None:
    register(app)
    step = app.tasks["step"]
    real = step.enqueue()
    with pytest.raises(ParentNotFound, match=r"\[999999\] do not exist"):
        step.options(after=[real, 999999]).enqueue()
    with pytest.raises(ParentNotFound):
        app.enqueue_graph([step.s(n=1), step.s(n=2).after(999999)])
    assert [j.id for j in app.jobs(limit=10)] == [real.id]
    for bad_ref in ("7", 0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="after= takes"):
            step.options(after=[bad_ref]).enqueue()
    with pytest.raises(ConfigError, match="on_parent_failure"):
        step.options(after=[real], on_parent_failure="ignore").enqueue()
    with pytest.raises(ConfigError, match="parked and waiting"):
        step.options(after=[real], park=True).enqueue()
    later = step.s(n=2)
    with pytest.raises(ConfigError, match="comes later"):
        app.enqueue_graph([step.s(n=1).after(later), later])
    assert len(app.jobs(limit=10)) == 1


def test_chain_passes_each_result_to_the_next_and_a_failure_cancels_the_rest(
    app: durq.Durq,
) -> None:
    register(app)
    add = app.tasks["add"]
    jobs = app.chain(add.s(x=1, y=2), add.s(y=10), add.s(y=100))
    assert [j.state for j in jobs] == ["queued", "waiting", "waiting"]
    run_all(app)
    assert [app.get(j.id).result for j in jobs] == [3, 13, 113]
    assert app.get(jobs[2].id).payload == {"y": 100, "x": 13}

    middle_fails = app.chain(add.s(x=1), add.s(y=1), add.s(y=1))
    (c,) = claim(app)
    app.store.finish([ok(c, "1")])
    (c,) = claim(app)
    app.store.finish([bad(c)])
    assert state(app, middle_fails[2]) == "cancelled"
    with pytest.raises(PayloadError, match="does not fit add"):
        app.chain(add.s(x=1), add.s(z=1))  # nothing written
    assert len(app.jobs(limit=100)) == 6

    # a step's own on_parent_failure wins over the chain's default (and over none)
    own = app.chain(add.s(x=1), add.s(y=1), add.s(y=1).options(on_parent_failure="run"))
    (c,) = claim(app)
    app.store.finish([ok(c, "1")])
    (c,) = claim(app)
    app.store.finish([bad(c)])
    assert state(app, own[2]) == "queued"  # it runs anyway, receiving None
    assert app.get(own[2].id).payload == {"y": 1, "x": None}
    (c,) = claim(app)
    app.store.finish([bad(c)])
    fan = app.group([add.s(x=1)]).then(app.tasks["total"].s().options(on_parent_failure="run"))
    (c,) = claim(app)
    app.store.finish([bad(c)])
    assert state(app, fan[1]) == "queued"


def test_group_then_fans_in_the_members_results_in_member_order(app: durq.Durq) -> None:
    register(app)
    add, total = app.tasks["add"], app.tasks["total"]
    jobs = app.group([add.s(x=i, y=i) for i in range(5)]).then(total.s())
    assert [j.state for j in jobs] == ["queued"] * 5 + ["waiting"]
    assert jobs[-1].parents == [j.id for j in jobs[:5]]
    run_all(app)
    final = app.get(jobs[-1].id)
    assert final.payload == {"values": [0, 2, 4, 6, 8]} and final.result == 20


def test_a_graph_is_all_or_nothing(app: durq.Durq) -> None:
    register(app)
    step = app.tasks["step"]
    before = len(app.jobs(limit=100))
    first = step.s(n=1)
    with pytest.raises(PayloadError):
        app.enqueue_graph([first, step.s(n=object()).after(first)])
    existing = step.enqueue()
    with pytest.raises(ParentNotFound):  # the third row fails in the store: the two go too
        app.enqueue_graph([first, step.s(n=2).after(first, existing), step.s().after(424242)])
    assert len(app.jobs(limit=100)) == before + 1


def test_two_parents_finishing_at_once_release_the_child_exactly_once(
    app: durq.Durq, make: Any
) -> None:
    """Case 33 step 5: P1 and P2 finish at the same instant from two stores, 30 times."""
    register(app)
    other = make()
    register(other)
    step = app.tasks["step"]
    for _ in range(30):
        p1, p2 = step.enqueue(n=1), step.enqueue(n=2)
        q = step.options(after=[p1, p2]).enqueue()
        c1 = app.store.claim("default", ["step"], 1, LEASE, "a")
        c2 = other.store.claim("default", ["step"], 1, LEASE, "b")
        assert {c1[0].id, c2[0].id} == {p1.id, p2.id}
        barrier = threading.Barrier(2)
        done: list[list[bool]] = []

        def finish(
            store: Any, c: Claimed, barrier: threading.Barrier = barrier, done: Any = done
        ) -> None:
            barrier.wait()
            done.append(store.finish([ok(c)]))

        threads = [
            threading.Thread(target=finish, args=(app.store, c1[0])),
            threading.Thread(target=finish, args=(other.store, c2[0])),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert done == [[True], [True]]
        assert state(app, q) == "queued"
        (cq,) = claim(app)
        assert cq.id == q.id
        app.store.finish([ok(cq)])
    assert app.store.stuck_waiting() == []


def test_a_child_added_while_its_parent_finishes_is_never_stranded(
    app: durq.Durq, make: Any
) -> None:
    """An enqueue naming a running parent races the parent's finish: the child ends queued."""
    register(app)
    other = make()
    register(other)
    step = app.tasks["step"]
    for _ in range(30):
        p = step.enqueue(n=1)
        (c,) = app.store.claim("default", ["step"], 1, LEASE, "a")
        barrier = threading.Barrier(2)
        child: list[durq.Job] = []

        def add_child(
            barrier: threading.Barrier = barrier, child: Any = child, parent: int = p.id
        ) -> None:
            barrier.wait()
            child.append(other.tasks["step"].options(after=[parent]).enqueue(n=2))

        t = threading.Thread(target=add_child)
        t.start()
        barrier.wait()
        assert app.store.finish([ok(c)]) == [True]
        t.join()
        assert state(app, child[0]) == "queued"
        (cc,) = claim(app)
        app.store.finish([ok(cc)])
    assert app.store.stuck_waiting() == []


def test_a_child_of_a_member_of_an_aborted_batch_is_cancelled_with_it(
    app: durq.Durq, make: Any
) -> None:
    register(app)
    outside = make()  # its enqueues do not join app's batch
    register(outside)
    step = app.tasks["step"]
    with pytest.raises(RuntimeError), app.batch():
        member = step.enqueue(n=1)
        child = outside.tasks["step"].options(after=[member.id]).enqueue(n=2)
        assert child.batch_id is None and child.state == "waiting"
        raise RuntimeError("the block failed")
    assert state(app, member) == "cancelled" and state(app, child) == "cancelled"
    assert app.store.stuck_waiting() == []


def test_the_finish_of_a_chain_step_claims_the_next_step_in_the_same_call(
    app: durq.Durq,
) -> None:
    """The worker's finish-and-claim queues the next step and claims it at once: it does not
    wait for a claim round of its own (PostgreSQL: the NOTIFY and an idle poll)."""
    register(app)
    add = app.tasks["add"]
    jobs = app.chain(add.s(x=1), add.s(), add.s())
    (first,) = claim(app)
    tasks = ["step", "add", "total"]
    applied, claimed = app.store.finish_and_claim(
        [ok(first, "2")], ["default"], tasks, 10, LEASE, "w1", limited=1
    )
    assert applied == [True]
    assert [c.id for c in claimed] == [jobs[1].id]
    assert claimed[0].payload is not None and json.loads(claimed[0].payload) == {"x": 2}
    assert state(app, jobs[1]) == "running" and state(app, jobs[2]) == "waiting"
    applied, claimed = app.store.finish_and_claim(
        [ok(claimed[0], "3")], ["default"], tasks, 10, LEASE, "w1", limited=1
    )
    assert applied == [True] and [c.id for c in claimed] == [jobs[2].id]


def test_a_child_of_a_parent_cancelled_in_the_same_settle_is_decided_in_it(
    app: durq.Durq,
) -> None:
    """p fails: a (after p) is cancelled; b (after p and a, on_parent_failure='run') then
    runs, in the transaction of p's failure, although a was still waiting when b was first
    looked at."""
    register(app)
    step = app.tasks["step"]
    p = step.enqueue(n=1)
    a = step.options(after=[p]).enqueue(n=2)
    b = step.options(after=[p, a], on_parent_failure="run").enqueue(n=3)
    (claimed,) = claim(app)
    assert app.store.finish([bad(claimed)]) == [True]
    assert state(app, a) == "cancelled"
    assert state(app, b) == "queued"
    assert app.store.stuck_waiting() == []
