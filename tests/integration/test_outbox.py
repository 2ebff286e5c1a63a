"""Transactional enqueue (the outbox pattern) on both backends, and case 16."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

import durq
from durq.store.sqlite.connection import parse_url


@contextmanager
def caller_connection(url: str) -> Iterator[Any]:
    """The application's own connection to the same database, with an `orders` table."""
    if url.startswith("postgresql://"):
        import psycopg

        schema = dict(parse_qsl(urlsplit(url).query))["schema"]
        with psycopg.connect(url.split("?", 1)[0]) as conn:
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".orders (id int PRIMARY KEY)')
            conn.commit()
            conn.execute(f'SET search_path TO "{schema}"')
            conn.commit()
            yield conn
    else:
        conn = sqlite3.connect(parse_url(url).path)
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
        conn.commit()
        try:
            yield conn
        finally:
            conn.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args], capture_output=True, text=True, timeout=60
    )


def orders(conn: Any) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id").fetchall()]


def test_the_job_commits_with_the_callers_transaction(make_any) -> None:
    """Case 16, step 3: committed together with the order, no after-commit hook needed."""
    app = make_any()
    app.store.migrate()
    with caller_connection(app.url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (1)")
        job = app.enqueue("ship", {"order": 1}, connection=conn)
        assert app.jobs() == []  # not visible to others before the commit (case 16, step 1)
        conn.commit()
        assert orders(conn) == [1]
    assert [j.id for j in app.jobs()] == [job.id]
    assert app.get(job.id).payload == {"order": 1}


def test_the_job_vanishes_with_a_rolled_back_transaction(make_any) -> None:
    """Case 16, step 2: the order rolls back, the job never exists."""
    app = make_any()
    app.store.migrate()

    @app.task
    def ship(order: int) -> None: ...

    with caller_connection(app.url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (2)")
        ship.options(connection=conn).enqueue(order=2)
        ship.options(connection=conn).enqueue_many([{"order": 3}, {"order": 4}])
        conn.rollback()
        assert orders(conn) == []
    assert app.jobs() == []


def test_a_bad_payload_fails_inside_the_callers_transaction(make_any) -> None:
    """Case 16, step 4: the enqueue error surfaces inside the transaction."""
    app = make_any()
    app.store.migrate()
    with caller_connection(app.url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (5)")
        with pytest.raises(TypeError):
            app.enqueue("ship", {"order": object()}, connection=conn)
        conn.rollback()
        assert orders(conn) == []
    assert app.jobs() == []


def test_the_wrong_kind_of_connection_is_refused(make_app) -> None:
    app = make_app()
    with pytest.raises(durq.ConfigError, match=r"sqlite3\.Connection"):
        app.enqueue("ship", {}, connection=object())


def test_the_first_outbox_enqueue_on_a_new_file_says_how_to_create_the_schema(
    make_app, tmp_path
) -> None:
    """Found by a new-user pass: on a new SQLite file, the first enqueue with connection=
    opened the store, whose schema needs the write lock the caller's transaction held; it
    waited 30 s and failed as "locked by another process". Now it fails at once, saying
    how to create the schema; the caller's transaction goes on and decides."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    app = make_app(url)
    app.task(name="ship")(lambda order: None)
    with caller_connection(url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (1)")
        start = time.monotonic()
        with pytest.raises(durq.ConfigError, match="durq migrate") as refused:
            app.enqueue("ship", {"order": 1}, connection=conn)
        assert time.monotonic() - start < 5
        assert "no current durq schema" in str(refused.value)
        conn.commit()  # the caller's own write is untouched
        assert orders(conn) == [1]
    assert run_cli("migrate", "--db", url).returncode == 0
    with caller_connection(url) as conn:
        conn.execute("INSERT INTO orders (id) VALUES (2)")
        job = app.enqueue("ship", {"order": 2}, connection=conn)
        conn.commit()
    assert [j.id for j in app.jobs()] == [job.id]


def test_a_connection_on_another_file_is_refused_and_writes_nothing(make_app, tmp_path) -> None:
    """The engine on other.db while the app is on shop.db: the job was written to other.db
    (where no worker of this app looks) when it had durq's tables, and failed with "no
    such table" named after shop.db when it had not."""
    app = make_app(f"sqlite:///{tmp_path / 'shop.db'}")
    app.store.migrate()
    other = durq.Durq(f"sqlite:///{tmp_path / 'other.db'}")
    other.store.migrate()  # durq's tables there too: the silent case
    other.close()
    for opened in (False, True):
        if opened:
            _ = app.store
        else:
            app.close()
        conn = sqlite3.connect(tmp_path / "other.db")
        try:
            with pytest.raises(durq.ConfigError, match=r"other\.db, but this app's jobs are in"):
                app.enqueue("ship", {"order": 1}, connection=conn)
            conn.rollback()
            assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
        finally:
            conn.close()
    memory = sqlite3.connect(":memory:")
    with pytest.raises(durq.ConfigError, match="in-memory database"):
        app.enqueue("ship", {"order": 1}, connection=memory)
    memory.close()
    assert app.jobs() == []
