"""PostgresStore: the store protocol on PostgreSQL (psycopg 3 + psycopg_pool).

Claims use ``FOR UPDATE SKIP LOCKED``; every time comes from the database clock; enqueues
send ``NOTIFY`` so idle workers wake at once; one process at a time leads (runs the reaper)
by holding an advisory lock on a dedicated session.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from durq.errors import StoreError
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
from durq.model.limits import LimitUsage, lock_id
from durq.model.pauses import QueuePause
from durq.model.steps import StepRecord
from durq.store.base import Shortcuts
from durq.store.postgres import blobs as bq
from durq.store.postgres import deadlines as dl
from durq.store.postgres import hooks as hk
from durq.store.postgres import limits as lq
from durq.store.postgres import pause_queries as pq
from durq.store.postgres import periodic as per
from durq.store.postgres import queries as q
from durq.store.postgres import soak as soak_sql
from durq.store.postgres import steps as steps_sql
from durq.store.postgres.batches import Batches
from durq.store.postgres.connection import (
    NOTIFY_CHANNEL,
    PostgresOptions,
    lock_key,
    migrate,
    open_pool,
    parse_url,
    render,
    require_current,
    translate,
)
from durq.store.postgres.dashboard import PostgresDashboard


class PostgresStore(PostgresDashboard, Shortcuts):
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

    supports_notify = True

    def __init__(
        self, url: str, *, clock: Callable[[], float] = time.time, auto_migrate: bool = True
    ) -> None:
        self.url = url
        self.options: PostgresOptions = parse_url(url)
        self._clock = clock
        self._sql = {
            name: render(getattr(q, name), self.options.schema) for name in dir(q) if name.isupper()
        }
        self.channel = f"{NOTIFY_CHANNEL}_{self.options.schema}"
        self._batches = Batches(self.options.schema, self.channel)
        self._pool = open_pool(self.options)
        self._offset = 0.0
        self._changed = threading.Event()
        self._listener: threading.Thread | None = None
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
        single statement, which is then its own transaction (no BEGIN/COMMIT round trips)."""
        try:
            with self._pool.connection() as conn:
                if transaction:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
        except StoreError:
            raise
        except (psycopg.Error, OSError) as exc:
            raise translate(exc, self.options) from exc
        except Exception as exc:
            from psycopg_pool import PoolTimeout

            if isinstance(exc, PoolTimeout):
                raise translate(exc, self.options) from exc
            raise

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

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        if any(job.batch_id is not None for job in jobs):
            return self._enqueue_in_batch(jobs, connection)
        if connection is not None:
            try:
                return self._set_extras(connection, jobs, self._enqueue_on(connection, jobs))
            except psycopg.Error as exc:
                raise translate(exc, self.options) from exc
        if (
            len(jobs) == 1
            and jobs[0].key is None
            and not jobs[0].has_extras
            and jobs[0].limit is None
            and not jobs[0].has_hooks
        ):
            job = jobs[0]
            params = {
                "at": self._at(), "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": job.run_at, "delay": float(job.delay),
                "max_attempts": job.max_attempts, "meta": job.meta, "channel": self.channel,
            }  # fmt: skip
            with self._tx(transaction=False) as conn:  # one statement: its own transaction
                row = conn.execute(self._sql["INSERT_ONE"], params).fetchone()
            assert row is not None
            return [Inserted(int(row[0]), True, float(row[1]), float(row[2]))]
        with self._tx() as conn:
            return self._set_extras(conn, jobs, self._enqueue_on(conn, jobs))

    def _enqueue_on(self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob]) -> list[Inserted]:
        at = self._at()
        out: list[Inserted] = []
        plain: list[NewJob] = []

        def flush() -> None:
            if not plain:
                return
            rows = conn.execute(
                self._sql["INSERT_MANY"],
                {
                    "at": at,
                    "queues": [j.queue for j in plain],
                    "tasks": [j.task for j in plain],
                    "payloads": [j.payload for j in plain],
                    "priorities": [j.priority for j in plain],
                    "run_ats": [None if j.run_at is None else float(j.run_at) for j in plain],
                    "delays": [float(j.delay) for j in plain],
                    "max_attempts": [j.max_attempts for j in plain],
                    "metas": [j.meta for j in plain],
                },
            ).fetchall()
            rows.sort(key=lambda r: r[0])  # identity values follow the insert order
            out.extend(Inserted(int(r[0]), True, float(r[1]), float(r[2])) for r in rows)
            plain.clear()

        for job in jobs:
            if job.key is None:
                plain.append(job)
                continue
            flush()
            params = {
                "at": at, "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": job.run_at, "delay": float(job.delay),
                "max_attempts": job.max_attempts, "key": job.key, "meta": job.meta,
            }  # fmt: skip
            row = conn.execute(self._sql["INSERT_KEYED"], params).fetchone()
            if row is not None:
                out.append(Inserted(int(row[0]), True, float(row[1]), float(row[2])))
            else:
                existing = conn.execute(
                    self._sql["SELECT_JOB_BY_KEY"], {"queue": job.queue, "key": job.key}
                ).fetchone()
                assert existing is not None  # the conflicting row is committed and visible
                out.append(
                    Inserted(int(existing[0]), False, float(existing[5]), float(existing[13]))
                )
        flush()
        self._set_limits(conn, jobs, out)
        self._set_hooks(conn, jobs, out)
        for queue in sorted({j.queue for j in jobs}):
            conn.execute(self._sql["NOTIFY"], {"channel": self.channel, "queue": queue})
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
        """Outcomes and the first queue's claim go in one statement (one round trip, one
        commit); further queues, when the first did not fill ``limit``, are claimed after.
        Outcomes of batch members run in one transaction with their batches' close; limited
        jobs are claimed by their own pass (see :meth:`_claim_limited`)."""
        at = self._at()
        claimed: list[Claimed] = []
        params: dict[str, Any] = {
            "at": at,
            "ids": [o.job_id for o in outcomes],
            "tokens": [o.lease_token for o in outcomes],
            "kinds": [o.kind for o in outcomes],
            "results": [o.result for o in outcomes],
            "errors": [json.dumps(o.error.to_dict()) if o.error else None for o in outcomes],
            "delays": [float(o.delay) for o in outcomes],
            "tasks": list(tasks),
            "lease": lease,
            "worker_id": worker_id,
        }
        claim_queues = list(queues) if limit > 0 else []
        if outcomes:
            if any(o.kind == "retry" for o in outcomes):
                hit("retry_tx")
            hit("finish_tx")
        done: set[int] = set()
        batched = any(o.batch_id is not None for o in outcomes)  # then close them in one tx
        hooked = any(o.on_fail for o in outcomes)  # on_fail hook jobs: in the same tx
        # limits: queues whose limited jobs waited last time are offered the slots first;
        # the claims below skip limited jobs and report (a NULL row) queues that have some
        first = [name for name in claim_queues if name in self._limited_queues]
        for queue in first:
            claimed.extend(
                self._claim_limited(queue, tasks, limit - len(claimed), lease, worker_id)
            )
        seen: dict[str, bool] = {}
        # one statement is its own transaction; claims over several queues share one
        with self._tx(transaction=len(claim_queues) > 1 or batched or hooked) as conn:
            if outcomes and not claim_queues:
                done = {r[0] for r in conn.execute(self._sql["FINISH_MANY"], params).fetchall()}
            elif outcomes:
                queue = claim_queues.pop(0)
                params["queue"], params["limit"] = queue, limit - len(claimed)
                rows = []
                seen[queue] = False
                for r in conn.execute(self._sql["FINISH_AND_CLAIM"], params).fetchall():
                    if r[0] is None:
                        seen[queue] = True
                    elif r[0]:
                        rows.append(r[1:])
                    else:
                        done.add(r[1])
                claimed.extend(self._claimed_in_order(rows))
            if batched:
                self._close_batches_of(conn, outcomes, done, at)
            if hooked:
                marked = [o.job_id for o in outcomes if o.on_fail and o.job_id in done]
                self._fail_hooks(conn, marked, at, flagged=False)
            for queue in claim_queues:
                if len(claimed) >= limit:
                    break
                params["queue"], params["limit"] = queue, limit - len(claimed)
                rows = conn.execute(self._sql["CLAIM"], params).fetchall()
                seen[queue] = any(r[0] is None for r in rows)
                claimed.extend(self._claimed_in_order([r[1:] for r in rows if r[0]]))
        for queue, waiting in seen.items():
            if not waiting:
                self._limited_queues.discard(queue)
                continue
            self._limited_queues.add(queue)
            if queue not in first:
                claimed.extend(
                    self._claim_limited(queue, tasks, limit - len(claimed), lease, worker_id)
                )
        if self._limited_ids and outcomes:
            self._limited_finished([o.job_id for o in outcomes])
        return [o.job_id in done for o in outcomes], claimed

    @staticmethod
    def _claimed_in_order(rows: Sequence[Sequence[Any]]) -> list[Claimed]:
        """Claimed rows (id, queue, task, payload, attempts, max_attempts, token, requeues,
        priority, run_at, batch_id) in claim order: RETURNING does not keep the ORDER BY."""
        ordered = sorted(rows, key=lambda r: (r[8], r[9], r[0]))
        return [
            Claimed(int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]), int(r[6]), int(r[7]), r[10])
            for r in ordered
        ]

    def extend_leases(self, leases: Sequence[tuple[int, int]], lease: float) -> list[int]:
        if not leases:
            return []
        params = {
            "at": self._at(),
            "lease": lease,
            "ids": [i for i, _ in leases],
            "tokens": [t for _, t in leases],
        }
        hit("heartbeat_tx")
        with self._tx(transaction=False) as conn:
            kept = {r[0] for r in conn.execute(self._sql["EXTEND_LEASES"], params).fetchall()}
        return [i for i, _ in leases if i not in kept]

    def set_progress(self, job_id: int, token: int, progress: str) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(
                self._sql["SET_PROGRESS"], {"id": job_id, "token": token, "progress": progress}
            )
            return cur.rowcount == 1

    def release(
        self, job_id: int, token: int, free_requeues: int, error: str, on_fail: bool = False
    ) -> tuple[str, int] | None:
        params = {
            "at": self._at(),
            "id": job_id,
            "token": token,
            "free": free_requeues,
            "error": error,
        }
        with self._tx() as conn:  # a release that fails a job closes its batch with it
            row = conn.execute(self._sql["RELEASE"], params).fetchone()
            if row is not None and row[0] == "failed":
                self._batches.close_for_jobs(conn, [job_id], self._at())
                self._fail_hooks(conn, [job_id], self._at(), flagged=not on_fail)
        return (row[0], row[1]) if row else None

    def reap(self, fail_tasks: Sequence[str] = ()) -> ReapSummary:
        at = self._at()
        with self._tx() as conn:
            rows = conn.execute(self._sql["REAP"], {"at": at}).fetchall()
            self._batches.close_for_jobs(conn, [r[0] for r in rows if r[1] == "failed"], at)
            failed = [r[0] for r in rows if r[1] == "failed"]
            self._fail_hooks(conn, failed, at, flagged=True, tasks=fail_tasks)
            at = conn.execute(self._sql["CLOCK"], {"at": at}).fetchone()
            now = float(at[0]) if at else self.now()
            summary = ReapSummary(
                at=now,
                recovered=sum(1 for r in rows if r[1] == "queued"),
                failed=sum(1 for r in rows if r[1] == "failed"),
                job_ids=tuple(sorted(int(r[0]) for r in rows)),
            )
            value = {"at": now, "recovered": summary.recovered, "failed": summary.failed}
            conn.execute(self._sql["PUT_META"], {"key": "last_reap", "value": json.dumps(value)})
        return summary

    # -- reading and admin ----------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._sql["SELECT_JOB"], {"id": job_id}).fetchone()
        return JobRecord(*row) if row else None

    def list_jobs(
        self, *, state: str | None, queue: str | None, task: str | None, limit: int
    ) -> list[JobRecord]:
        ready: int | None = None
        if state == "scheduled":
            state, ready = "queued", 0
        elif state == "queued":
            ready = 1
        params = {
            "at": self._at(), "state": state, "ready": ready, "queue": queue,
            "task": task, "limit": limit,
        }  # fmt: skip
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._sql["LIST_JOBS"], params).fetchall()
        return [JobRecord(*r) for r in rows]

    def retry(self, job_id: int) -> bool:
        with self._tx() as conn:  # the job and its batch (reopened) change together
            done = conn.execute(self._sql["RETRY"], {"at": self._at(), "id": job_id}).rowcount == 1
            if done:
                self._batches.reopen_for_jobs(conn, [job_id])
            return done

    def purge(self, queue: str, states: Sequence[str]) -> int:
        at = self._at()
        with self._tx() as conn:  # the delete and its batches' close commit together
            hit_batches = self._batches.batches_in_purge(conn, queue, states)
            cur = conn.execute(self._sql["PURGE"], {"queue": queue, "states": list(states)})
            self._batches.after_purge(conn, hit_batches, at)
            return cur.rowcount

    def cancel(self, job_id: int) -> bool:
        at = self._at()
        with self._tx() as conn:  # the job and its batch (maybe completed) change together
            done = conn.execute(self._sql["CANCEL"], {"at": at, "id": job_id}).rowcount == 1
            if done:
                self._batches.close_for_jobs(conn, [job_id], at)
            return done

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool:
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._sql["HAS_PENDING"], {"queues": list(queues), "tasks": list(tasks)}
            ).fetchone()
        return bool(row and row[0])

    def register_worker(self, info: WorkerInfo) -> None:
        params = {
            "at": self._at(), "id": info.id, "host": info.host, "pid": info.pid,
            "queues": json.dumps(list(info.queues)), "tasks": json.dumps(list(info.tasks)),
            "lease": info.lease,
        }  # fmt: skip
        with self._tx() as conn:
            conn.execute(self._sql["DELETE_DEAD_WORKERS"], {"at": params["at"]})
            conn.execute(self._sql["UPSERT_WORKER"], params)

    def touch_worker(self, worker_id: str) -> None:
        with self._tx(transaction=False) as conn:
            conn.execute(self._sql["TOUCH_WORKER"], {"at": self._at(), "id": worker_id})

    def unregister_worker(self, worker_id: str) -> None:
        with self._tx(transaction=False) as conn:
            conn.execute(self._sql["DELETE_WORKER"], {"id": worker_id})

    def status_data(self) -> StatusData:
        at = self._at()
        with self._tx() as conn:
            row = conn.execute(self._sql["CLOCK"], {"at": at}).fetchone()
            data = StatusData(now=float(row[0]) if row else self.now())
            for queue, state, later, retried, n in conn.execute(
                self._sql["COUNT_BY_STATE"], {"at": at}
            ):
                data.counts[(queue, state, later, retried)] = n
            data.oldest_ready = {
                r[0]: float(r[1]) for r in conn.execute(self._sql["OLDEST_READY"], {"at": at})
            }
            data.queued_tasks = [
                (r[0], r[1], int(r[2])) for r in conn.execute(self._sql["QUEUED_TASKS"])
            ]
            for name, paused, reason, source, at in conn.execute(self._sql["SELECT_QUEUES"]):
                if paused:
                    data.paused[name] = {"reason": reason, "source": source, "at": at}
            for r in conn.execute(self._sql["SELECT_WORKERS"]):
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
            meta = conn.execute(self._sql["GET_META"], {"key": "last_reap"}).fetchone()
            data.last_reap = json.loads(meta[0]) if meta else None
        return data

    # -- wake-ups and leadership ----------------------------------------------------------

    def changed(self) -> bool:
        """True once a NOTIFY arrived since the last call (a listener thread waits for them)."""
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="durq-listen", daemon=True)
            self._listener.start()
            return True
        if self._changed.is_set():
            self._changed.clear()
            return True
        return False

    def _listen(self) -> None:
        pause = 0.1
        while not self._closing.is_set():
            try:
                with psycopg.connect(self.options.conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self._changed.set()  # anything may have happened while we were away
                    pause = 0.1
                    while not self._closing.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._changed.set()
            except psycopg.Error:
                self._changed.set()
                self._closing.wait(pause)
                pause = min(pause * 2, 5.0)

    def lead(self, what: str = "maintenance", stale_after: float = 15.0) -> bool:
        """True when this process should run the leader-only services now.

        One process leads: the one holding an advisory lock on a dedicated session (if that
        connection dies, the lock goes with it and another process takes over at its next
        try). The leader stamps ``meta`` each time it is asked; a process that does not lead
        also answers True when that stamp is older than ``stale_after`` seconds, so that a
        frozen leader (SIGSTOP, a long pause) that still holds its session cannot stop
        expired leases from being recovered. The reaper is one conditional UPDATE, so a
        stand-in running it at the same time as a leader is harmless.
        """
        key = lock_key(self.options.schema, what)
        with self._leader_lock:
            conn = self._leader
            try:
                if conn is None or conn.closed:
                    conn = self._leader = psycopg.connect(self.options.conninfo, autocommit=True)
                    self._leads.clear()
                if what not in self._leads:  # each name is its own advisory lock
                    row = conn.execute(q.TRY_LEAD, {"key": key}).fetchone()
                    if row and row[0]:
                        self._leads.add(what)
                stamp = f"leader:{what}"
                if what in self._leads:
                    conn.execute(self._sql["STAMP_LEADER"], {"key": stamp, "at": self._at()})
                    return True
                row = conn.execute(
                    self._sql["LEADER_AGE"], {"key": stamp, "at": self._at()}
                ).fetchone()
                return row is None or row[0] is None or float(row[0]) > stale_after
            except psycopg.Error:
                if self._leader is not None:
                    with contextlib.suppress(psycopg.Error):
                        self._leader.close()
                self._leader = None
                self._leads.clear()
                return False

    # -- pause and alerts --

    def _pq(self, name: str) -> Any:
        """A statement of :mod:`durq.store.postgres.pause_queries`, rendered once."""
        cache: dict[str, Any] = self.__dict__.setdefault("_pq_sql", {})
        if name not in cache:
            cache[name] = render(getattr(pq, name), self.options.schema)
        return cache[name]

    def pause_queue(self, queue: str, reason: str, source: str) -> bool:
        params = {"at": self._at(), "queue": queue, "reason": reason, "source": source}
        with self._tx(transaction=False) as conn:
            return conn.execute(self._pq("PAUSE_QUEUE"), params).fetchone() is not None

    def resume_queue(self, queue: str, source: str | None) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(self._pq("RESUME_QUEUE"), {"queue": queue, "source": source})
            return cur.rowcount == 1

    def queue_pause(self, queue: str) -> QueuePause | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._pq("SELECT_PAUSE"), {"queue": queue}).fetchone()
        if row is None:
            return None
        return QueuePause(row[0], row[1] or "", row[2] or "", float(row[3] or 0.0))

    def requeue_paused(self, job_id: int, token: int, queue: str, reason: str) -> tuple[bool, bool]:
        at = self._at()
        with self._tx() as conn:  # one transaction: the job back and the queue paused
            cur = conn.execute(self._pq("REQUEUE_PAUSED"), {"id": job_id, "token": token})
            requeued = cur.rowcount == 1
            params = {"at": at, "queue": queue, "reason": reason, "source": "auto"}
            paused = conn.execute(self._pq("PAUSE_QUEUE"), params).fetchone() is not None
        return requeued, paused

    def raise_alert(self, key: str, message: str, severity: str, cooldown: float) -> Alert | None:
        params = {
            "at": self._at(),
            "key": key,
            "message": message,
            "severity": severity,
            "cooldown": float(cooldown),
        }
        with self._tx(transaction=False) as conn:  # one statement: its own transaction
            row = conn.execute(self._pq("RAISE_ALERT"), params).fetchone()
        assert row is not None
        sent, reported, since, at = row
        if not sent:
            return None
        first = float(since) if reported and since is not None else float(at)
        return Alert(key, message, severity, float(at), int(reported), first)

    # -- batches --------------------------------------------------------------------------

    def _close_batches_of(
        self,
        conn: psycopg.Connection[Any],
        outcomes: Sequence[Outcome],
        done: set[int],
        at: float | None,
    ) -> None:
        """The finish hook, inside the finish's transaction: close the batches of the
        outcomes that applied."""
        ids = [o.batch_id for o in outcomes if o.batch_id is not None and o.job_id in done]
        if ids:
            self._batches.close_batches(conn, ids, at)

    def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]:
        """Insert jobs and make the new ones members of their batch, in one transaction
        (the caller's with ``connection``). A keyed job that already existed does not join.

        Raises:
            ConfigError: the batch is sealed or unknown (nothing written).
        """

        def run(conn: psycopg.Connection[Any]) -> list[Inserted]:
            batch_ids = sorted({j.batch_id for j in jobs if j.batch_id is not None})
            for batch_id in batch_ids:
                self._batches.require_building(conn, batch_id)
            out = self._enqueue_on(conn, jobs)
            self._set_extras(conn, jobs, out)  # parked / deadline columns, as outside a batch
            for batch_id in batch_ids:
                members = [
                    ins.id
                    for job, ins in zip(jobs, out, strict=True)
                    if job.batch_id == batch_id and ins.created
                ]
                self._batches.add_members(conn, batch_id, members)
            return out

        if connection is not None:
            try:
                return run(connection)
            except psycopg.Error as exc:
                raise translate(exc, self.options) from exc
        with self._tx() as conn:
            return run(conn)

    def create_batch(self, spec: NewBatch) -> int:
        with self._tx(transaction=False) as conn:
            return self._batches.create(conn, spec, self._at())

    def seal_batch(self, batch_id: int, aborted: str | None = None) -> bool:
        with self._tx() as conn:
            return self._batches.seal(conn, batch_id, aborted, self._at())

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        with self._tx() as conn:
            return self._batches.get(conn, batch_id)

    # -- steps and retention --

    def _steps_sql(self, name: str) -> Any:
        key = f"steps.{name}"  # rendered once, like queries.py's statements
        if key not in self._sql:
            self._sql[key] = render(getattr(steps_sql, name), self.options.schema)
        return self._sql[key]

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        """A step's stored result (JSON text, or None) and whether ``token`` holds the lease."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._steps_sql("STEP_STATE"), {"job_id": job_id, "token": token, "name": name}
            ).fetchone()
        assert row is not None
        return row[0], bool(row[1])

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        """Record a step under the lease ``token``; False when the lease is not held or
        the name is already recorded (the stored row is kept)."""
        params = {"at": self._at(), "job_id": job_id, "token": token, "name": name}
        params["result"] = result
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("SAVE_STEP"), params).rowcount == 1

    def list_steps(self, job_id: int) -> list[StepRecord]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._steps_sql("LIST_STEPS"), {"job_id": job_id}).fetchall()
        return [StepRecord(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    def clear_steps(self, job_id: int) -> int:
        """Delete a job's steps unless it is running; the count deleted."""
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("CLEAR_STEPS"), {"job_id": job_id}).rowcount

    def prune_jobs(self, state: str, older_than: float, queue: str | None, limit: int) -> int:
        """Delete up to ``limit`` jobs in terminal ``state`` finished more than
        ``older_than`` seconds ago on the database clock (one statement); the count."""
        params = {
            "at": self._at(),
            "state": state,
            "older_than": float(older_than),
            "queue": queue,
            "limit": int(limit),
        }
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("PRUNE_JOBS"), params).rowcount

    def running_jobs(self, limit: int) -> list[JobRecord]:
        """Up to ``limit`` running jobs, newest first (for status: their progress)."""
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._steps_sql("RUNNING_JOBS"), {"limit": int(limit)}).fetchall()
        return [JobRecord(*r) for r in rows]

    # -- periodic --

    def _periodic_sql(self, name: str) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_periodic_rendered", {})
        if name not in cache:
            cache[name] = render(getattr(per, name), self.options.schema)
        return cache[name]

    def periodic_slots(self) -> dict[str, tuple[float, int | None]]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._periodic_sql("SELECT_SLOTS")).fetchall()
        return {r[0]: (float(r[1]), None if r[2] is None else int(r[2])) for r in rows}

    def periodic_anchor(self, names: Sequence[str], at: float) -> None:
        if not names:
            return
        params = {"at": self._at(), "at_slot": float(at), "names": list(names)}
        with self._tx(transaction=False) as conn:
            conn.execute(self._periodic_sql("ANCHOR"), params)

    def enqueue_periodic(self, name: str, slot: float, job: NewJob) -> Inserted | None:
        params = {"at": self._at(), "name": name, "slot": float(slot)}
        with self._tx() as conn:
            if conn.execute(self._periodic_sql("ADVANCE"), params).fetchone() is None:
                return None
            (inserted,) = self._enqueue_on(conn, [job])
            self._set_extras(conn, [job], [inserted])  # the task's deadline_in / notice_after
            hit("periodic_tx")
            conn.execute(
                self._periodic_sql("SET_JOB"),
                {"name": name, "slot": float(slot), "job_id": inserted.id},
            )
        return inserted

    # -- parked / deadlines --

    def _set_extras(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], inserted: list[Inserted]
    ) -> list[Inserted]:
        """Parked state and deadline columns of the rows just inserted (same transaction)."""
        for job, ins in zip(jobs, inserted, strict=True):
            if ins.created and job.has_extras:
                conn.execute(
                    dl.sql("SET_EXTRAS", self.options.schema),
                    {
                        "id": ins.id,
                        "park": job.park,
                        "park_ttl": job.park_ttl,
                        "deadline": job.deadline,
                        "deadline_in": job.deadline_in,
                        "notice_after": job.notice_after,
                    },
                )
        return inserted

    def adopt(self, job_id: int) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(
                dl.sql("ADOPT", self.options.schema), {"at": self._at(), "id": job_id}
            )
            return cur.rowcount == 1

    def cancel_parked(self, job_id: int) -> bool:
        at = self._at()
        with self._tx() as conn:  # the cancel and its batch's close commit together
            cur = conn.execute(
                dl.sql("CANCEL_PARKED", self.options.schema), {"at": at, "id": job_id}
            )
            if cur.rowcount != 1:
                return False
            self._batches.close_for_jobs(conn, [job_id], at)
            return True

    def sweep(self, hook_max_attempts: int, limit: int = 500) -> SweepSummary:
        schema = self.options.schema
        params: dict[str, Any] = {
            "at": self._at(),
            "limit": limit,
            "prefix": HOOK_TASK_PREFIX,
            "max_attempts": hook_max_attempts,
        }
        expired: list[int] = []
        queues: set[str] = set()
        with self._tx() as conn:
            row = conn.execute(self._sql["CLOCK"], {"at": params["at"]}).fetchone()
            now = float(row[0]) if row else self.now()
            for name, message in (
                ("EXPIRE_PAST_DEADLINE", "deadline passed before the job finished"),
                ("EXPIRE_PARKED", "park TTL passed before the job was adopted"),
            ):
                cur = conn.execute(dl.sql(name, schema), {**params, "message": message})
                for job_id, queue in cur.fetchall():
                    expired.append(int(job_id))
                    queues.add(queue)
            self._batches.close_for_jobs(conn, expired, params["at"])  # same transaction
            rows = conn.execute(dl.sql("NOTICE_SLOW", schema), params).fetchall()
            noticed = [int(r[0]) for r in rows]
            queues.update(r[1] for r in rows)
            for queue in sorted(queues):  # wake idle workers for the hook jobs
                conn.execute(self._sql["NOTIFY"], {"channel": self.channel, "queue": queue})
        return SweepSummary(at=now, expired=tuple(sorted(expired)), noticed=tuple(sorted(noticed)))

    # -- limits --

    def _set_limits(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the limits of the new limited jobs (same transaction as their insert)."""
        rows = [
            (ins.id, job.limit)
            for job, ins in zip(jobs, out, strict=True)
            if job.limit is not None and ins.created
        ]
        if not rows:
            return
        conn.execute(
            self._lsql["SET_JOB_LIMITS"],
            {
                "ids": [i for i, _ in rows],
                "keys": [lim.key for _, lim in rows],
                "concurrencies": [lim.concurrency for _, lim in rows],
                "rates": [lim.rate for _, lim in rows],
                "pers": [lim.per for _, lim in rows],
            },
        )

    def _lock_keys(self, conn: psycopg.Connection[Any], keys: Sequence[str]) -> None:
        """Advisory transaction locks on ``keys``, in one global order (no deadlocks)."""
        for number in sorted({lock_id(k) for k in keys}):
            conn.execute(self._lsql["LOCK_KEY"], {"ns": self._limit_ns, "key": number})

    def _claim_limited(
        self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
    ) -> list[Claimed]:
        """Claim up to ``limit`` limited jobs of ``queue``: find the keys that seem to have
        room (no lock), then in one transaction lock those keys and claim under a fresh
        snapshot (see store/postgres/limits.py for why this is exact)."""
        if limit <= 0:
            return []
        at = self._at()
        params: dict[str, Any] = {"at": at, "queue": queue, "tasks": list(tasks), "limit": limit}
        with self._tx(transaction=False) as conn:
            keys = [r[0] for r in conn.execute(self._lsql["LIMITED_KEYS"], params).fetchall()]
        if not keys:
            return []
        params.update(keys=keys, scan=max(64, 4 * limit), lease=lease, worker_id=worker_id)
        with self._tx() as conn:
            self._lock_keys(conn, keys)
            rows = conn.execute(self._lsql["CLAIM_LIMITED"], params).fetchall()
        self._limited_ids.update(int(r[0]) for r in rows)
        return self._claimed_in_order(rows)

    def _limited_finished(self, job_ids: Sequence[int]) -> None:
        """Wake every worker (NOTIFY) when limited jobs claimed here finished: a slot freed,
        and on PostgreSQL the claim in the same statement could not see it."""
        freed = self._limited_ids.intersection(job_ids)
        if not freed:
            return
        self._limited_ids.difference_update(freed)
        self._notify_limits()

    def _notify_limits(self) -> None:
        with self._tx(transaction=False) as conn:
            conn.execute(self._lsql["NOTIFY"], {"channel": self.channel})

    def acquire_hold(self, name: str, concurrency: int, lease: float, holder: str) -> int | None:
        params = {
            "at": self._at(), "name": name, "holder": holder, "lease": lease,
            "concurrency": concurrency,
        }  # fmt: skip
        with self._tx() as conn:
            self._lock_keys(conn, [name])
            conn.execute(self._lsql["DELETE_EXPIRED_HOLDS"], params)
            row = conn.execute(self._lsql["ACQUIRE_HOLD"], params).fetchone()
        return int(row[0]) if row else None

    def extend_hold(self, hold_id: int, lease: float) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(
                self._lsql["EXTEND_HOLD"], {"at": self._at(), "id": hold_id, "lease": lease}
            )
            return cur.rowcount == 1

    def release_hold(self, hold_id: int) -> bool:
        with self._tx(transaction=False) as conn:
            gone = conn.execute(self._lsql["RELEASE_HOLD"], {"id": hold_id}).rowcount == 1
        if gone:
            self._notify_limits()
        return gone

    def limit_usage(self) -> list[LimitUsage]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._lsql["LIMIT_USAGE"], {"at": self._at()}).fetchall()
        return [
            LimitUsage(r[0], int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4]))
            for r in rows
        ]

    # -- blobs --

    @property
    def _bsql(self) -> dict[str, Any]:
        """The blob statements (durq.store.postgres.blobs), rendered for this schema once."""
        rendered: dict[str, Any] | None = getattr(self, "_blob_sql", None)
        if rendered is None:
            rendered = {
                name: render(getattr(bq, name), self.options.schema)
                for name in dir(bq)
                if name.isupper()
            }
            self._blob_sql = rendered
        return rendered

    @staticmethod
    def _blob_record(r: Sequence[Any]) -> BlobRecord:
        return BlobRecord(
            r[0], int(r[1]), bool(r[2]), int(r[3]), r[4], r[5], float(r[6]), float(r[7])
        )

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
        sql = self._bsql
        at = self._at()
        with self._tx() as conn:
            if (
                job_id is not None
                and not conn.execute(sql["JOB_EXISTS"], {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            params: dict[str, Any] = {"key": key, "size": size, "name": name, "at": at}
            if only_if_stored:
                if conn.execute(sql["TOUCH_STORED"], params).fetchone() is None:
                    return "absent"
            else:
                conn.execute(sql["UPSERT_BLOB"], params)
            if holder is not None:
                ref = {"key": key, "holder": holder, "job_id": job_id, "at": at}
                if conn.execute(sql["INSERT_REF"], ref).fetchone() is not None:
                    conn.execute(sql["ADD_HOLDS"], {"key": key, "n": 1})
            if alias is not None:
                conn.execute(sql["UPSERT_ALIAS"], {"name": alias, "key": key, "at": at})
        return "ok"

    def blob_ref(self, key: str, holder: str, job_id: int | None) -> RefResult:
        sql = self._bsql
        at = self._at()
        with self._tx() as conn:
            if (
                job_id is not None
                and not conn.execute(sql["JOB_EXISTS"], {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            # The touch locks the blob row first: a concurrent release waits, then re-checks
            # holds on the row we changed and misses it; a release that won finds no row here.
            if conn.execute(sql["TOUCH_BLOB"], {"key": key, "at": at}).fetchone() is None:
                return "no_blob"
            ref = {"key": key, "holder": holder, "job_id": job_id, "at": at}
            if conn.execute(sql["INSERT_REF"], ref).fetchone() is None:
                return "held"
            conn.execute(sql["ADD_HOLDS"], {"key": key, "n": 1})
        return "added"

    def blob_unref(self, key: str, holder: str, release: bool) -> BlobRelease:
        sql = self._bsql
        with self._tx() as conn:
            conn.execute(sql["LOCK_BLOB"], {"key": key})  # the blob row first (see blobs.py)
            if conn.execute(sql["DELETE_REF"], {"key": key, "holder": holder}).fetchone() is None:
                return BlobRelease(False, False)
            dead = len(conn.execute(sql["DELETE_DEAD_REFS_OF"], {"key": key}).fetchall())
            row = conn.execute(sql["ADD_HOLDS"], {"key": key, "n": -1 - dead}).fetchone()
            if not release or row is None or row[0] > 0:
                return BlobRelease(True, False)
            won = conn.execute(sql["RELEASE_DROP"], {"key": key}).fetchone()
            if won is not None:
                conn.execute(sql["DELETE_ALIASES_OF"], {"keys": [key]})
            else:
                won = conn.execute(sql["RELEASE_KEEP"], {"key": key}).fetchone()
        return BlobRelease(True, won is not None, int(won[1]) if won else 0)

    def blob_collect(self, grace: float, limit: int) -> BlobCollected:
        sql = self._bsql
        with self._tx() as conn:
            dead: dict[str, int] = {}
            keys = [r[0] for r in conn.execute(sql["DEAD_REF_KEYS"], {"limit": limit})]
            if keys:  # blob rows first, in key order, then their references
                conn.execute(sql["LOCK_BLOBS"], {"keys": keys}).fetchall()
            for key in keys:
                n = len(conn.execute(sql["DELETE_DEAD_REFS_OF"], {"key": key}).fetchall())
                if n:
                    dead[key] = n
                    conn.execute(sql["ADD_HOLDS"], {"key": key, "n": -n})
            params = {"at": self._at(), "grace": float(grace), "limit": limit}
            dropped = conn.execute(sql["COLLECT_DROP"], params).fetchall()
            kept = conn.execute(sql["COLLECT_KEEP"], params).fetchall()
            empty = conn.execute(sql["DROP_EMPTY"]).fetchall()
            gone = [r[0] for r in dropped] + [r[0] for r in empty]
            if gone:
                conn.execute(sql["DELETE_ALIASES_OF"], {"keys": gone})
        released = [(r[0], int(r[1])) for r in dropped + kept]
        return BlobCollected(released, sum(dead.values()), len(empty))

    def blob_stored(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["STORED_AMONG"], {"keys": list(keys)}).fetchall()
        return {r[0] for r in rows}

    def blob_get(self, key: str) -> BlobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._bsql["SELECT_BLOB"], {"key": key}).fetchone()
        return self._blob_record(row) if row else None

    def blob_list(self, after: str, limit: int) -> list[BlobRecord]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(
                self._bsql["LIST_BLOBS"], {"after": after, "limit": limit}
            ).fetchall()
        return [self._blob_record(r) for r in rows]

    def blob_holders(self, key: str) -> list[tuple[str, int | None, float]]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["SELECT_REFS"], {"key": key}).fetchall()
        return [(r[0], None if r[1] is None else int(r[1]), float(r[2])) for r in rows]

    def blob_aliases(self, key: str) -> list[str]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["SELECT_ALIASES"], {"key": key}).fetchall()
        return [r[0] for r in rows]

    def blob_set_external(self, key: str, external_id: str | None) -> bool:
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._bsql["SET_EXTERNAL"], {"key": key, "external_id": external_id}
            ).fetchone()
        return row is not None

    def blob_alias(self, name: str, key: str) -> bool:
        sql = self._bsql
        with self._tx() as conn:
            if conn.execute(sql["BLOB_EXISTS"], {"key": key}).fetchone() is None:
                return False
            conn.execute(sql["UPSERT_ALIAS"], {"name": name, "key": key, "at": self._at()})
        return True

    def blob_unalias(self, name: str) -> bool:
        with self._tx(transaction=False) as conn:
            return conn.execute(self._bsql["DELETE_ALIAS"], {"name": name}).rowcount == 1

    def blob_lookup(self, name: str) -> BlobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._bsql["LOOKUP_ALIAS"], {"name": name}).fetchone()
        return self._blob_record(row) if row else None

    # -- soak --

    def storage_bytes(self) -> int:
        with self._tx(transaction=False) as conn:
            row = conn.execute(soak_sql.STORAGE_BYTES, {"schema": self.options.schema}).fetchone()
        return int(row[0]) if row else 0

    # -- hooks --

    def _set_hooks(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the on_fail flags and hook queues of the new jobs (same transaction)."""
        rows = [
            (ins.id, job)
            for job, ins in zip(jobs, out, strict=True)
            if ins.created and job.has_hooks
        ]
        if not rows:
            return
        conn.execute(
            hk.sql("SET_HOOKS", self.options.schema),
            {
                "ids": [i for i, _ in rows],
                "flags": [job.on_fail for _, job in rows],
                "queues": [job.hook_queue for _, job in rows],
            },
        )

    def _fail_hooks(
        self,
        conn: psycopg.Connection[Any],
        ids: Sequence[int],
        at: float | None,
        flagged: bool,
        tasks: Sequence[str] = (),
    ) -> None:
        """Insert the on_fail hook jobs of the jobs among ``ids`` that are failed now, inside
        the caller's transaction (the one that failed them), and wake their queues."""
        if not ids:
            return
        from durq.model.jobs import HOOK_MAX_ATTEMPTS

        conn.execute(
            hk.sql("INSERT_FAIL_HOOKS", self.options.schema),
            {
                "ids": [int(i) for i in ids],
                "prefix": HOOK_TASK_PREFIX,
                "at": at,
                "max_attempts": HOOK_MAX_ATTEMPTS,
                "flagged": flagged,
                "tasks": list(tasks),
                "channel": self.channel,
            },
        ).fetchall()

    def find(self, queue: str, key: str) -> JobRecord | None:
        """The job of ``queue`` holding idempotency key ``key``, or None."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._sql["SELECT_JOB_BY_KEY"], {"queue": queue, "key": key}
            ).fetchone()
        return JobRecord(*row) if row else None
