"""The retention sweep of ``fair_turns`` against an enqueue of the same key, on both
backends: whatever the interleaving, the enqueued job's key has its turn row when the
enqueue has committed, and it is served as a new key (turn 0) at the next claim.

SQLite serialises the two on its write lock. On PostgreSQL the enqueue holds the key's row
``FOR KEY SHARE`` till its commit, which the sweep's ``FOR UPDATE SKIP LOCKED`` skips; a row
the sweep deleted while the enqueue waited for that lock is made again; and the sweep's
delete decides on a snapshot taken after its lock (store/postgres/fairness.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import durq
from durq.model import Outcome
from durq.store.sqlite.connection import parse_url
from tests.conformance.test_fairness import turn_rows
from tests.integration.test_outbox import caller_connection
from tests.support.db import query
from tests.support.procs import ROOT, wait_for


def fair_app(app: durq.Durq) -> Any:
    """A fair task; key ``K`` has had one job, now finished, so its row is dead; key ``A``
    has a backlog. Without its row, a new job of K would wait for the claim's periodic
    full scan (every 16th fair claim); with it, K and A alternate."""

    @app.task(fair_key=lambda p: p["tenant"])
    def sync(tenant: str, n: int = 0) -> None:
        return None

    sync.enqueue(tenant="K")
    sync.enqueue_many([{"tenant": "A", "n": i} for i in range(20)])
    assert sorted(claim_and_finish(app) for _ in range(3)) == ["A", "A", "K"]
    return sync


def claim_and_finish(app: durq.Durq) -> str:
    (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    return str(app.get(c.id).payload["tenant"])


def test_an_enqueue_whose_transaction_is_open_through_a_sweep_keeps_its_turn(
    make_any: Any, url: str
) -> None:
    """The caller's transaction has enqueued a job of ``K`` (outbox: ``connection=``) and
    not committed while the sweep runs: on PostgreSQL the sweep cannot see that job and
    must skip the row the enqueue holds (it does not wait for it); on SQLite it waits for
    the caller's commit and then sees the job."""
    app = make_any()
    sync = fair_app(app)
    done: list[int] = []
    with caller_connection(url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (1)")
        sync.options(connection=conn).enqueue(tenant="K")
        sweeper = threading.Thread(target=lambda: done.append(app.prune(older_than=10**9)))
        sweeper.start()
        if url.startswith("postgresql"):
            sweeper.join(30)  # done while the enqueue is in flight: it skipped K's row
            assert not sweeper.is_alive() and done == [0]
        else:
            time.sleep(0.2)  # let it wait for the caller's write lock (either way is fine)
        conn.commit()
    sweeper.join(60)
    assert not sweeper.is_alive() and done == [0]
    assert ("default", "K") in turn_rows(url)
    assert "K" in {claim_and_finish(app) for _ in range(2)}  # its turn comes with A's


SWEEPER = """
import sys
import durq
from durq.retention import prune_fair_turns
dq = durq.Durq(sys.argv[1])
print("ready", flush=True)
print(prune_fair_turns(dq.store), flush=True)
dq.close()
"""


def sweep_holds(url: str) -> bool:
    """Whether the sweeper child is inside its transaction now (at its failpoint)."""
    if url.startswith("postgresql"):
        schema = url.rpartition("schema=")[2]
        rows = query(
            url,
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
            "AND query LIKE ?",
            (f'%"{schema}".fair_turns%',),
        )
        return int(str(rows[0][0])) > 0
    conn = sqlite3.connect(parse_url(url).path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:  # database is locked: the child holds the write lock
        return True
    finally:
        conn.close()


@pytest.mark.parametrize("point", ["prune_turns_read", "prune_turns_locked"])
def test_an_enqueue_during_a_sweep_keeps_its_turn(make_any: Any, url: str, point: str) -> None:
    """A sweep stops for 3 s in its transaction, after reading the window (K looks dead)
    or after locking K's row; meanwhile a job of K is enqueued (on PostgreSQL it commits at
    once, or waits for the row lock; on SQLite it waits for the write lock). The sweep
    then commits, and K's row is there with the job, served at the next claim."""
    app = make_any()
    sync = fair_app(app)
    env = {**os.environ, "DURQ_FAILPOINTS": f"{point}=sleep:3", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SWEEPER), url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        wait_for(lambda: sweep_holds(url), 30, 0.01, "the sweep at its failpoint")
        sync.enqueue(tenant="K")
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 0, err
    assert ("default", "K") in turn_rows(url)
    assert "K" in {claim_and_finish(app) for _ in range(2)}
