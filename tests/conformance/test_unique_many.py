"""``unique=`` with ``enqueue_many`` (defects item 5), on every backend. Before, it raised
"unique='active' needs key=" even with ``keys=[...]`` given, and two rows of one unique
key in one insert (``enqueue_graph``) failed with the database's UNIQUE error."""

from __future__ import annotations

import pytest

import durq
from durq.errors import ConfigError
from durq.model import Outcome
from tests.conftest import Clock


def register(app: durq.Durq) -> durq.Task:  # type: ignore[type-arg]
    @app.task
    def sync(account: int) -> int:
        return account

    return sync


def test_keys_are_the_unique_keys_of_an_enqueue_many(app: durq.Durq) -> None:
    sync = register(app)
    many = sync.options(unique="active")
    first = many.enqueue_many([{"account": 1}, {"account": 2}, {"account": 3}],
                              keys=["a1", "a2", None])  # fmt: skip
    assert len({j.id for j in first}) == 3
    assert app.find("default", "a1") is None  # a unique key, not an idempotency key (uniqueness.md)
    again = many.enqueue_many([{"account": 1}, {"account": 2}, {"account": 3}],
                              keys=["a1", "a2", None])  # fmt: skip
    assert [j.id for j in again[:2]] == [j.id for j in first[:2]]  # held while live
    assert again[2].id != first[2].id  # no key: a new job
    (c,) = [c for c in app.store.claim("default", ["sync"], 10, 30.0, "w") if c.id == first[0].id]
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    fresh = many.enqueue_many([{"account": 1}, {"account": 2}], keys=["a1", "a2"])
    assert fresh[0].id not in (first[0].id,) and fresh[1].id == first[1].id
    # the same key as a single enqueue sees the holder
    assert sync.options(key="a2", unique="active").enqueue(account=2).id == first[1].id


def test_one_key_twice_in_one_call_is_one_job(app: durq.Durq) -> None:
    sync = register(app)
    jobs = sync.options(unique="active").enqueue_many(
        [{"account": 1}, {"account": 1}, {"account": 2}], keys=["k", "k", "other"]
    )
    assert jobs[0].id == jobs[1].id != jobs[2].id
    assert len(app.jobs(limit=10)) == 2
    graph = app.enqueue_graph([sync.s(account=5).options(key="g", unique="active"),
                               sync.s(account=5).options(key="g", unique="active")])  # fmt: skip
    assert graph[0].id == graph[1].id and len(app.jobs(limit=10)) == 3


def test_a_period_with_keys(app: durq.Durq, clock: Clock) -> None:
    sync = register(app)
    daily = sync.options(unique="period:3600")
    (first,) = daily.enqueue_many([{"account": 1}], keys=["day"])
    clock.advance(3599)
    assert daily.enqueue_many([{"account": 1}], keys=["day"])[0].id == first.id
    clock.advance(2)
    assert daily.enqueue_many([{"account": 1}], keys=["day"])[0].id != first.id


def test_unique_without_keys_is_a_clear_error(app: durq.Durq) -> None:
    sync = register(app)
    with pytest.raises(ConfigError, match=r"enqueue_many needs keys=\[\.\.\.\]"):
        sync.options(unique="active").enqueue_many([{"account": 1}])
    with pytest.raises(ConfigError, match="must be 'active' or 'period:N'"):
        sync.options(unique="forever").enqueue_many([{"account": 1}], keys=["k"])
    with pytest.raises(ConfigError, match="pass keys="):
        sync.options(key="k", unique="active").enqueue_many([{"account": 1}])
    assert app.jobs(limit=10) == []
