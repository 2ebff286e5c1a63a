"""SqliteStore: the store protocol on one SQLite file (WAL, BEGIN IMMEDIATE writes).

The class holds the plumbing (connections, write transactions, the file checks); its
transitions come from one mixin per concern: jobs.py (enqueue, claim/finish, leases, reaper),
admin.py, workers.py, pausing.py, batching.py, stepping.py, scheduling.py, parking.py,
limiting.py, blobbing.py, hooking.py and
workflows.py (dependencies, tags, uniqueness, fair keys). Each feature's SQL is in its own module beside them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from durq.codecs import Codec
from durq.errors import StoreError
from durq.payload import DEFAULT_PAYLOAD_LIMIT
from durq.shield import shielded
from durq.store.base import Shortcuts
from durq.store.sqlite import queries as q
from durq.store.sqlite.admin import AdminMixin
from durq.store.sqlite.batching import BatchingMixin
from durq.store.sqlite.blobbing import BlobbingMixin
from durq.store.sqlite.clock import SteadyClock
from durq.store.sqlite.connection import (
    GatedTransaction,
    SqliteOptions,
    connect,
    gated_statement,
    migrate,
    parse_url,
    require_current,
    translate,
)
from durq.store.sqlite.dashboard import SqliteDashboard
from durq.store.sqlite.fairness import FairnessMixin
from durq.store.sqlite.gate import gate_for
from durq.store.sqlite.hooking import HookingMixin
from durq.store.sqlite.jobs import JobsMixin
from durq.store.sqlite.limiting import LimitingMixin
from durq.store.sqlite.parking import ParkingMixin
from durq.store.sqlite.pausing import PausingMixin
from durq.store.sqlite.rescuing import RescuingMixin
from durq.store.sqlite.scheduling import SchedulingMixin
from durq.store.sqlite.stepping import SteppingMixin
from durq.store.sqlite.workers import WorkersMixin
from durq.store.sqlite.workflows import WorkflowsMixin


class SqliteStore(
    JobsMixin,
    AdminMixin,
    WorkersMixin,
    PausingMixin,
    BatchingMixin,
    SteppingMixin,
    SchedulingMixin,
    ParkingMixin,
    LimitingMixin,
    BlobbingMixin,
    HookingMixin,
    SqliteDashboard,
    WorkflowsMixin,
    FairnessMixin,
    RescuingMixin,
    Shortcuts,
):
    """The durq store on one SQLite file.

    Each thread gets its own connection. Every write runs in ``BEGIN IMMEDIATE`` and waits
    out other writers up to the URL's ``lock_timeout``.

    Args:
        url: ``sqlite:///path.db`` (options ``synchronous``, ``busy_timeout``,
            ``lock_timeout``) or a bare path.
        clock: seconds since the epoch; injected by tests to move time.
        steady: guard against backward steps of ``clock`` with a store-wide high-water
            mark (:class:`durq.store.sqlite.clock.SteadyClock`); default: only for the
            real wall clock (``time.time``), since tests move an injected clock back on
            purpose.
        auto_migrate: apply pending migrations on open (the default); when False, refuse
            (StoreError) a database without this durq's exact schema, and write nothing.

    Raises:
        ConfigError: a malformed URL or option.
        StoreError: the file cannot be opened or is not a SQLite database.
        SchemaTooNew: the database was written by a newer durq.
    """

    codec: Codec | None = None
    payload_limit: int | None = DEFAULT_PAYLOAD_LIMIT  # set by the app
    supports_notify = False
    holds_nul = True  # TEXT keeps a NUL character

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        auto_migrate: bool = True,
        steady: bool | None = None,
    ) -> None:
        self.url = url
        self.options: SqliteOptions = parse_url(url)
        self.path = self.options.path
        self._steady = (
            SteadyClock(clock) if (clock is time.time if steady is None else steady) else None
        )
        self._clock = self._steady or clock
        self._gate = gate_for(self.path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if auto_migrate:
            self.migrate()
        else:
            require_current(self._conn(), self.options)
        self._identity = self._file_identity()
        if self._steady is not None:
            row = self._read(q.READ_CLOCK_MARK)
            self._steady.observe(float(row[0][0]) if row and row[0][0] else None)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def verify(self) -> None:
        """Raise if the database file was deleted or replaced since it was opened.

        SQLite keeps writing to the file it opened, so a worker would otherwise go on with
        an unlinked copy that nobody else sees.

        Raises:
            StoreError: the file is gone or is another file now.
        """
        now = self._file_identity()
        if now != self._identity:
            what = "deleted" if now is None else "replaced by another file"
            raise StoreError(f"{self.path} was {what} while durq had it open; restart to use it")

    # -- plumbing -------------------------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def _raise_clock_mark(self, conn: sqlite3.Connection, now: float) -> None:
        """Raise the store-wide high-water mark of store time to ``now`` (inside a write
        transaction) and take in the mark other processes raised (see
        :mod:`durq.store.sqlite.clock`); nothing without a steady clock."""
        if self._steady is None:
            return
        row = conn.execute(q.RAISE_CLOCK_MARK, {"now": now}).fetchone()
        self._steady.observe(float(row[0]) if row and row[0] is not None else None)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with shielded():  # a body's interruption must not leave it half recorded
                if hasattr(self, "_identity"):
                    # A new thread's connection would create an empty file where a deleted
                    # database was: say what happened instead of "no such table".
                    self.verify()
                conn = connect(self.options)
                self._local.conn = conn
                with self._lock:
                    self._all.append(conn)
        return conn

    def _writer_conn(self) -> sqlite3.Connection:
        """This thread's second connection, for :func:`gated_statement`: ``busy_timeout``
        0 for good (the fair writer polls a busy database itself), so a one-statement write
        needs no ``PRAGMA`` around it. Only whole autocommit statements run on it."""
        conn: sqlite3.Connection | None = getattr(self._local, "writer", None)
        if conn is None:
            conn = self._conn()  # the file checks, and the thread's first connection
            with shielded():
                conn = connect(self.options)
                try:
                    conn.execute("PRAGMA busy_timeout = 0")
                except sqlite3.Error as exc:
                    conn.close()
                    raise translate(exc, self.path) from exc
                self._local.writer = conn
                with self._lock:
                    self._all.append(conn)
        return conn

    def _write_one(self, sql: str, params: Any) -> sqlite3.Cursor:
        """One write statement, its own transaction, through the fair writer."""
        return gated_statement(self._writer_conn(), self.options, self._gate, sql, params)

    def _write(self, urgent: bool = False) -> Any:
        """A write transaction, in this process's queue for the write lock; ``urgent``
        (heartbeats, outcomes, give-backs) go first (durq/store/sqlite/gate.py)."""
        return GatedTransaction(self._conn(), self.options, self._gate, urgent)

    def _read(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        try:
            return self._conn().execute(sql, params or {}).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._gate.close()
        self._local = threading.local()

    def migrate(self) -> int:
        return migrate(self._conn(), self.options)

    # -- soak --

    def storage_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):  # no WAL file yet, or just checkpointed away
                total += os.stat(self.path + suffix).st_size
        return total
