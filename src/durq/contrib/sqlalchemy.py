"""The outbox through SQLAlchemy: enqueue inside a session's transaction.

::

    from durq.contrib.sqlalchemy import enqueue_in

    with Session(engine) as session, session.begin():
        session.add(Order(id=7))
        enqueue_in(session, ship, order_id=7)   # committed with the order, or not at all

The job is written on the DBAPI connection under the session (``psycopg`` 3 for
PostgreSQL, the ``sqlite3`` connection for SQLite), so it exists if and only if the
session's transaction commits; a rolled-back ``session.begin_nested()`` savepoint takes
the job with it. The engine must be on durq's own database (the same PostgreSQL database,
durq's tables in their schema; the same SQLite file). SQLAlchemy is not imported here.
"""

from __future__ import annotations

from typing import Any

from durq.errors import ConfigError
from durq.job import Job
from durq.task import BoundTask, Task


def dbapi_connection(session_or_connection: Any) -> Any:
    """The driver's connection under a SQLAlchemy ``Session`` or ``Connection``, inside the
    transaction it has open (a session begins one if it had none).

    Raises:
        ConfigError: the object is neither a Session nor a Connection, or its driver is
            not psycopg 3 or sqlite3 (durq writes through no other driver).
    """
    conn = session_or_connection
    if callable(getattr(conn, "connection", None)):  # a Session: its connection
        conn = conn.connection()
    fairy = getattr(conn, "connection", None)
    raw = getattr(fairy, "driver_connection", None)
    if raw is None:
        raise ConfigError(
            f"expected a SQLAlchemy Session or Connection, not {type(session_or_connection).__name__}"
        )
    module = type(raw).__module__.split(".")[0]
    if module not in ("psycopg", "sqlite3"):
        raise ConfigError(
            f"durq enqueues through psycopg 3 or sqlite3 connections, not {module} "
            "(use postgresql+psycopg:// or sqlite:// engine URLs)"
        )
    return raw


def enqueue_in(
    session_or_connection: Any, task: Task[Any, Any] | BoundTask, /, **payload: Any
) -> Job:
    """Enqueue ``task(**payload)`` inside the session's transaction (see the module doc).

    Raises:
        ConfigError: see :func:`dbapi_connection`.
        PayloadError, PayloadTooLarge: the payload is not accepted (nothing is written; the
            caller's transaction is untouched and decides).
    """
    return task.options(connection=dbapi_connection(session_or_connection)).enqueue(**payload)
