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
from durq.model import (
    HOOK_TASK_PREFIX,
    Claimed,
    Inserted,
    JobRecord,
    NewJob,
    Outcome,
    ReapSummary,
    StatusData,
    SweepSummary,
    WorkerInfo,
)
from durq.model.alerts import Alert
from durq.model.batches import BatchRecord, NewBatch
from durq.model.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult
from durq.model.limits import LimitUsage
from durq.model.pauses import QueuePause
from durq.model.steps import StepRecord
from durq.store.base import Shortcuts
from durq.store.sqlite import batches as sb
from durq.store.sqlite import blobs as bq
from durq.store.sqlite import deadlines as dl
from durq.store.sqlite import hooks as hk
from durq.store.sqlite import limits as lq
from durq.store.sqlite import pause_queries as pq
from durq.store.sqlite import periodic as per
from durq.store.sqlite import queries as q
from durq.store.sqlite import steps as s
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
from durq.store.sqlite.dashboard import SqliteDashboard


class SqliteStore(SqliteDashboard, Shortcuts):
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
            if hasattr(self, "_identity"):
                # A new thread's connection would create an empty file where a deleted
                # database was: say what happened instead of "no such table".
                self.verify()
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
        if any(job.batch_id is not None for job in jobs):
            return self._enqueue_in_batch(jobs, connection)
        if connection is not None:
            if not isinstance(connection, sqlite3.Connection):
                raise ConfigError(
                    f"connection= must be a sqlite3.Connection on {self.path}, "
                    f"not {type(connection).__name__}"
                )
            try:
                inserted = self._insert(connection, jobs, explicit_ids=False)
                return self._set_extras(connection, jobs, inserted)
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
        conn = self._conn()
        now = self.now()
        if (
            len(jobs) == 1
            and jobs[0].key is None
            and not jobs[0].has_extras
            and jobs[0].limit is None
            and not jobs[0].has_hooks
        ):
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
            return self._set_extras(conn, jobs, self._insert(conn, jobs, explicit_ids=True))

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
        self._set_limits(conn, jobs, out)
        self._set_hooks(conn, jobs, out)
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
                self._close_batches_of(outcomes, applied, now)
                self._fail_hooks_of(conn, outcomes, applied, now)
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
                    claimed.extend(self._claim_limited(conn, params, limit - len(claimed)))
                    if len(claimed) >= limit:
                        break
                    params["limit"] = limit - len(claimed)
                    rows = conn.execute(q.CLAIM, params).fetchall()
                    rows.sort(key=lambda r: (r[8], r[9], r[0]))
                    claimed.extend(
                        Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10]) for r in rows
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
        self, job_id: int, token: int, free_requeues: int, error: str, on_fail: bool = False
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
            if row is not None and row[0] == "failed":
                sb.close_for_jobs(conn, [job_id], params["now"])
                self._fail_hooks(conn, [job_id], params["now"], flagged=not on_fail)
        return (row[0], row[1]) if row else None

    def reap(self, fail_tasks: Sequence[str] = ()) -> ReapSummary:
        conn = self._conn()
        with self._write():
            now = self.now()
            rows = conn.execute(q.REAP, {"now": now}).fetchall()
            sb.close_for_jobs(conn, [r[0] for r in rows if r[1] == "failed"], now)
            failed = [r[0] for r in rows if r[1] == "failed"]
            self._fail_hooks(conn, failed, now, flagged=True, tasks=fail_tasks)
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
            if cur.rowcount == 1:
                sb.reopen_for_jobs(conn, [job_id])
        return cur.rowcount == 1

    def purge(self, queue: str, states: Sequence[str]) -> int:
        conn = self._conn()
        states_json = json.dumps(list(states))
        with self._write():
            hit_batches = sb.batches_in_purge(conn, queue, states_json)
            cur = conn.execute(q.PURGE, {"queue": queue, "states": states_json})
            sb.after_purge(conn, hit_batches, self.now())  # same transaction
        return cur.rowcount

    def cancel(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            now = self.now()
            cur = conn.execute(q.CANCEL, {"id": job_id, "now": now})
            if cur.rowcount == 1:
                sb.close_for_jobs(conn, [job_id], now)
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

    # -- pause and alerts --

    def pause_queue(self, queue: str, reason: str, source: str) -> bool:
        conn = self._conn()
        params: dict[str, Any] = {"queue": queue, "reason": reason, "source": source}
        with self._write():
            params["now"] = self.now()
            row = conn.execute(pq.PAUSE_QUEUE, params).fetchone()
        return row is not None

    def resume_queue(self, queue: str, source: str | None) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(pq.RESUME_QUEUE, {"queue": queue, "source": source})
        return cur.rowcount == 1

    def queue_pause(self, queue: str) -> QueuePause | None:
        rows = self._read(pq.SELECT_PAUSE, {"queue": queue})
        if not rows:
            return None
        name, reason, source, paused_at = rows[0]
        return QueuePause(name, reason or "", source or "", float(paused_at or 0.0))

    def requeue_paused(self, job_id: int, token: int, queue: str, reason: str) -> tuple[bool, bool]:
        conn = self._conn()
        with self._write():
            now = self.now()
            cur = conn.execute(pq.REQUEUE_PAUSED, {"id": job_id, "token": token})
            requeued = cur.rowcount == 1
            params = {"queue": queue, "reason": reason, "source": "auto", "now": now}
            paused = conn.execute(pq.PAUSE_QUEUE, params).fetchone() is not None
        return requeued, paused

    def raise_alert(self, key: str, message: str, severity: str, cooldown: float) -> Alert | None:
        conn = self._conn()
        params: dict[str, Any] = {
            "key": key,
            "message": message,
            "severity": severity,
            "cooldown": float(cooldown),
        }
        with self._write():
            params["now"] = self.now()
            sent, reported, since, at = conn.execute(pq.RAISE_ALERT, params).fetchone()
        if not sent:
            return None
        first = float(since) if reported and since is not None else float(at)
        return Alert(key, message, severity, float(at), int(reported), first)

    # -- batches --------------------------------------------------------------------------

    def _close_batches_of(
        self, outcomes: Sequence[Outcome], applied: Sequence[bool], now: float
    ) -> None:
        """The finish hook: close the batches of applied outcomes (same transaction)."""
        ids = [o.batch_id for o, ok in zip(outcomes, applied, strict=True) if ok and o.batch_id]
        if ids:
            sb.close_batches(self._conn(), ids, now)

    def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]:
        """Insert jobs and make the new ones members of their batch, in one transaction
        (the caller's with ``connection``). A keyed job that already existed does not join.

        Raises:
            ConfigError: the batch is sealed or unknown (nothing written).
        """
        if connection is not None and not isinstance(connection, sqlite3.Connection):
            raise ConfigError(
                f"connection= must be a sqlite3.Connection on {self.path}, "
                f"not {type(connection).__name__}"
            )
        conn = connection if connection is not None else self._conn()
        tx = contextlib.nullcontext() if connection is not None else self._write()
        try:
            with tx:
                batch_ids = sorted({j.batch_id for j in jobs if j.batch_id is not None})
                for batch_id in batch_ids:
                    sb.require_building(conn, batch_id)
                out = self._insert(conn, jobs, explicit_ids=connection is None)
                self._set_extras(conn, jobs, out)  # parked / deadline columns, as outside
                by_batch: dict[int, list[int]] = {}
                for job, ins in zip(jobs, out, strict=True):
                    if job.batch_id is not None and ins.created:
                        by_batch.setdefault(job.batch_id, []).append(ins.id)
                for batch_id in batch_ids:
                    sb.add_members(conn, batch_id, by_batch.get(batch_id, []))
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return out

    def create_batch(self, spec: NewBatch) -> int:
        conn = self._conn()
        with self._write():
            return sb.create(conn, spec, self.now())

    def seal_batch(self, batch_id: int, aborted: str | None = None) -> bool:
        conn = self._conn()
        with self._write():
            return sb.seal(conn, batch_id, aborted, self.now())

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        conn = self._conn()
        try:
            conn.execute("BEGIN")  # the row and its counts from one snapshot
            try:
                return sb.get(conn, batch_id)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc

    # -- steps and retention --

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        """A step's stored result (JSON text, or None) and whether ``token`` holds the lease."""
        row = self._read(s.STEP_STATE, {"job_id": job_id, "token": token, "name": name})[0]
        return row[0], bool(row[1])

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        """Record a step under the lease ``token``; False when the lease is not held or
        the name is already recorded (the stored row is kept)."""
        conn = self._conn()
        params = {"job_id": job_id, "token": token, "name": name, "result": result}
        with self._write():
            params["now"] = self.now()
            cur = conn.execute(s.SAVE_STEP, params)
        return cur.rowcount == 1

    def list_steps(self, job_id: int) -> list[StepRecord]:
        rows = self._read(s.LIST_STEPS, {"job_id": job_id})
        return [StepRecord(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    def clear_steps(self, job_id: int) -> int:
        """Delete a job's steps unless it is running; the count deleted."""
        conn = self._conn()
        with self._write():
            cur = conn.execute(s.CLEAR_STEPS, {"job_id": job_id})
        return cur.rowcount

    def prune_jobs(self, state: str, older_than: float, queue: str | None, limit: int) -> int:
        """Delete up to ``limit`` jobs in terminal ``state`` finished more than
        ``older_than`` seconds ago (one write transaction); the count deleted."""
        conn = self._conn()
        params: dict[str, Any] = {
            "state": state,
            "older_than": float(older_than),
            "queue": queue,
            "limit": int(limit),
        }
        with self._write():
            params["now"] = self.now()
            cur = conn.execute(s.PRUNE_JOBS, params)
        return cur.rowcount

    def running_jobs(self, limit: int) -> list[JobRecord]:
        """Up to ``limit`` running jobs, newest first (for status: their progress)."""
        return [JobRecord(*r) for r in self._read(s.RUNNING_JOBS, {"limit": int(limit)})]

    # -- periodic --

    def periodic_slots(self) -> dict[str, tuple[float, int | None]]:
        rows = self._read(per.SELECT_SLOTS)
        return {r[0]: (float(r[1]), None if r[2] is None else int(r[2])) for r in rows}

    def periodic_anchor(self, names: Sequence[str], at: float) -> None:
        if not names:
            return
        conn = self._conn()
        with self._write():
            now = self.now()
            conn.executemany(per.ANCHOR, [{"name": n, "at": at, "now": now} for n in names])

    def enqueue_periodic(self, name: str, slot: float, job: NewJob) -> Inserted | None:
        conn = self._conn()
        with self._write():
            params: dict[str, Any] = {"name": name, "slot": slot, "now": self.now()}
            if conn.execute(per.ADVANCE, params).fetchone() is None:
                return None
            (inserted,) = self._insert(conn, [job], explicit_ids=True)
            self._set_extras(conn, [job], [inserted])  # the task's deadline_in / notice_after
            hit("periodic_tx")
            conn.execute(per.SET_JOB, {"name": name, "slot": slot, "job_id": inserted.id})
        return inserted

    # -- parked / deadlines --

    @staticmethod
    def _set_extras(
        conn: sqlite3.Connection, jobs: Sequence[NewJob], inserted: list[Inserted]
    ) -> list[Inserted]:
        """Parked state and deadline columns of the rows just inserted (same transaction)."""
        for job, ins in zip(jobs, inserted, strict=True):
            if ins.created and job.has_extras:
                conn.execute(
                    dl.SET_EXTRAS,
                    {
                        "id": ins.id,
                        "park": 1 if job.park else 0,
                        "park_ttl": job.park_ttl,
                        "deadline": job.deadline,
                        "deadline_in": job.deadline_in,
                        "notice_after": job.notice_after,
                    },
                )
        return inserted

    def adopt(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(dl.ADOPT, {"id": job_id, "now": self.now()})
        return cur.rowcount == 1

    def cancel_parked(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():  # the cancel and its batch's close commit together
            now = self.now()
            if conn.execute(dl.CANCEL_PARKED, {"id": job_id, "now": now}).rowcount != 1:
                return False
            sb.close_for_jobs(conn, [job_id], now)
        return True

    def sweep(self, hook_max_attempts: int, limit: int = 500) -> SweepSummary:
        conn = self._conn()
        if not self._read(dl.ANY_DUE, {"now": self.now()})[0][0]:
            return SweepSummary(at=self.now())  # nothing due: no write lock taken
        with self._write():
            now = self.now()
            params: dict[str, Any] = {"now": now, "limit": limit}
            expired: list[int] = []
            for statement, message in (
                (dl.EXPIRE_PAST_DEADLINE, "deadline passed before the job finished"),
                (dl.EXPIRE_PARKED, "park TTL passed before the job was adopted"),
            ):
                rows = conn.execute(statement, {**params, "message": message}).fetchall()
                self._insert_hooks(conn, rows, "expire", now, hook_max_attempts)
                expired.extend(r[0] for r in rows)
            sb.close_for_jobs(conn, expired, now)  # same transaction
            rows = conn.execute(dl.NOTICE_SLOW, params).fetchall()
            self._insert_hooks(conn, rows, "slow", now, hook_max_attempts)
            noticed = [r[0] for r in rows]
        return SweepSummary(at=now, expired=tuple(sorted(expired)), noticed=tuple(sorted(noticed)))

    @staticmethod
    def _insert_hooks(
        conn: sqlite3.Connection, rows: list[Any], hook: str, now: float, max_attempts: int
    ) -> None:
        conn.executemany(
            dl.INSERT_HOOK,
            [
                {
                    "queue": queue,
                    "task": HOOK_TASK_PREFIX + task,
                    "payload": json.dumps({"job_id": job_id, "hook": hook}),
                    "priority": priority,
                    "now": now,
                    "max_attempts": max_attempts,
                    "key": f"durq.{hook}:{job_id}",
                }
                for job_id, queue, task, priority in rows
            ],
        )

    # -- limits --

    @staticmethod
    def _set_limits(
        conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the limit of each new limited job (same transaction as its insert)."""
        for job, ins in zip(jobs, out, strict=True):
            if job.limit is not None and ins.created:
                lim = job.limit
                conn.execute(
                    lq.SET_JOB_LIMIT,
                    {
                        "id": ins.id, "key": lim.key, "concurrency": lim.concurrency,
                        "rate": lim.rate, "per": lim.per,
                    },
                )  # fmt: skip

    def _claim_limited(
        self, conn: sqlite3.Connection, params: dict[str, Any], limit: int
    ) -> list[Claimed]:
        """Claim up to ``limit`` limited jobs of ``params["queue"]`` under their limits
        (inside the caller's write transaction), and log the starts of rate-limited ones."""
        if limit <= 0 or conn.execute(lq.ANY_LIMITED_QUEUED, (params["queue"],)).fetchone() is None:
            return []
        rows = conn.execute(
            lq.CLAIM_LIMITED, {**params, "limit": limit, "scan": max(64, 4 * limit)}
        ).fetchall()
        if not rows:
            return []
        starts = [(r[11], params["now"]) for r in rows if r[12] is not None]
        if starts:
            conn.executemany(lq.RECORD_START, starts)
            conn.execute(lq.PRUNE_STARTS, {"now": params["now"]})
        rows.sort(key=lambda r: (r[8], r[9], r[0]))
        return [Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10]) for r in rows]

    def acquire_hold(self, name: str, concurrency: int, lease: float, holder: str) -> int | None:
        conn = self._conn()
        with self._write():
            now = self.now()
            conn.execute(lq.DELETE_EXPIRED_HOLDS, {"name": name, "now": now})
            row = conn.execute(
                lq.ACQUIRE_HOLD,
                {
                    "name": name, "holder": holder, "now": now, "expires": now + lease,
                    "concurrency": concurrency,
                },
            ).fetchone()  # fmt: skip
        return int(row[0]) if row else None

    def extend_hold(self, hold_id: int, lease: float) -> bool:
        conn = self._conn()
        with self._write():
            now = self.now()
            cur = conn.execute(lq.EXTEND_HOLD, {"id": hold_id, "now": now, "expires": now + lease})
        return cur.rowcount == 1

    def release_hold(self, hold_id: int) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(lq.RELEASE_HOLD, {"id": hold_id})
        return cur.rowcount == 1

    def limit_usage(self) -> list[LimitUsage]:
        rows = self._read(lq.LIMIT_USAGE, {"now": self.now()})
        return [
            LimitUsage(r[0], int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4]))
            for r in rows
        ]

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

    # -- soak --

    def storage_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):  # no WAL file yet, or just checkpointed away
                total += os.stat(self.path + suffix).st_size
        return total

    # -- hooks --

    @staticmethod
    def _set_hooks(
        conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the on_fail flag and hook queue of the new jobs (same transaction)."""
        rows = [
            {"id": ins.id, "on_fail": 1 if job.on_fail else 0, "hook_queue": job.hook_queue}
            for job, ins in zip(jobs, out, strict=True)
            if ins.created and job.has_hooks
        ]
        if rows:
            conn.executemany(hk.SET_HOOKS, rows)

    @staticmethod
    def _fail_hooks(
        conn: sqlite3.Connection,
        ids: Sequence[int],
        now: float,
        flagged: bool,
        tasks: Sequence[str] = (),
    ) -> None:
        """Insert the on_fail hook jobs of the jobs among ``ids`` that are failed now, inside
        the caller's write transaction (the one that failed them)."""
        if not ids:
            return
        from durq.model.jobs import HOOK_MAX_ATTEMPTS

        conn.execute(
            hk.INSERT_FAIL_HOOKS,
            {
                "ids": json.dumps(list(ids)),
                "prefix": HOOK_TASK_PREFIX,
                "now": now,
                "max_attempts": HOOK_MAX_ATTEMPTS,
                "flagged": 1 if flagged else 0,
                "tasks": json.dumps(list(tasks)),
            },
        )

    def _fail_hooks_of(
        self,
        conn: sqlite3.Connection,
        outcomes: Sequence[Outcome],
        applied: Sequence[bool],
        now: float,
    ) -> None:
        """The finish hook: on_fail hook jobs of the marked outcomes that left their job
        failed (a failure, or a retry the store turned into one)."""
        ids = [o.job_id for o, ok in zip(outcomes, applied, strict=True) if ok and o.on_fail]
        self._fail_hooks(conn, ids, now, flagged=False)

    def find(self, queue: str, key: str) -> JobRecord | None:
        """The job of ``queue`` holding idempotency key ``key``, or None."""
        rows = self._read(q.SELECT_JOB_BY_KEY, {"queue": queue, "key": key})
        return JobRecord(*rows[0]) if rows else None
