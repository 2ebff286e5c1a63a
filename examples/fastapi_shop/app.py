"""A FastAPI shop whose orders and jobs commit together (the outbox through SQLAlchemy).

``POST /orders`` inserts an order and enqueues ``ship(order_id)`` in the same database
transaction: if the request fails after the enqueue (here: ``"fail": true``), the order
and the job roll back together, so no job ever ships an order that does not exist.
A gift note is written inside a savepoint (``session.begin_nested()``); a note that is
refused rolls back its savepoint, and its ``send_note`` job with it (case 36).

Run it: ``SHOP_URL=sqlite:///shop.db uvicorn examples.fastapi_shop.app:api`` and, beside
it, ``durq worker examples.fastapi_shop.app:dq``. PostgreSQL: ``SHOP_URL=postgresql://...``
(the orders go to the database's default schema, durq's tables to its ``durq`` schema).
"""

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import Boolean, Integer, String, create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import durq
from durq.contrib.sqlalchemy import enqueue_in
from durq.contrib.starlette import durq_lifespan, get_durq


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item: Mapped[str] = mapped_column(String(200))
    shipped: Mapped[bool] = mapped_column(Boolean, default=False)


def engine_for(url: str, search_path: str | None = None) -> Engine:
    """A SQLAlchemy engine on the same database as durq (``url`` is a durq URL).

    SQLite: the pysqlite driver's own transaction handling breaks savepoints, so (as the
    SQLAlchemy docs advise) the driver's is turned off and SQLAlchemy emits ``BEGIN
    IMMEDIATE`` itself (IMMEDIATE: the request takes the write lock at once instead of
    failing to upgrade a read lock while a worker writes).
    """
    if url.startswith("postgresql://"):
        base = url.partition("?")[0].replace("postgresql://", "postgresql+psycopg://", 1)
        args = {"options": f"-c search_path={search_path}"} if search_path else {}
        return create_engine(base, connect_args=args)
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def no_driver_transactions(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def begin_immediate(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class NewOrder(BaseModel):
    item: str
    note: str | None = None
    fail: bool = False


@dataclass
class Shop:
    """One shop: its durq app, its engine, its HTTP API and its tasks."""

    dq: durq.Durq
    engine: Engine
    api: FastAPI
    ship: durq.Task[Any, Any]
    send_note: durq.Task[Any, Any]


def make_shop(url: str, search_path: str | None = None) -> Shop:
    """The shop on ``url`` (orders and jobs in the same database)."""
    dq = durq.Durq(url)
    dq.store.migrate()  # durq's tables (and, on PostgreSQL, its schema) first
    engine = engine_for(url, search_path)
    Base.metadata.create_all(engine)

    @dq.task
    def ship(order_id: int) -> str:
        with Session(engine) as session, session.begin():
            order = session.get(Order, order_id)
            if order is None:  # cannot happen: the job commits only with its order
                raise durq.Permanent(f"order {order_id} does not exist")
            order.shipped = True
            return order.item

    @dq.task
    def send_note(order_id: int, note: str) -> None: ...

    def session() -> Iterator[Session]:
        with Session(engine) as s:
            yield s

    api = FastAPI(lifespan=durq_lifespan(dq))

    @api.post("/orders")
    def place(order: NewOrder, db: Annotated[Session, Depends(session)]) -> dict[str, Any]:
        with db.begin():
            row = Order(item=order.item)
            db.add(row)
            db.flush()
            job = enqueue_in(db, ship, order_id=row.id)
            if order.note is not None:
                try:
                    with db.begin_nested():  # a savepoint: the note may be refused alone
                        enqueue_in(db, send_note, order_id=row.id, note=order.note)
                        if len(order.note) > 40:
                            raise ValueError("note too long")
                except ValueError:
                    pass  # the savepoint rolled back, with its job; the order goes on
            if order.fail:
                raise HTTPException(500, "payment failed")  # rolls back order and job
        return {"order": row.id, "job": job.id}

    @api.get("/orders")
    def orders(db: Annotated[Session, Depends(session)]) -> list[dict[str, Any]]:
        rows = db.scalars(select(Order).order_by(Order.id))
        return [{"id": o.id, "item": o.item, "shipped": o.shipped} for o in rows]

    @api.get("/jobs/{job_id}")
    async def job(job_id: int, q: Annotated[durq.Durq, Depends(get_durq)]) -> dict[str, Any]:
        try:
            found = await asyncio.to_thread(q.get, job_id)
        except durq.JobNotFound:
            raise HTTPException(404, f"no job {job_id}") from None
        return {"id": found.id, "state": str(found.state), "result": found.result}

    return Shop(dq, engine, api, ship, send_note)


def __getattr__(name: str) -> Any:
    """``api`` and ``dq`` for uvicorn and ``durq worker``, built on first use from
    ``$SHOP_URL`` (importing the module for its tests touches no database)."""
    if name in ("shop", "api", "dq"):
        global _shop
        if _shop is None:
            _shop = make_shop(os.environ.get("SHOP_URL", "sqlite:///shop.db"))
        return _shop if name == "shop" else getattr(_shop, name)
    raise AttributeError(name)


_shop: Shop | None = None
