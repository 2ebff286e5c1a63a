"""SqliteStore: the store protocol on one SQLite file (WAL, BEGIN IMMEDIATE writes)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from durq.errors import ConfigError, StoreError
from durq.failpoints import hit
from durq.model import Claimed, JobRecord, Outcome, ReapSummary
from durq.store.base import Inserted, NewJob, Shortcuts, StatusData, WorkerInfo
from durq.store.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult
from durq.store.sqlite import blobs as bq
from durq.store.sqlite import queries as q
from durq.store.sqlite.connection import (
    SqliteOptions,
    connect,
    migrate,
    parse_url,
    require_current,
    retry_busy,
    translate,
    write_transaction,
)


class SqliteStore(Shortcuts):
    """The durq store on one SQLite file.

    Each thread gets its own connection. Every write runs in ``BEGIN IMMEDIATE`` and waits
    out other writers up to the URL's ``lock_timeout``.

    Args:
        url: ``sqlite:///path.db`` (options ``synchronous``, ``busy_timeout``,
            ``lock_timeout``) or a bare path.
        clock: seconds since the epoch; injected by tests to move time.
        auto_migrate: apply pending migrations on open (the default); when False, refuse
            (StoreError) a database without this durq's exact schema, and write nothing.

    Raises:
        ConfigError: a malformed URL or option.
        StoreError: the file cannot be opened or is not a SQLite database.
        SchemaTooNew: the database was written by a newer durq.
    """

    supports_notify = False

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        auto_migrate: bool = True,
    ) -> None:
        self.url = url
        self.options: SqliteOptions = parse_url(url)
        self.path = self.options.path
        self._clock = clock
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._data_version: int | None = None
        self._watch_conn: sqlite3.Connection | None = None
        if auto_migrate:
            self.migrate()
        else:
            require_current(self._conn(), self.options)
        self._identity = self._file_identity()

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

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.options)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _write(self) -> Any:
        return write_transaction(self._conn(), self.options)

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
            if self._watch_conn is not None:
                self._watch_conn.close()
                self._watch_conn = None
        self._local = threading.local()

    def migrate(self) -> int:
        return migrate(self._conn(), self.options)

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        if connection is not None:
            if not isinstance(connection, sqlite3.Connection):
                raise ConfigError(
                    f"connection= must be a sqlite3.Connection on {self.path}, "
                    f"not {type(connection).__name__}"
                )
            try:
                return self._insert(connection, jobs, explicit_ids=False)
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
        conn = self._conn()
        now = self.now()
        if len(jobs) == 1 and jobs[0].key is None:
            # One row, one statement: SQLite wraps it in its own write transaction.
            job = jobs[0]
            run_at = now + job.delay if job.run_at is None else job.run_at
            row = {
                "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": run_at, "max_attempts": job.max_attempts,
                "key": None, "created_at": now, "meta": job.meta,
            }  # fmt: skip
            try:
                hit = retry_busy(lambda: conn.execute(q.INSERT_ONE, row).fetchone(), self.options)
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
            return [Inserted(int(hit[0]), True, run_at, now)]
        with self._write():
            return self._insert(conn, jobs, explicit_ids=True)

    def _insert(
        self, conn: sqlite3.Connection, jobs: Sequence[NewJob], *, explicit_ids: bool
    ) -> list[Inserted]:
        """Insert on ``conn`` inside whatever transaction it has open.

        With ``explicit_ids`` (only under our own ``BEGIN IMMEDIATE``, where nobody else can
        insert) plain rows get ids from ``sqlite_sequence`` and go in one ``executemany``;
        otherwise each row is inserted on its own and SQLite assigns its id.
        """
        now = self.now()
        out: list[Inserted] = []
        next_id = conn.execute(q.LAST_JOB_ID).fetchone()[0] if explicit_ids else 0
        plain: list[tuple[Any, ...]] = []
        for job in jobs:
            run_at = now + job.delay if job.run_at is None else job.run_at
            if job.key is None and not explicit_ids:
                row = {
                    "queue": job.queue, "task": job.task, "payload": job.payload,
                    "priority": job.priority, "run_at": run_at, "max_attempts": job.max_attempts,
                    "key": None, "created_at": now, "meta": job.meta,
                }  # fmt: skip
                out.append(
                    Inserted(conn.execute(q.INSERT_ONE, row).fetchone()[0], True, run_at, now)
                )
                continue
            if job.key is None:
                next_id += 1
                plain.append((
                    next_id, job.queue, job.task, job.payload, job.priority, run_at,
                    job.max_attempts, None, now, job.meta,
                ))  # fmt: skip
                out.append(Inserted(next_id, True, run_at, now))
                continue
            # Keyed rows go one by one: a conflict returns the existing job.
            if plain:
                conn.executemany(q.INSERT_JOB, plain)
                plain = []
            row = {
                "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": run_at, "max_attempts": job.max_attempts,
                "key": job.key, "created_at": now, "meta": job.meta,
            }  # fmt: skip
            hit = conn.execute(q.INSERT_JOB_KEYED, row).fetchone()
            if hit is not None:
                out.append(Inserted(hit[0], True, run_at, now))
                next_id = max(next_id, hit[0])
            else:
                key = {"queue": job.queue, "key": job.key}
                existing = conn.execute(q.SELECT_JOB_BY_KEY, key).fetchone()
                out.append(Inserted(existing[0], False, existing[5], existing[13]))
        if plain:
            conn.executemany(q.INSERT_JOB, plain)
        return out

    # -- running jobs ---------------------------------------------------------------------

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        lease: float,
        worker_id: str,
    ) -> tuple[list[bool], list[Claimed]]:
        conn = self._conn()
        applied: list[bool] = []
        claimed: list[Claimed] = []
        tasks_json = json.dumps(list(tasks))
        if not outcomes and (limit <= 0 or not self._ready(conn, queues, tasks_json)):
            return applied, claimed  # nothing to write: no write lock taken
        with self._write():
            now = self.now()  # after the lock is ours: a wait for it must not shorten leases
            for o in outcomes:
                applied.append(self._finish_one(conn, o, now))
            if outcomes:
                hit("finish_tx")
            if limit > 0 and queues:
                params: dict[str, Any] = {
                    "tasks": tasks_json,
                    "now": now,
                    "expires": now + lease,
                    "worker_id": worker_id,
                }
                for queue in queues:
                    params["queue"] = queue
                    params["limit"] = limit - len(claimed)
                    rows = conn.execute(q.CLAIM, params).fetchall()
                    rows.sort(key=lambda r: (r[8], r[9], r[0]))
                    claimed.extend(
                        Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows
                    )
                    if len(claimed) >= limit:
                        break
        return applied, claimed

    def _ready(self, conn: sqlite3.Connection, queues: Sequence[str], tasks_json: str) -> bool:
        """A read (no lock): is any job of these queues and tasks due? Claims only then."""
        try:
            row = conn.execute(
                q.ANY_READY,
                {"queues": json.dumps(list(queues)), "tasks": tasks_json, "now": self.now()},
            ).fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return bool(row and row[0])

    @staticmethod
    def _finish_one(conn: sqlite3.Connection, o: Outcome, now: float) -> bool:
        if o.kind == "succeeded":
            params: dict[str, Any] = {
                "id": o.job_id,
                "token": o.lease_token,
                "result": o.result,
                "now": now,
            }
            return conn.execute(q.FINISH_SUCCEEDED, params).rowcount == 1
        error = json.dumps(o.error.to_dict()) if o.error else "{}"
        params = {"id": o.job_id, "token": o.lease_token, "error": error, "now": now}
        if o.kind == "retry":
            params["run_at"] = now + o.delay
            done = conn.execute(q.FINISH_RETRY, params).rowcount == 1
            hit("retry_tx")
            return done
        return conn.execute(q.FINISH_FAILED, params).rowcount == 1

    def extend_leases(self, leases: Sequence[tuple[int, int]], lease: float) -> list[int]:
        if not leases:
            return []
        conn = self._conn()
        lost: list[int] = []
        with self._write():
            expires = self.now() + lease  # after the lock is ours, not before the wait for it
            for job_id, token in leases:
                cur = conn.execute(
                    q.EXTEND_LEASE, {"id": job_id, "token": token, "expires": expires}
                )
                if cur.rowcount != 1:
                    lost.append(job_id)
            hit("heartbeat_tx")
        return lost

    def set_progress(self, job_id: int, token: int, progress: str) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(q.SET_PROGRESS, {"id": job_id, "token": token, "progress": progress})
        return cur.rowcount == 1

    def release(
        self, job_id: int, token: int, free_requeues: int, error: str
    ) -> tuple[str, int] | None:
        conn = self._conn()
        params: dict[str, Any] = {
            "id": job_id,
            "token": token,
            "free": free_requeues,
            "error": error,
        }
        with self._write():
            params["now"] = self.now()
            row = conn.execute(q.RELEASE, params).fetchone()
        return (row[0], row[1]) if row else None

    def reap(self) -> ReapSummary:
        conn = self._conn()
        with self._write():
            now = self.now()
            rows = conn.execute(q.REAP, {"now": now}).fetchall()
            summary = ReapSummary(
                at=now,
                recovered=sum(1 for r in rows if r[1] == "queued"),
                failed=sum(1 for r in rows if r[1] == "failed"),
                job_ids=tuple(sorted(r[0] for r in rows)),
            )
            value = {"at": now, "recovered": summary.recovered, "failed": summary.failed}
            conn.execute(q.PUT_META, {"key": "last_reap", "value": json.dumps(value)})
        return summary

    # -- reading and admin ----------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord | None:
        rows = self._read(q.SELECT_JOB, {"id": job_id})
        return JobRecord(*rows[0]) if rows else None

    def list_jobs(
        self, *, state: str | None, queue: str | None, task: str | None, limit: int
    ) -> list[JobRecord]:
        ready: int | None = None
        if state == "scheduled":
            state, ready = "queued", 0
        elif state == "queued":
            ready = 1
        params = {
            "state": state,
            "ready": ready,
            "now": self.now(),
            "queue": queue,
            "task": task,
            "limit": limit,
        }
        return [JobRecord(*r) for r in self._read(q.LIST_JOBS, params)]

    def retry(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(q.RETRY, {"id": job_id, "now": self.now()})
        return cur.rowcount == 1

    def purge(self, queue: str, states: Sequence[str]) -> int:
        conn = self._conn()
        with self._write():
            cur = conn.execute(q.PURGE, {"queue": queue, "states": json.dumps(list(states))})
        return cur.rowcount

    def cancel(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(q.CANCEL, {"id": job_id, "now": self.now()})
        return cur.rowcount == 1

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool:
        params = {"queues": json.dumps(list(queues)), "tasks": json.dumps(list(tasks))}
        return bool(self._read(q.HAS_PENDING, params)[0][0])

    def register_worker(self, info: WorkerInfo) -> None:
        conn = self._conn()
        params = {
            "id": info.id,
            "host": info.host,
            "pid": info.pid,
            "queues": json.dumps(list(info.queues)),
            "tasks": json.dumps(list(info.tasks)),
            "now": self.now(),
            "lease": info.lease,
        }
        with self._write():
            conn.execute(q.DELETE_DEAD_WORKERS, {"now": params["now"]})
            conn.execute(q.UPSERT_WORKER, params)

    def touch_worker(self, worker_id: str) -> None:
        conn = self._conn()
        with self._write():
            conn.execute(q.TOUCH_WORKER, {"id": worker_id, "now": self.now()})

    def unregister_worker(self, worker_id: str) -> None:
        conn = self._conn()
        with self._write():
            conn.execute(q.DELETE_WORKER, {"id": worker_id})

    def status_data(self) -> StatusData:
        conn = self._conn()
        now = self.now()
        data = StatusData(now=now)
        try:
            conn.execute("BEGIN")  # one consistent read snapshot
            try:
                for queue, state, later, retried, n in conn.execute(q.COUNT_BY_STATE, {"now": now}):
                    data.counts[(queue, state, later, retried)] = n
                data.oldest_ready = dict(conn.execute(q.OLDEST_READY, {"now": now}).fetchall())
                data.queued_tasks = [tuple(r) for r in conn.execute(q.QUEUED_TASKS)]
                for name, paused, reason, source, at in conn.execute(q.SELECT_QUEUES):
                    if paused:
                        data.paused[name] = {"reason": reason, "source": source, "at": at}
                for r in conn.execute(q.SELECT_WORKERS):
                    data.workers.append(
                        WorkerInfo(
                            r[0],
                            r[1],
                            r[2],
                            tuple(json.loads(r[3])),
                            tuple(json.loads(r[4])),
                            r[5],
                            r[6],
                            r[7],
                        )
                    )
                row = conn.execute(q.GET_META, {"key": "last_reap"}).fetchone()
                data.last_reap = json.loads(row[0]) if row else None
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return data

    def lead(self, what: str = "maintenance", stale_after: float = 15.0) -> bool:
        """Every SQLite worker may run the reaper: it is one conditional UPDATE."""
        return True

    def changed(self) -> bool:
        if self._watch_conn is None:
            self._watch_conn = connect(self.options)
        try:
            version = int(self._watch_conn.execute(q.DATA_VERSION).fetchone()[0])
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        seen, self._data_version = self._data_version, version
        return seen is None or seen != version

    # -- blobs --

    @staticmethod
    def _blob_record(r: Sequence[Any]) -> BlobRecord:
        return BlobRecord(r[0], int(r[1]), bool(r[2]), int(r[3]), r[4], r[5], r[6], r[7])

    def blob_put(
        self,
        key: str,
        size: int,
        *,
        name: str | None,
        holder: str | None,
        job_id: int | None,
        alias: str | None,
        only_if_stored: bool,
    ) -> PutResult:
        conn = self._conn()
        with self._write():
            now = self.now()
            if (
                job_id is not None
                and not conn.execute(bq.JOB_EXISTS, {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            params: dict[str, Any] = {"key": key, "size": size, "name": name, "now": now}
            if only_if_stored:
                if conn.execute(bq.TOUCH_STORED, params).fetchone() is None:
                    return "absent"
            else:
                conn.execute(bq.UPSERT_BLOB, params)
            if holder is not None:
                ref = {"key": key, "holder": holder, "job_id": job_id, "now": now}
                if conn.execute(bq.INSERT_REF, ref).fetchone() is not None:
                    conn.execute(bq.ADD_HOLDS, {"key": key, "n": 1})
            if alias is not None:
                conn.execute(bq.UPSERT_ALIAS, {"name": alias, "key": key, "now": now})
        return "ok"

    def blob_ref(self, key: str, holder: str, job_id: int | None) -> RefResult:
        conn = self._conn()
        with self._write():
            now = self.now()
            if (
                job_id is not None
                and not conn.execute(bq.JOB_EXISTS, {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            if conn.execute(bq.TOUCH_BLOB, {"key": key, "now": now}).fetchone() is None:
                return "no_blob"
            ref = {"key": key, "holder": holder, "job_id": job_id, "now": now}
            if conn.execute(bq.INSERT_REF, ref).fetchone() is None:
                return "held"
            conn.execute(bq.ADD_HOLDS, {"key": key, "n": 1})
        return "added"

    def blob_unref(self, key: str, holder: str, release: bool) -> BlobRelease:
        conn = self._conn()
        with self._write():
            if conn.execute(bq.DELETE_REF, {"key": key, "holder": holder}).fetchone() is None:
                return BlobRelease(False, False)
            dead = len(conn.execute(bq.DELETE_DEAD_REFS_OF, {"key": key}).fetchall())
            row = conn.execute(bq.ADD_HOLDS, {"key": key, "n": -1 - dead}).fetchone()
            if not release or row is None or row[0] > 0:
                return BlobRelease(True, False)
            return self._blob_release(conn, key)

    @staticmethod
    def _blob_release(conn: sqlite3.Connection, key: str) -> BlobRelease:
        won = conn.execute(bq.RELEASE_DROP, {"key": key}).fetchone()
        if won is not None:
            conn.execute(bq.DELETE_ALIASES_OF, {"keys": json.dumps([key])})
        else:
            won = conn.execute(bq.RELEASE_KEEP, {"key": key}).fetchone()
        return BlobRelease(True, won is not None, int(won[1]) if won else 0)

    def blob_collect(self, grace: float, limit: int) -> BlobCollected:
        conn = self._conn()
        with self._write():
            dead: dict[str, int] = {}
            for (key,) in conn.execute(bq.DELETE_DEAD_REFS).fetchall():
                dead[key] = dead.get(key, 0) + 1
            for key, n in dead.items():
                conn.execute(bq.ADD_HOLDS, {"key": key, "n": -n})
            params = {"cutoff": self.now() - grace, "limit": limit}
            dropped = conn.execute(bq.COLLECT_DROP, params).fetchall()
            kept = conn.execute(bq.COLLECT_KEEP, params).fetchall()
            empty = conn.execute(bq.DROP_EMPTY).fetchall()
            gone = [r[0] for r in dropped] + [r[0] for r in empty]
            if gone:
                conn.execute(bq.DELETE_ALIASES_OF, {"keys": json.dumps(gone)})
        released = [(r[0], int(r[1])) for r in dropped + kept]
        return BlobCollected(released, sum(dead.values()), len(empty))

    def blob_stored(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        return {r[0] for r in self._read(bq.STORED_AMONG, {"keys": json.dumps(list(keys))})}

    def blob_get(self, key: str) -> BlobRecord | None:
        rows = self._read(bq.SELECT_BLOB, {"key": key})
        return self._blob_record(rows[0]) if rows else None

    def blob_list(self, after: str, limit: int) -> list[BlobRecord]:
        return [
            self._blob_record(r)
            for r in self._read(bq.LIST_BLOBS, {"after": after, "limit": limit})
        ]

    def blob_holders(self, key: str) -> list[tuple[str, int | None, float]]:
        return [(r[0], r[1], r[2]) for r in self._read(bq.SELECT_REFS, {"key": key})]

    def blob_aliases(self, key: str) -> list[str]:
        return [r[0] for r in self._read(bq.SELECT_ALIASES, {"key": key})]

    def blob_set_external(self, key: str, external_id: str | None) -> bool:
        conn = self._conn()
        with self._write():
            row = conn.execute(bq.SET_EXTERNAL, {"key": key, "external_id": external_id}).fetchone()
        return row is not None

    def blob_alias(self, name: str, key: str) -> bool:
        conn = self._conn()
        with self._write():
            if conn.execute(bq.BLOB_EXISTS, {"key": key}).fetchone() is None:
                return False
            conn.execute(bq.UPSERT_ALIAS, {"name": name, "key": key, "now": self.now()})
        return True

    def blob_unalias(self, name: str) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(bq.DELETE_ALIAS, {"name": name})
        return cur.rowcount == 1

    def blob_lookup(self, name: str) -> BlobRecord | None:
        rows = self._read(bq.LOOKUP_ALIAS, {"name": name})
        return self._blob_record(rows[0]) if rows else None
