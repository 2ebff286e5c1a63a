"""A chain step on SQLite (issue 15, "Speed"): the transaction that records a step's
success also queues the next step and claims it, in a few statements, and the claimer does
not take its own commits for news (a claim round of its own after every step)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import durq
from durq.model import Claimed, Outcome

LEASE = 30.0


def make_app(tmp_path: Path) -> durq.Durq:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'q.db'}")

    @dq.task
    def noop() -> None:
        return None

    @dq.task
    def add(x: int, y: int = 1) -> int:
        return x + y

    return dq


def step_statements(dq: durq.Durq, done: Claimed) -> tuple[list[Claimed], list[str]]:
    """Finish ``done`` and claim, as the claimer does; the claimed jobs and the statements
    run on the claimer's connection for it (PRAGMAs left out: the fair writer's)."""
    store = dq.store
    conn = store._conn()  # type: ignore[attr-defined]  # this thread's: the claimer's
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        applied, claimed = store.finish_and_claim(
            [Outcome(done.id, done.lease_token, "succeeded", result="2")],
            ["default"], ["noop", "add"], 10, LEASE, "w1", limited=1,
        )  # fmt: skip
    finally:
        conn.set_trace_callback(None)
    assert applied == [True]
    return claimed, [s for s in seen if not s.lstrip().upper().startswith("PRAGMA")]


def test_a_chain_step_is_one_transaction_of_seven_statements(tmp_path: Path) -> None:
    """BEGIN, the finish, the children's read, the promotion, the claim's probe of the
    limited and fair passes, the claim, COMMIT: before, ten (the edges, the blocking parent,
    the passed results and the two probes each a statement of their own)."""
    dq = make_app(tmp_path)
    try:
        noop = dq.tasks["noop"]
        jobs = dq.chain(noop.s(), noop.s(), noop.s())
        (first,) = dq.store.claim("default", ["noop"], 10, LEASE, "w1")
        claimed, statements = step_statements(dq, first)
        assert [c.id for c in claimed] == [jobs[1].id]  # queued and claimed in one transaction
        assert statements[0].startswith("BEGIN") and statements[-1] == "COMMIT"
        assert len(statements) <= 7, statements
        assert dq.get(jobs[2].id).state == "waiting"
    finally:
        dq.close()


def test_a_chain_step_that_passes_its_result_is_eight_statements(tmp_path: Path) -> None:
    """The step's result goes into the next step's payload with its promotion (one write)
    and the payload is read with the results (one read): before, twelve statements."""
    dq = make_app(tmp_path)
    try:
        add = dq.tasks["add"]
        jobs = dq.chain(add.s(x=1), add.s(), add.s())
        (first,) = dq.store.claim("default", ["add"], 10, LEASE, "w1")
        claimed, statements = step_statements(dq, first)
        assert [c.id for c in claimed] == [jobs[1].id]
        assert claimed[0].payload is not None and json.loads(claimed[0].payload) == {"x": 2}
        assert len(statements) <= 8, statements
        assert dq.get(jobs[1].id).payload == {"x": 2}
    finally:
        dq.close()


def test_the_claimer_does_not_take_its_own_commit_for_a_change(tmp_path: Path) -> None:
    """``changed()`` reads the calling thread's own connection: a commit of this thread is
    no news (its claim saw what its finish made runnable), another connection's is."""
    dq = make_app(tmp_path)
    try:
        noop = dq.tasks["noop"]
        jobs = dq.chain(noop.s(), noop.s())
        store = dq.store
        store.changed()  # the first call: a change (nothing seen yet)
        (first,) = store.claim("default", ["noop"], 10, LEASE, "w1")
        claimed, _ = step_statements(dq, first)
        assert [c.id for c in claimed] == [jobs[1].id]
        assert store.changed() is False  # only this thread's own commits since
        other = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
        try:
            other.execute("UPDATE jobs SET priority = 1 WHERE id = ?", (jobs[0].id,))
        finally:
            other.close()
        assert store.changed() is True
        assert store.changed() is False
    finally:
        dq.close()
