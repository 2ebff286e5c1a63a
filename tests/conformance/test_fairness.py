"""Fair claims across fair_key values (issue 15 item 6), on every backend."""

from __future__ import annotations

import contextlib
import itertools

import pytest

import durq
from durq.errors import ConfigError, PayloadError
from durq.model import AttemptError, Outcome
from tests.conftest import Clock
from tests.support.db import query

ERR = AttemptError(1, 0.0, "ValueError", "boom", "", "permanent")


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


def test_a_fair_key_that_raises_is_a_payload_error_and_nothing_is_written(app: durq.Durq) -> None:
    @app.task(fair_key=lambda p: p["tenant"])
    def sync(n: int = 0) -> None:
        return None

    with pytest.raises(PayloadError, match=r"fair_key of sync failed on the payload: KeyError"):
        sync.enqueue(n=1)
    with pytest.raises(PayloadError, match="fair_key of sync failed"):
        sync.enqueue_many([{"n": 2}])
    assert app.jobs() == []


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


# -- retention of the turns: a row per queue and fair key ever seen would grow for ever ----


def turn_rows(url: str) -> set[tuple[str, str]]:
    """Every (queue, fair key) that has a ``fair_turns`` row."""
    return {(str(q), str(k)) for q, k in query(url, "SELECT queue, fair_key FROM fair_turns")}


def test_the_retention_sweep_forgets_only_the_turns_of_keys_without_live_jobs(
    app: durq.Durq, backend_url: str, clock: Clock
) -> None:
    """Keys with a queued, scheduled, parked, waiting or running job keep their rows (per
    queue: a key live in one queue and finished in another keeps only the live row); keys
    whose jobs all succeeded, failed or were cancelled, or were pruned by the same sweep,
    lose them. ``dq.prune`` and the worker's pruner both sweep, in bounded chunks."""

    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str) -> None:
        return None

    @app.task
    def parent() -> None:
        return None

    def ended(tenant: str, how: str) -> None:  # one job of the key, run to its end in "b"
        job = sync.options(queue="b").enqueue(tenant=tenant)
        if how == "cancelled":
            assert app.cancel(job.id)
            return
        (c,) = app.store.claim("b", ["sync"], 1, 30.0, "w")
        assert c.id == job.id
        if how == "succeeded":
            app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
        elif how == "failed":
            app.store.finish([Outcome(c.id, c.lease_token, "failed", error=ERR)])

    ended("pruned", "succeeded")
    clock.advance(100)  # only "pruned"'s job is older than the prune below keeps
    sync.enqueue(tenant="queued")
    sync.options(delay=3600).enqueue(tenant="scheduled")
    sync.options(park=True).enqueue(tenant="parked")
    sync.options(after=[parent.enqueue()]).enqueue(tenant="waiting")
    sync.enqueue(tenant="mixed")
    sync.enqueue(tenant="shared")
    ended("running", "running")
    for how in ("succeeded", "failed", "cancelled"):
        ended(how, how)
    ended("mixed", "succeeded")  # "mixed" also has a queued job in "default"
    ended("shared", "succeeded")  # "shared": live in "default", finished in "b"
    live = {
        ("default", "queued"), ("default", "scheduled"), ("default", "parked"),
        ("default", "waiting"), ("default", "mixed"), ("default", "shared"), ("b", "running"),
    }  # fmt: skip
    dead = {("b", k) for k in ("pruned", "succeeded", "failed", "cancelled", "mixed", "shared")}
    assert turn_rows(backend_url) == live | dead

    assert app.prune(older_than=50, chunk=3) == 1  # the "pruned" job; 13 rows, 3 a chunk
    assert turn_rows(backend_url) == live
    assert app.prune(older_than=50) == 0
    assert turn_rows(backend_url) == live
    assert app.get(app.jobs(queue="default", state="queued")[0].id).state == "queued"


def test_the_sweep_goes_in_bounded_windows_of_the_turn_rows(
    app: durq.Durq, backend_url: str
) -> None:
    """``Store.prune_fair_turns`` looks at ``limit`` rows at a time in key order and says
    where to go on; the worker's pruner runs the sweep after its job deletes."""

    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str) -> None:
        return None

    jobs = sync.enqueue_many([{"tenant": f"t{i}"} for i in range(7)])
    for job in jobs[:5]:
        assert app.cancel(job.id)
    calls, after, deleted = 0, None, 0
    while True:
        n, after = app.store.prune_fair_turns(None, after, 2)
        calls, deleted = calls + 1, deleted + n
        if after is None:
            break
        assert after[1] == f"t{2 * calls - 1}"  # the last row this window looked at
    assert (calls, deleted) == (4, 5)
    assert turn_rows(backend_url) == {("default", "t5"), ("default", "t6")}
    assert app.cancel(jobs[5].id)
    keep_all = {s: None for s in ("succeeded", "failed", "cancelled", "expired")}
    w = app.worker(retention=keep_all)  # keeps every job; still sweeps the turns
    assert w.pruner is not None and w.pruner.prune_once() is not None
    assert turn_rows(backend_url) == {("default", "t6")}


def test_a_pruned_key_gets_its_turn_again_as_a_new_key_does(
    app: durq.Durq, backend_url: str
) -> None:
    """Tenant B's turn row is pruned while A has a backlog; B's next jobs (an enqueue, and
    a replay of a finished one) make the row again at turn 0, so B is served next, as a new
    key would be, and alternates with A after that."""

    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str, n: int = 0) -> None:
        return None

    def claim_one() -> str:
        (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
        return str(app.get(c.id).payload["tenant"])

    first_b = sync.enqueue(tenant="B")
    assert claim_one() == "B"
    sync.enqueue_many([{"tenant": "A", "n": i} for i in range(50)])
    assert [claim_one() for _ in range(5)] == ["A"] * 5  # A's turn is stamped on
    app.prune(older_than=10**9)  # no job is that old: only B's turn goes
    assert turn_rows(backend_url) == {("default", "A")}

    sync.enqueue_many([{"tenant": "B", "n": i} for i in range(3)])
    assert ("default", "B") in turn_rows(backend_url)
    assert [claim_one() for _ in range(6)] == ["B", "A"] * 3

    app.prune(older_than=10**9)
    assert ("default", "B") not in turn_rows(backend_url)
    assert app.retry(first_b.id)  # a replay brings the key back without an enqueue
    assert ("default", "B") in turn_rows(backend_url)
    assert claim_one() == "B"
    app.prune(older_than=10**9)
    assert ("default", "B") not in turn_rows(backend_url)
    assert app.retry_where("succeeded", chunk=5) == 12  # B's 4 and A's 8, five a chunk
    assert ("default", "B") in turn_rows(backend_url)
    assert claim_one() == "B"
