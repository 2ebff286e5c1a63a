"""durq.contrib.starlette and durq.contrib.sqlalchemy: what they refuse, and the lifespan."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session
from starlette.applications import Starlette

import durq
from durq.contrib.sqlalchemy import dbapi_connection, enqueue_in
from durq.contrib.starlette import durq_lifespan, get_durq


def test_the_lifespan_opens_and_closes_the_store_and_a_bad_url_stops_startup(
    tmp_path: Path,
) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'a.db'}")
    app = Starlette(lifespan=durq_lifespan(dq))

    async def run(app: Starlette) -> None:
        async with app.router.lifespan_context(app):
            assert app.state.durq is dq and (tmp_path / "a.db").exists()

    asyncio.run(run(app))
    assert dq._store is None  # closed at shutdown
    bad = Starlette(lifespan=durq_lifespan(durq.Durq("sqlite://a.db")))
    with pytest.raises(durq.ConfigError, match="three slashes"):
        asyncio.run(run(bad))


def test_get_durq_without_the_lifespan_says_what_is_missing() -> None:
    class Request:
        app = Starlette()

    with pytest.raises(durq.ConfigError, match="lifespan=durq_lifespan"):
        get_durq(Request())  # type: ignore[arg-type]


def test_the_sqlalchemy_outbox_refuses_what_it_cannot_write_through(tmp_path: Path) -> None:
    with pytest.raises(durq.ConfigError, match="SQLAlchemy Session or Connection"):
        dbapi_connection(sqlite3.connect(":memory:"))
    dq = durq.Durq(f"sqlite:///{tmp_path / 'b.db'}")

    @dq.task
    def ship(order: int) -> None: ...

    dq.store.migrate()
    engine = create_engine(dq.url)
    with Session(engine) as session:
        session.execute(text("SELECT 1"))
        job = enqueue_in(session, ship, order=1)
        session.commit()
    engine.dispose()
    assert [j.id for j in dq.jobs()] == [job.id]
    dq.close()
