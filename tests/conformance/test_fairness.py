"""Fair claims across fair_key values (issue 15 item 6), on every backend."""

from __future__ import annotations

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
