"""PostgreSQL: a replay, a rescue and a reap send the NOTIFY the workers' cancel watches wait for
(``durq:cancel``), so a body whose lease went with them is stopped within the watch's
0.1 s tick rather than at its once-a-second backstop (docs/features/replay.md). On SQLite
every commit moves the data version the watch reads (tests/conformance/test_cancel_watch.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import pytest

import durq
from durq.model import WorkerInfo
from durq.store.postgres.connection import NOTIFY_CHANNEL
from durq.store.postgres.queries import CANCEL_PAYLOAD
from tests.conftest import PG_URL, Clock

LEASE = 30.0


@contextmanager
def listening(url: str) -> Iterator[Callable[[], list[str]]]:
    """LISTEN on the store's channel; yields a call that returns the payloads arrived so
    far (waiting up to 5 s for the first)."""
    import psycopg

    schema = dict(parse_qsl(urlsplit(url).query))["schema"]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'LISTEN "{NOTIFY_CHANNEL}_{schema}"')

        def arrived() -> list[str]:
            payloads = [n.payload for n in conn.notifies(timeout=5.0, stop_after=1)]
            payloads += [n.payload for n in conn.notifies(timeout=0.2)]  # any more queued
            return payloads

        yield arrived


@pytest.mark.parametrize("bulk", [False, True], ids=["retry", "retry_where"])
def test_a_replay_notifies_the_cancel_watches(pg_url: str, bulk: bool) -> None:
    app = durq.Durq(pg_url)

    @app.task
    def work() -> None: ...

    job = work.enqueue()
    app.store.claim("default", ["work"], 1, LEASE, "w1")
    app.cancel(job.id)
    with listening(pg_url) as arrived:
        if bulk:
            assert app.retry_where("cancelled") == 1
        else:
            app.retry(job.id)
        assert CANCEL_PAYLOAD in arrived()


def test_a_rescue_notifies_the_cancel_watches(pg_url: str) -> None:
    clock = Clock()
    app = durq.Durq(pg_url, clock=clock)

    @app.task
    def work() -> None: ...

    work.enqueue()
    info = WorkerInfo("frozen", "elsewhere", 1, ("default",), ("work",), 0.0, 0.0, LEASE)
    app.store.register_worker(info)
    app.store.beat_worker("frozen", 5.0, None)
    app.store.finish_and_claim([], ["default"], ["work"], 1, LEASE, "frozen")
    clock.advance(6)
    with listening(pg_url) as arrived:
        assert app.store.rescue().workers == ("frozen",)
        assert CANCEL_PAYLOAD in arrived()


def test_a_reap_notifies_the_cancel_watches(pg_url: str) -> None:
    """A lease that expired goes back to the queue with a NOTIFY: idle workers claim it at
    once, and the watch of a worker still running its old body stops that body."""
    clock = Clock()
    app = durq.Durq(pg_url, clock=clock)

    @app.task
    def work() -> None: ...

    job = work.enqueue()
    app.store.claim("default", ["work"], 1, LEASE, "w1")
    clock.advance(LEASE + 1)
    with listening(pg_url) as arrived:
        assert app.store.reap().job_ids == (job.id,)
        assert CANCEL_PAYLOAD in arrived()


def test_a_chain_step_claimed_by_its_finisher_sends_no_notify_and_one_left_queued_does(
    pg_url: str,
) -> None:
    """The finish of a parent claims the children it queued in its own transaction and
    announces only those left queued: no wake-up (and claim round) of the worker for a
    step it already holds; the other workers still hear of a child it did not take."""
    from durq.model import Outcome

    app = durq.Durq(pg_url)

    @app.task
    def work() -> None: ...

    @app.task(queue="elsewhere")
    def other() -> None: ...

    try:
        first, second, third = app.chain(work.s(), work.s(), other.s())
        (c1,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
        assert c1.id == first.id
        with listening(pg_url) as arrived:
            _, claimed = app.store.finish_and_claim(
                [Outcome(c1.id, c1.lease_token, "succeeded", result="null")],
                ["default"], ["work"], 10, LEASE, "w1", limited=1,
            )  # fmt: skip
            assert [c.id for c in claimed] == [second.id]
            _, claimed = app.store.finish_and_claim(
                [Outcome(second.id, claimed[0].lease_token, "succeeded", result="null")],
                ["default"], ["work"], 10, LEASE, "w1", limited=1,
            )  # fmt: skip
            assert claimed == []  # its queue is not this worker's
            assert arrived() == ["elsewhere"]  # one NOTIFY: the step left queued
        assert app.get(third.id).state == "queued"
    finally:
        app.close()
