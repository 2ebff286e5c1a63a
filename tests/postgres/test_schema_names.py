"""PostgreSQL: every schema name durq accepts gets its wake-ups (found by an adversarial
pass). The NOTIFY channel is ``durq_jobs_<schema>``: a schema of 54 to 63 characters made
it longer than PostgreSQL's 63-byte names, so every pg_notify failed ("channel name too
long": retry and cancel raised, a rescue or a batch's last finish crashed the worker); and
the LISTEN was unquoted, so a mixed-case schema's channel was folded to lower case and no
wake-up ever arrived (everything fell back to polling)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

import durq
from durq.store.postgres.connection import MAX_CHANNEL, channel_for
from tests.conftest import PG_URL, require_pg

LONG = "long_" + uuid.uuid4().hex + "_" * 26  # 63 characters, the most PostgreSQL takes
MIXED = "Mixed_Case_" + uuid.uuid4().hex[:8]


@pytest.fixture(params=[LONG, MIXED], ids=["63_chars", "mixed_case"])
def schema_url(request: pytest.FixtureRequest) -> Iterator[str]:
    require_pg()
    import psycopg

    schema = request.param
    assert len(schema) <= 63
    yield f"{PG_URL}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def woken_within(app: durq.Durq, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if app.store.changed():
            return True
        time.sleep(0.01)
    return False


def test_enqueue_cancel_and_retry_wake_the_listener(schema_url: str) -> None:
    worker_side, producer = durq.Durq(schema_url), durq.Durq(schema_url)
    try:

        @producer.task
        def work() -> None: ...

        producer.store.migrate()
        assert worker_side.store.changed()  # starts the listener (and says: look now)
        time.sleep(0.5)  # the listener's LISTEN is in place
        while worker_side.store.changed():  # nothing pending
            time.sleep(0.05)
        job = work.enqueue()
        assert woken_within(worker_side, 5.0), "the enqueue's NOTIFY did not arrive"
        producer.store.claim("default", ["work"], 1, 30.0, "w1")
        producer.cancel(job.id)  # raised "channel name too long" with the 63-character schema
        assert woken_within(worker_side, 5.0), "the cancel's NOTIFY did not arrive"
        producer.retry(job.id)
        assert producer.get(job.id).state == "queued"
        assert woken_within(worker_side, 5.0), "the retry's NOTIFY did not arrive"
    finally:
        worker_side.close()
        producer.close()


def test_the_channel_always_fits() -> None:
    assert channel_for("shop") == "durq_jobs_shop"
    assert channel_for(MIXED) == f"durq_jobs_{MIXED}"  # case kept: LISTEN quotes it
    long = channel_for(LONG)
    assert len(long.encode()) <= MAX_CHANNEL and long != channel_for(LONG[:-1] + "x")
    assert channel_for("a" * 53) == "durq_jobs_" + "a" * 53  # 63: as before
