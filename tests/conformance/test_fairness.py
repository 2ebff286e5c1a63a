"""Fair claims across fair_key values (issue 15 item 6), on every backend."""

from __future__ import annotations

import contextlib
import itertools

import pytest

import durq
from durq.errors import ConfigError
from durq.model import Outcome


def test_one_tenants_backlog_cannot_starve_another(app: durq.Durq) -> None:
    @app.task(fair_key=lambda p: f"tenant:{p['tenant']}")
    def sync(tenant: str, n: int) -> int:
        return n

    sync.enqueue_many([{"tenant": "A", "n": i} for i in range(10_000)])
    b_jobs = sync.enqueue_many([{"tenant": "B", "n": i} for i in range(10)])
    order: list[int] = []
    for _ in range(20):  # one worker at concurrency 1: one claim, one finish at a time
        (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
        order.append(c.id)
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    assert {j.id for j in b_jobs} <= set(order)
    assert len(order) == len(set(order)) == 20


def test_fair_and_plain_jobs_share_a_queue_and_a_batch_claim_takes_each_key(
    app: durq.Durq,
) -> None:
    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str) -> None:
        return None

    @app.task
    def plain() -> None:
        return None

    for tenant in ("a", "a", "a", "b", "c"):
        sync.enqueue(tenant=tenant)
    p = plain.enqueue()
    claimed = app.store.claim("default", ["sync", "plain"], 4, 30.0, "w")
    tenants = sorted(app.get(c.id).payload.get("tenant", "-") for c in claimed)
    assert tenants == ["-", "a", "b", "c"] and p.id in {c.id for c in claimed}
    rest = app.store.claim("default", ["sync", "plain"], 10, 30.0, "w")
    assert len(rest) == 2


def test_a_fair_key_that_is_not_a_str_is_refused_and_nothing_is_written(app: durq.Durq) -> None:
    @app.task(fair_key=lambda p: p.get("tenant"))
    def sync(tenant: object = None) -> None:
        return None

    with pytest.raises(ConfigError, match="fair_key returned None"):
        sync.enqueue()
    assert app.jobs() == []
    with pytest.raises(ConfigError, match="fair_key must be a callable"):
        app.task(name="x", fair_key="tenant")(lambda: None)  # type: ignore[arg-type]


def test_tenants_with_nothing_left_do_not_hold_up_the_keys_that_have_jobs(app: durq.Durq) -> None:
    # 40 tenants run their one job each, so their turns sit below the two that come later:
    # the turn-ordered window (a few keys beyond the need) first meets only finished tenants
    # and must fall back to the full scan, then send those tenants to the back.
    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str, n: int = 0) -> None:
        return None

    sync.enqueue_many([{"tenant": f"done{i:02}"} for i in range(40)])
    first = app.store.claim("default", ["sync"], 40, 30.0, "w")
    assert len(first) == 40
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null") for c in first])
    sync.enqueue_many([{"tenant": t, "n": i} for i in range(10) for t in ("late-a", "late-b")])
    order: list[str] = []
    for _ in range(20):  # one at a time: each claim must find a job, alternating tenants
        (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
        order.append(app.get(c.id).payload["tenant"])
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    assert sorted(order) == ["late-a"] * 10 + ["late-b"] * 10
    assert all(a != b for a, b in itertools.pairwise(order))
    assert app.store.claim("default", ["sync"], 5, 30.0, "w") == []


def _drop_turn_row(url: str, fair_key: str) -> None:
    """Delete a key's fair_turns row behind durq's back: a job stored before the enqueue
    made turn rows looks like this."""
    if url.startswith("sqlite:///"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            conn.execute("DELETE FROM fair_turns WHERE fair_key = ?", (fair_key,))
            conn.commit()
        return
    import psycopg

    base, _, schema = url.rpartition("schema=")
    with psycopg.connect(base.rstrip("?&"), autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{schema}".fair_turns WHERE fair_key = %s', (fair_key,))


def test_a_key_without_a_turn_row_is_still_served(app: durq.Durq, backend_url: str) -> None:
    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str, n: int) -> None:
        return None

    sync.enqueue_many([{"tenant": "A", "n": i} for i in range(100)])
    b_jobs = sync.enqueue_many([{"tenant": "B", "n": i} for i in range(5)])
    _drop_turn_row(backend_url, "B")
    order: list[int] = []
    for _ in range(40):  # the full scan comes at least every 16 fair claims
        (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
        order.append(c.id)
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    assert {j.id for j in b_jobs} <= set(order)
