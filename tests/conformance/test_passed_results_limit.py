"""A child's payload with its parents' results keeps the app's ``payload_limit`` (defects
item 1), on every backend: the last parent's finish always commits, and a child whose
payload would be over the limit is failed, not run, with kind ``unstorable_payload``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import durq
from durq.errors import PayloadTooLarge
from durq.model import Claimed, Outcome
from tests.conftest import Clock

LIMIT = 1000


@pytest.fixture
def small(backend_url: str, clock: Clock) -> Iterator[durq.Durq]:
    dq = durq.Durq(backend_url, clock=clock, payload_limit=LIMIT)

    @dq.task
    def make(n: int) -> str:
        return "x" * n

    @dq.task
    def join(values: list[str], note: str = "") -> int:
        return len(values)

    @dq.task
    def echo(value: Any) -> Any:
        return value

    yield dq
    dq.close()


def claim(app: durq.Durq) -> list[Claimed]:
    return app.store.claim("default", ["make", "join", "echo"], 1000, 30.0, "w1")


def succeed_all(app: durq.Durq, claimed: list[Claimed]) -> None:
    outs = []
    for c in claimed:
        value = app.tasks[c.task].fn(**json.loads(c.payload))
        outs.append(Outcome(c.id, c.lease_token, "succeeded", result=json.dumps(value)))
    assert all(app.store.finish(outs))


def test_a_fan_in_over_the_payload_limit_fails_its_child_and_the_parents_commit(
    small: durq.Durq,
) -> None:
    make, join = small.tasks["make"], small.tasks["join"]
    jobs = small.group([make.s(n=300) for _ in range(5)]).then(join.s())  # 5 x 302 > 1000
    succeed_all(small, claim(small))
    assert [small.get(j.id).state for j in jobs[:5]] == ["succeeded"] * 5
    child = small.get(jobs[-1].id)
    assert child.state == "failed" and child.attempts == 0
    (entry,) = child.errors
    assert entry.kind == "unstorable_payload" and entry.type == "UnstorablePayload"
    assert f"over the payload_limit of {LIMIT} bytes" in entry.message
    assert "at least 1510 bytes" in entry.message  # refused on the sizes, unread
    assert child.payload == {}  # not rewritten
    assert claim(small) == []  # it never runs


def test_the_exact_size_decides_when_the_results_alone_fit(small: durq.Durq) -> None:
    make, join = small.tasks["make"], small.tasks["join"]
    # results: 3 x 302 = 906 bytes <= 1000; with the child's own argument 1000 is passed
    fan = small.group([make.s(n=300) for _ in range(3)]).then(join.s(note="n" * 100))
    fits = small.group([make.s(n=300) for _ in range(3)]).then(join.s(note="n"))
    succeed_all(small, claim(small))
    child = small.get(fan[-1].id)
    assert child.state == "failed"
    (entry,) = child.errors
    size = len(json.dumps({"note": "n" * 100, "values": ["x" * 300] * 3}, separators=(",", ":")))
    assert f"is {size} bytes as JSON, over the payload_limit of {LIMIT}" in entry.message
    ok = small.get(fits[-1].id)
    assert ok.state == "queued" and ok.payload == {"note": "n", "values": ["x" * 300] * 3}
    (c,) = claim(small)
    assert c.id == ok.id


def test_a_chain_step_over_the_limit_fails_and_cancels_the_rest(small: durq.Durq) -> None:
    make, echo = small.tasks["make"], small.tasks["echo"]
    jobs = small.chain(make.s(n=LIMIT), echo.s(), echo.s())
    succeed_all(small, claim(small))
    assert small.get(jobs[0].id).state == "succeeded"
    second, third = small.get(jobs[1].id), small.get(jobs[2].id)
    assert second.state == "failed" and second.errors[-1].kind == "unstorable_payload"
    assert third.state == "cancelled" and third.errors[-1].kind == "parent_failed"


def test_a_child_enqueued_after_its_parents_ended_is_refused_at_enqueue(
    small: durq.Durq,
) -> None:
    make, join = small.tasks["make"], small.tasks["join"]
    parents = small.group([make.s(n=400) for _ in range(3)]).enqueue()
    succeed_all(small, claim(small))
    before = len(small.jobs(limit=100))
    with pytest.raises(PayloadTooLarge, match="payload_limit of 1000 bytes; nothing was"):
        small.enqueue_graph([join.s().after(*parents, pass_as="values", as_list=True)])
    assert len(small.jobs(limit=100)) == before
    (fits,) = small.enqueue_graph([join.s().after(parents[0], pass_as="values", as_list=True)])
    assert small.get(fits.id).payload == {"values": ["x" * 400]}


def test_no_limit_still_passes_big_results(backend_url: str, clock: Clock) -> None:
    dq = durq.Durq(backend_url, clock=clock, payload_limit=None)
    try:

        @dq.task
        def make(n: int) -> str:
            return "x" * n

        @dq.task
        def join(values: list[str]) -> int:
            return len(values)

        jobs = dq.group([make.s(n=2 << 20) for _ in range(2)]).then(join.s())
        claimed = dq.store.claim("default", ["make"], 10, 30.0, "w1")
        outs = [
            Outcome(c.id, c.lease_token, "succeeded", result=json.dumps("x" * (2 << 20)))
            for c in claimed
        ]
        assert all(dq.store.finish(outs))
        assert dq.get(jobs[-1].id).state == "queued"
    finally:
        dq.close()
