"""PostgresStore: the store protocol on PostgreSQL (psycopg 3 + psycopg_pool).

Claims use ``FOR UPDATE SKIP LOCKED``; every time comes from the database clock; enqueues
send ``NOTIFY`` after their commit (wakes.py) so idle workers wake at once; one process at a time leads (runs the reaper)
by holding an advisory lock on a dedicated session.

The class holds the plumbing (the pool, transactions, the clock offset); its transitions
come from one mixin per concern: jobs.py (enqueue, claim/finish, leases, reaper), admin.py, workflows.py,
workers.py (with wake-ups and leadership), pausing.py, batching.py, stepping.py,
scheduling.py, parking.py, limiting.py, blobbing.py and hooking.py. Each feature's SQL is in
its own module beside them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg

from durq.codecs import Codec
from durq.errors import StoreError
from durq.model.limits import lock_id
from durq.payload import DEFAULT_PAYLOAD_LIMIT
from durq.shield import enter as shield_enter
from durq.shield import leave as shield_leave
from durq.store.base import Shortcuts
from durq.store.postgres import limits as lq
from durq.store.postgres import queries as q
from durq.store.postgres import soak as soak_sql
from durq.store.postgres.admin import AdminMixin
from durq.store.postgres.batches import Batches
from durq.store.postgres.batching import BatchingMixin
from durq.store.postgres.blobbing import BlobbingMixin
from durq.store.postgres.connection import (
    PostgresOptions,
    channel_for,
    migrate,
    open_pool,
    parse_url,
    render,
    require_current,
    translate,
)
from durq.store.postgres.dashboard import PostgresDashboard
from durq.store.postgres.dependencies import Dependencies
from durq.store.postgres.fairness import FairnessMixin
from durq.store.postgres.hooking import HookingMixin
from durq.store.postgres.jobs import JobsMixin
from durq.store.postgres.limiting import LimitingMixin
from durq.store.postgres.parking import ParkingMixin
from durq.store.postgres.pausing import PausingMixin
from durq.store.postgres.rescuing import RescuingMixin
from durq.store.postgres.scheduling import SchedulingMixin
from durq.store.postgres.stepping import SteppingMixin
from durq.store.postgres.wakes import Wakes
from durq.store.postgres.workers import WorkersMixin
from durq.store.postgres.workflows import WorkflowsMixin


class PostgresStore(
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
    PostgresDashboard,
    WorkflowsMixin,
    FairnessMixin,
    RescuingMixin,
    Shortcuts,
):
    """The durq store on PostgreSQL.

    Args:
        url: ``postgresql://user:password@host:port/db`` with optional ``schema=`` (default
            ``durq``) and ``pool_size=`` (default 8); other options go to libpq.
        clock: ignored unless a test injects one: then the database clock is shifted by
            ``clock() - time.time()`` (tests move time this way). Leases, run_at and
            deadlines always come from the database clock, never the worker's.
        auto_migrate: apply pending migrations on open (the default).

    Raises:
        ConfigError: a malformed URL or option.
        StoreUnavailable: the server cannot be reached (the message masks the password).
        SchemaTooNew: the schema was migrated by a newer durq.
    """

    codec: Codec | None = None
    payload_limit: int | None = DEFAULT_PAYLOAD_LIMIT  # set by the app
    supports_notify = True
    holds_nul = False  # text holds no NUL character

    def __init__(
        self, url: str, *, clock: Callable[[], float] = time.time, auto_migrate: bool = True
    ) -> None:
        self.url = url
        self.options: PostgresOptions = parse_url(url)
        self._clock = clock
        self._sql = {
            name: render(getattr(q, name), self.options.schema) for name in dir(q) if name.isupper()
        }
        self.channel = channel_for(self.options.schema)
        self._batches = Batches(self.options.schema, self.channel)
        self._deps = Dependencies(
            self.options.schema,
            self.channel,
            self._batches,
            lambda: (self.codec, self.payload_limit),
        )
        self._wakes = Wakes(self.channel)
        self._pool = open_pool(self.options)
        self._offset = 0.0
        self._changed = threading.Event()
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self._cancelled = threading.Event()
        self._cancel_polled = 0.0
        self._closing = threading.Event()
        self._leader: psycopg.Connection[Any] | None = None
        self._leader_lock = threading.Lock()
        self._leads: set[str] = set()  # the names whose advisory lock this process holds
        # limits: their statements, queues that had limited jobs waiting at the last claim,
        # and the limited jobs claimed here whose outcome is not recorded yet
        self._lsql = {
            n: render(v, self.options.schema)
            for n in dir(lq)
            if n.isupper() and isinstance(v := getattr(lq, n), str)
        }
        self._limit_ns = lock_id(f"durq-limits:{self.options.schema}")
        self._limited_queues: set[str] = set()
        self._limited_ids: set[int] = set()
        try:
            if auto_migrate:
                self.migrate()
            else:
                require_current(self._pool, self.options)
            with self._tx() as conn:
                before = time.time()
                row = conn.execute(self._sql["WALL_CLOCK"]).fetchone()
                after = time.time()
                self._offset = float(row[0]) - (before + after) / 2 if row else 0.0
        except BaseException:
            self._pool.close()  # a store that failed to open leaves no pool behind
            raise

    # -- plumbing -------------------------------------------------------------------------

    def _at(self) -> float | None:
        """None: the database clock decides. A test's injected clock overrides it."""
        return None if self._clock is time.time else self._clock()

    def now(self) -> float:
        """The database clock, estimated locally (for display and derived states)."""
        if self._clock is not time.time:
            return self._clock()
        return time.time() + self._offset

    @contextlib.contextmanager
    def _tx(self, transaction: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; inside one transaction unless ``transaction=False``, for a
        single statement, which is then its own transaction (no BEGIN/COMMIT round trips).

        Shielded (:mod:`durq.shield`) from before the checkout until the connection is back
        in the pool: a task body's interruption cannot leak it or leave it mid-transaction.

        ``getconn`` / ``putconn`` rather than ``pool.connection()``: the connections are in
        autocommit mode, so the commit-or-rollback of the connection's own context (a
        no-op here, but a lock and a wait each time) is left out; a connection returned
        inside a transaction is still rolled back by the pool."""
        shield_enter()
        try:
            conn = self._pool.getconn()
            try:
                if transaction:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
            finally:
                self._pool.putconn(conn)
        except StoreError:
            raise
        except (psycopg.Error, OSError) as exc:
            raise translate(exc, self.options) from exc
        except Exception as exc:
            from psycopg_pool import PoolTimeout

            if isinstance(exc, PoolTimeout):
                raise translate(exc, self.options) from exc
            raise
        finally:
            shield_leave()

    def close(self) -> None:
        self._closing.set()
        with self._leader_lock:
            if self._leader is not None:
                with contextlib.suppress(psycopg.Error):
                    self._leader.close()
                self._leader = None
        self._pool.close()
        if self._listener is not None:
            self._listener.join(3)

    def migrate(self) -> int:
        return migrate(self._pool, self.options)

    def verify(self) -> None:
        """Nothing to check: a server's database cannot be swapped under an open session."""

    # -- soak --

    def storage_bytes(self) -> int:
        with self._tx(transaction=False) as conn:
            row = conn.execute(soak_sql.STORAGE_BYTES, {"schema": self.options.schema}).fetchone()
        return int(row[0]) if row else 0
