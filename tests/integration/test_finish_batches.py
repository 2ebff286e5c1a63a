"""A real worker's batches of successes (SQLite: ``FINISH_SUCCEEDED_MANY``; PostgreSQL: one
``unnest`` statement), on both backends: outcomes whose lease was taken over meanwhile are
refused and counted stale, beside fresh ones in the same batch; results of every shape,
and encrypted ones, come back exactly."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

import psycopg

import durq
from durq.codecs import Encrypted
from durq.model import Outcome
from tests.conformance.test_finish_fencing import ODD_RESULTS
from tests.support.procs import wait_for
from tests.support.threads import running


def expire_leases(url: str, ids: list[int]) -> None:
    """Make the leases of ``ids`` lapse now, as if their worker had stopped beating."""
    marks = ",".join(str(int(i)) for i in ids)
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute(f"UPDATE jobs SET lease_expires_at = 0 WHERE id IN ({marks})")
        finally:
            conn.close()
        return
    base, _, query = url.partition("?")
    schema = dict(p.split("=", 1) for p in query.split("&"))["schema"]
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'UPDATE "{schema}".jobs SET lease_expires_at = 0 WHERE id IN ({marks})')


def test_a_batch_with_taken_over_leases_writes_only_the_fresh_successes(
    make_any: Any, url: str
) -> None:
    """Six bodies hold; three of their leases lapse and another worker (here the store
    calls a worker makes) reaps and claims those three. The six bodies then return at
    once (before the cancel watch, stopped here, would stop the three taken over): the worker's batch writes the three fresh successes, refuses the three stale
    ones (counted ``stale``, the jobs left to their new holder), and the new holder's
    outcomes are written afterwards."""
    app = make_any()
    go = threading.Event()
    started: list[int] = []

    @app.task(max_attempts=5)
    def work(n: int) -> str:
        started.append(n)
        assert go.wait(20)
        return f"first-{n}"

    jobs = work.enqueue_many([{"n": i} for i in range(6)])
    other = make_any()
    with running(app, lease=30.0, concurrency=6) as w:
        wait_for(lambda: len(started) == 6, 20, 0.005, "six bodies")
        # the cancel watch would stop the taken-over bodies (their leases moved on) before
        # they return; stopped, it leaves them to return into the batch under test
        w.cancels.stop()
        taken = [j.id for j in jobs[::2]]
        expire_leases(url, taken)
        assert other.store.reap().recovered == 3
        thief = other.store.claim("default", ["work"], 10, 30.0, "thief")
        assert sorted(c.id for c in thief) == sorted(taken)
        go.set()
        wait_for(lambda: w.stats.done + w.stats.stale == 6, 20, 0.005, "six outcomes")
        assert (w.stats.done, w.stats.stale) == (3, 3)
        for job in jobs:
            row = other.get(job.id)
            if job.id in taken:  # still the thief's: the stale success changed nothing
                assert (row.state, row.result, row.attempts) == ("running", None, 2)
            else:
                assert (row.state, row.result) == ("succeeded", f"first-{row.payload['n']}")
        outcomes = [
            Outcome(c.id, c.lease_token, "succeeded", result=json.dumps("thief")) for c in thief
        ]
        assert other.store.finish(outcomes) == [True] * 3
    assert {other.get(i).result for i in taken} == {"thief"}


def test_results_of_every_shape_come_back_exactly_from_a_real_workers_batches(
    make_any: Any,
) -> None:
    """Many jobs of odd results (quotes, backslashes, control characters, non-ASCII,
    200 kB, nested, big ints) run on 8 slots: their successes are written many to a
    batch, and each result reads back as the task returned it."""
    app = make_any()

    @app.task
    def odd(i: int) -> Any:
        return ODD_RESULTS[i % len(ODD_RESULTS)]

    jobs = odd.enqueue_many([{"i": i} for i in range(10 * len(ODD_RESULTS))])
    with running(app, lease=30.0, concurrency=8):
        wait_for(lambda: all(app.get(j.id).state == "succeeded" for j in jobs), 60, 0.05)
    for job in jobs:
        expected = json.loads(json.dumps(ODD_RESULTS[job.payload["i"] % len(ODD_RESULTS)]))
        assert app.get(job.id).result == expected


def test_encrypted_results_come_back_from_a_real_workers_batches(url: str) -> None:
    """With ``Encrypted``: every result stored sealed, read back as returned."""
    codec = Encrypted(keys=[("k1", Encrypted.generate_key())])
    app = durq.Durq(url, codec=codec)
    plain = durq.Durq(url)  # no key: sees the stored text only
    try:

        @app.task
        def secret(i: int) -> dict[str, str]:
            return {"card": f"4111-{i:04d}", "note": 'q"\\\u00e9\U0001f600'}

        jobs = secret.enqueue_many([{"i": i} for i in range(300)])
        with running(app, lease=30.0, concurrency=8):
            wait_for(lambda: all(app.get(j.id).state == "succeeded" for j in jobs), 60, 0.05)
        for job in jobs:
            i = job.payload["i"]
            assert app.get(job.id).result == {
                "card": f"4111-{i:04d}",
                "note": 'q"\\\u00e9\U0001f600',
            }
            stored = plain.store.get(job.id)
            assert stored is not None and stored.result is not None
            assert stored.result.startswith("durq:enc:v1:k1:") and "4111" not in stored.result
    finally:
        plain.close()
        app.close()


def test_long_results_never_make_a_batch_too_big_for_sqlite(make_app: Any) -> None:
    """SQLite binds the batch of successes as one string, and refuses any string over
    SQLITE_MAX_LENGTH (1e9 bytes by default: 1,000 outcomes of 1 MiB results, escaped
    again in the array, could pass it). Shrunk here to 300 kB on the store's connection:
    eight results of 100 kB each fit one statement each, so the batch must write them one
    by one rather than fail as one 800 kB string (which stopped the claimer)."""
    app = make_app()

    @app.task
    def big(n: int = 0) -> str:
        return "x" * n

    jobs = big.enqueue_many([{"n": 100_000}] * 8 + [{"n": 10}] * 4)
    claimed = app.store.claim("default", ["big"], 20, 30.0, "w1")
    conn = app.store._conn()  # type: ignore[attr-defined]  # this thread's connection
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 300_000)
    sizes = [100_000] * 8 + [10] * 4
    outcomes = [
        Outcome(c.id, c.lease_token, "succeeded", result=json.dumps("y" * n))
        for c, n in zip(sorted(claimed, key=lambda c: c.id), sizes, strict=True)
    ]
    assert app.store.finish(outcomes) == [True] * 12
    for job, n in zip(jobs, sizes, strict=True):
        assert app.get(job.id).result == "y" * n


def test_a_codec_result_that_is_not_utf8_fails_that_job_only(make_any: Any) -> None:
    """A codec whose ``encode`` returns a lone surrogate for one result: on SQLite the
    batch of successes stored it as bytes no read could decode (the job's row then failed
    every ``get``), one statement alone raised in the claimer (the worker stopped, the
    batch ran again), and PostgreSQL's driver refused the whole batch. That one job fails
    with ``UnstorableOutcome``; the jobs committed beside it succeed; the worker runs on."""

    class Surrogate:
        def encode(self, text: str) -> str:
            return "\ud800bad" if text == '"bad"' else text

        def decode(self, stored: str) -> str:
            return '"bad"' if stored == "\ud800bad" else stored

    app = make_any(codec=Surrogate())

    @app.task
    def echo(value: str) -> str:
        return value

    jobs = echo.enqueue_many([{"value": v} for v in ["ok"] * 5 + ["bad"] + ["fine"] * 5])
    with running(app, lease=30.0, concurrency=4) as w:
        wait_for(lambda: all(app.get(j.id).finished_at is not None for j in jobs), 30, 0.02)
        late = echo.enqueue(value="after")
        wait_for(lambda: app.get(late.id).state == "succeeded", 30, 0.02, "a job after it")
    assert w.exit_code == 0 and w.crash_reason is None
    for job in jobs:
        row = app.get(job.id)  # every row reads back
        if job.payload["value"] == "bad":
            assert (row.state, row.result) == ("failed", None)
            assert row.errors[-1].type == "UnstorableOutcome"
            assert "not UTF-8 text" in row.errors[-1].message
        else:
            assert (row.state, row.result) == ("succeeded", job.payload["value"])
