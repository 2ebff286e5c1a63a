"""PostgreSQL: an enqueue's wake-up (NOTIFY) is sent after the jobs' commit, in a
transaction of its own (store/postgres/wakes.py), and an idle worker still starts the job
at once.

Why: PostgreSQL serialises the commits of transactions that sent a NOTIFY under one
cluster-wide lock held through their WAL flush, so concurrent producers whose enqueue
notified in its own transaction could not share a flush (docs/architecture.md, "Wake-ups").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from psycopg import pq

import durq
from durq.store.postgres.jobs import COPY_FROM
from tests.conftest import PG_URL
from tests.support.procs import ROOT

# -- which transaction notifies -------------------------------------------------------------


def _schema(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["schema"]


@pytest.fixture
def traced(pg_url: str) -> Iterator[tuple[str, Any]]:
    """``pg_url`` with every ``pg_notify`` and every job insert recording the transaction
    they ran in: a ``pg_notify(text, text)`` in a schema of its own, first on the
    connections' search_path (libpq ``options``), records ``txid_current()`` and passes the
    call on; a trigger on the jobs table records the inserting transaction. Yields the URL
    and a call returning ``(job xids, notify xids)``."""
    import psycopg

    app = durq.Durq(pg_url)
    _ = app.store  # migrate
    app.close()
    schema, shim = _schema(pg_url), f"shim_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{shim}"')
        conn.execute(f'CREATE TABLE "{shim}".seen (kind text, xid bigint)')
        conn.execute(
            f"""CREATE FUNCTION "{shim}".pg_notify(channel text, payload text) RETURNS void
                LANGUAGE plpgsql AS $$ BEGIN
                  INSERT INTO "{shim}".seen VALUES ('notify', txid_current());
                  PERFORM pg_catalog.pg_notify(channel, payload);
                END $$"""
        )
        conn.execute(
            f"""CREATE FUNCTION "{shim}".job_seen() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN INSERT INTO "{shim}".seen VALUES ('job', txid_current()); RETURN NULL;
                END $$"""
        )
        conn.execute(
            f'CREATE TRIGGER job_seen AFTER INSERT ON "{schema}".jobs FOR EACH ROW '
            f'EXECUTE FUNCTION "{shim}".job_seen()'
        )

        def seen() -> tuple[set[int], set[int]]:
            rows = conn.execute(f'SELECT kind, xid FROM "{shim}".seen').fetchall()
            return {x for k, x in rows if k == "job"}, {x for k, x in rows if k == "notify"}

        options = f"-c search_path={shim},pg_catalog,public"
        try:
            yield f"{pg_url}&options={quote(options, safe='')}", seen
        finally:
            conn.execute(f'DROP SCHEMA "{shim}" CASCADE')


@pytest.mark.parametrize("how", ["enqueue", "enqueue_many", "bulk", "keyed", "batch"])
def test_the_jobs_commit_without_a_notify_and_are_woken_after(
    traced: tuple[str, Any], how: str
) -> None:
    """On the old code the NOTIFY ran in the enqueue's own transaction (the same xid)."""
    url, seen = traced
    app = durq.Durq(url)
    try:

        @app.task
        def work(n: int = 0) -> None: ...

        if how == "enqueue":
            work.enqueue()
        elif how == "enqueue_many":
            work.enqueue_many([{"n": i} for i in range(3)])
        elif how == "bulk":  # the binary COPY of Store.enqueue_rows
            work.enqueue_many([{"n": i} for i in range(COPY_FROM)])
        elif how == "keyed":
            work.options(key="k").enqueue()
        else:
            with app.batch():
                work.enqueue(n=1)
                work.enqueue(n=2)
        jobs, notifies = seen()
        assert jobs, "the trigger saw the inserts"
        assert notifies, "the enqueue sent a wake-up"
        assert not jobs & notifies, "no NOTIFY in a transaction that inserted jobs"
        assert all(any(n > j for n in notifies) for j in jobs), "each insert is woken after"
    finally:
        app.close()


def test_an_enqueue_on_the_callers_connection_notifies_in_its_transaction(
    traced: tuple[str, Any],
) -> None:
    """The outbox: durq does not see the caller's commit, so the NOTIFY stays inside the
    caller's transaction (delivered at its commit, or never if it rolls back)."""
    import psycopg

    url, seen = traced
    app = durq.Durq(url)
    try:

        @app.task
        def work() -> None: ...

        _ = app.store
        with psycopg.connect(app.store.options.conninfo) as conn:  # type: ignore[attr-defined]
            work.options(connection=conn).enqueue()
            conn.commit()
        jobs, notifies = seen()
        assert jobs and jobs == notifies
    finally:
        app.close()


# -- the wake protocol under concurrent producers --------------------------------------------


class _Conn:
    """A stand-in for the connection a wake is sent on (``info.encoding`` and
    ``pgconn.exec_params``, what :mod:`durq.store.postgres.wakes` uses of it): it logs when
    each wake started and ended (a real connection adds nothing to what the protocol
    decides)."""

    def __init__(self, log: list[tuple[float, float]], lock: threading.Lock) -> None:
        self.log, self.lock = log, lock
        self.info = SimpleNamespace(encoding="utf-8")
        self.pgconn = self

    def exec_params(self, statement: bytes, params: list[bytes]) -> Any:
        start = time.perf_counter()
        time.sleep(0.002)  # a round trip
        with self.lock:
            self.log.append((start, time.perf_counter()))
        return SimpleNamespace(status=pq.ExecStatus.TUPLES_OK)


def test_every_caller_returns_after_a_wake_that_started_after_its_commit() -> None:
    """16 threads "commit" and call :meth:`Wakes.send` in a loop: each return comes after
    the end of a wake that started after that thread's commit."""
    from durq.store.postgres.wakes import Wakes

    wakes = Wakes("chan")
    log: list[tuple[float, float]] = []
    lock = threading.Lock()
    bad: list[tuple[float, float]] = []
    calls = 0

    def producer() -> None:
        nonlocal calls
        conn = _Conn(log, lock)
        for _ in range(40):
            committed = time.perf_counter()
            time.sleep(0.0005)  # the next thing this thread does is after the commit
            wakes.send(conn, ["default"])  # type: ignore[arg-type]
            returned = time.perf_counter()
            with lock:
                calls += 1
                if not any(committed < start and end <= returned for start, end in log):
                    bad.append((committed, returned))

    threads = [threading.Thread(target=producer) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, f"{len(bad)} calls returned with no wake sent since their commit"
    assert calls == 16 * 40
    assert len(log) == calls


# -- an idle worker picks the job up at once ------------------------------------------------

_WORKER = """
import sys, durq
app = durq.Durq(sys.argv[1])

@app.task
def work(n: int = 0) -> None: ...

app.worker(concurrency=4, idle_claim_interval=5.0).run(install_signals=False)
"""


@pytest.fixture
def idle_worker(pg_url: str, tmp_path: Path) -> Iterator[durq.Durq]:
    """A worker in another process whose periodic claim comes every 5 s, idle (its
    claimer past the 1 s after which it backs off), and an app that enqueues to it."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_WORKER))
    app = durq.Durq(pg_url)

    @app.task
    def work(n: int = 0) -> None: ...

    _ = app.store
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, str(script), pg_url], cwd=ROOT, stdout=log, stderr=log)
    try:
        first = work.enqueue()
        assert first.wait(timeout=30) is None  # the worker is up and LISTENing
        time.sleep(1.5)
        yield app
    finally:
        proc.kill()
        proc.wait(10)
        log.close()
        app.close()


def _pickup(job: durq.Job) -> float:
    """Seconds from the job's insert to its start, both on the database's clock."""
    job.wait(timeout=30)
    done = job.refresh()
    assert done.started_at is not None
    return done.started_at - done.created_at


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_an_idle_worker_starts_an_enqueued_job_at_once(idle_worker: durq.Durq, many: bool) -> None:
    """Well under the worker's 5 s periodic claim: the NOTIFY woke it. Three times, with
    the worker idle again in between."""
    work = idle_worker.tasks["work"]
    for _ in range(3):
        jobs = work.enqueue_many([{"n": i} for i in range(3)]) if many else [work.enqueue()]
        waits = [_pickup(job) for job in jobs]
        assert min(waits) < 0.5, waits
        time.sleep(1.2)  # idle again, its poll backed off


def test_a_wake_of_several_queues_notifies_each_by_its_name(pg_url: str) -> None:
    """The array of names goes as a text literal: quotes, backslashes, commas and braces in
    a queue's name arrive as they are."""
    import psycopg

    from durq.store.postgres.wakes import Wakes

    names = ['a"b', "c\\d", "e,f", "{g}", " h ", "é"]
    channel = f"t_{uuid.uuid4().hex[:12]}"
    with (
        psycopg.connect(PG_URL, autocommit=True) as listener,
        psycopg.connect(PG_URL, autocommit=True) as conn,
    ):
        listener.execute(f'LISTEN "{channel}"')
        wakes = Wakes(channel)
        wakes.send(conn, names)
        got = [n.payload for n in listener.notifies(timeout=5.0, stop_after=len(names))]
    assert sorted(got) == sorted(names)


def test_the_queues_of_a_failed_wake_go_with_the_next(pg_url: str) -> None:
    """A wake on a connection that broke after the commit fails quietly (the jobs are
    committed: the enqueue must not raise); the next wake of the process carries its
    queue."""
    import psycopg

    from durq.store.postgres.wakes import Wakes

    channel = f"t_{uuid.uuid4().hex[:12]}"
    with (
        psycopg.connect(PG_URL, autocommit=True) as listener,
        psycopg.connect(PG_URL, autocommit=True) as conn,
    ):
        listener.execute(f'LISTEN "{channel}"')
        broken = psycopg.connect(PG_URL, autocommit=True)
        conn.execute("SELECT pg_terminate_backend(%s)", [broken.info.backend_pid])
        wakes = Wakes(channel)
        wakes.send(broken, ["lost"])
        assert [n.payload for n in listener.notifies(timeout=0.5)] == []
        wakes.send(conn, ["next"])
        got = [n.payload for n in listener.notifies(timeout=5.0, stop_after=2)]
        broken.close()
    assert sorted(got) == ["lost", "next"]
