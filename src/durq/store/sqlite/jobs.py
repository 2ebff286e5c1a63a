"""The job life cycle on SQLite: enqueue, finish-and-claim, leases, release and the reaper."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from durq.errors import ConfigError
from durq.failpoints import hit
from durq.model import (
    SNOOZE_KIND,
    Claimed,
    Inserted,
    InsertedRows,
    NewJob,
    Outcome,
    ReapSummary,
)
from durq.store.sqlite import batches as sb
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite import queries as q
from durq.store.sqlite.base import SqliteBase
from durq.store.sqlite.connection import translate
from durq.store.sqlite.outbox import check_connection

T = TypeVar("T")


class JobsMixin(SqliteBase):
    """Enqueue, claim and finish, lease extension, progress, release and reap."""

    # -- enqueue --------------------------------------------------------------------------

    def _check_outbox(self, connection: Any) -> None:
        """Refuse a caller's connection that is not a ``sqlite3.Connection`` on this
        store's own file (:mod:`durq.store.sqlite.outbox`)."""
        if not isinstance(connection, sqlite3.Connection):
            raise ConfigError(
                f"connection= must be a sqlite3.Connection on {self.path}, "
                f"not {type(connection).__name__}"
            )
        check_connection(connection, self.options, schema=False)

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        if connection is None and len(jobs) == 1 and jobs[0].plain:
            # One row, one statement (SQLite's autocommit: the statement is its transaction)
            # through the fair writer (an ordinary writer steps aside for heartbeats); its id
            # is the connection's last rowid (RETURNING costs SQLite an ephemeral table).
            # Without meta, the statement that writes NULL itself (binding None costs the
            # sqlite3 module an adapter lookup; see queries.insert_jobs).
            job = jobs[0]
            now = self.now()
            run_at = now + job.delay if job.run_at is None else job.run_at
            meta = job.meta
            if meta is None:
                cur = self._write_one(
                    q.INSERT_ONE_PLAIN_BARE,
                    (job.queue, job.task, job.payload, job.priority, run_at, job.max_attempts, now),
                )  # fmt: skip
            else:
                cur = self._write_one(
                    q.INSERT_ONE_PLAIN,
                    (job.queue, job.task, job.payload, job.priority, run_at, job.max_attempts,
                     now, meta),
                )  # fmt: skip
            job_id = cur.lastrowid  # the row's id: this statement was the connection's last
            assert job_id is not None
            return [Inserted(job_id, True, run_at, now)]
        if connection is not None:
            self._check_outbox(connection)
        if any(job.batch_id is not None for job in jobs):
            return self._enqueue_in_batch(jobs, connection)
        if connection is not None:
            try:
                inserted = self._insert(connection, jobs, explicit_ids=False)
                return self._set_extras(connection, jobs, inserted)
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
        conn = self._conn()
        simple = all(map(_is_plain, jobs))  # one check a row, not one per pass
        with self._write():
            if simple:
                return self._insert_plain(conn, jobs)
            inserted = self._insert(conn, jobs, explicit_ids=True)
            return self._set_extras(conn, jobs, inserted)

    def _insert_payloads(
        self, template: NewJob, payloads: Sequence[str]
    ) -> tuple[range, float, float]:
        """Write one row per payload, ``template`` (plain) with that payload, in one
        transaction of our own: one statement per :data:`ROWS_PER_INSERT` rows that binds
        the template's values once and each row's id and payload
        (``queries.insert_payloads``). Returns the ids, ``run_at`` and ``created_at``."""
        t = template
        conn = self._conn()
        with self._write():
            now = self.now()
            run_at = now + t.delay if t.run_at is None else t.run_at
            first = conn.execute(q.LAST_JOB_ID).fetchone()[0] + 1
            ids = range(first, first + len(payloads))
            shared = [t.queue, t.task, t.priority, run_at, t.max_attempts, now]
            meta = t.meta is not None
            if meta:
                shared.append(t.meta)
            limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            size = max(1, min(ROWS_PER_INSERT, (limit - len(shared)) // 2))
            for start in range(0, len(payloads), size):
                chunk = payloads[start : start + size]
                params = shared.copy()
                for job_id, body in zip(ids[start : start + size], chunk, strict=True):
                    params += (job_id, body)
                conn.execute(q.insert_payloads(len(chunk), meta), params)
        return ids, run_at, now

    def _insert_plain(self, conn: sqlite3.Connection, jobs: Sequence[NewJob]) -> list[Inserted]:
        """:meth:`_insert` of rows that are all plain (:attr:`NewJob.plain`: no key, no
        unique key, nothing to set after), inside our own ``BEGIN IMMEDIATE``: ids from
        ``sqlite_sequence``, the rows in multi-row INSERTs (:func:`insert_rows`)."""
        now = self.now()
        next_id = conn.execute(q.LAST_JOB_ID).fetchone()[0]
        metas = any(job.meta is not None for job in jobs)
        params: list[Any] = []
        out: list[Inserted] = []
        for job in jobs:
            run_at = now + job.delay if job.run_at is None else job.run_at
            next_id += 1
            params += (
                next_id, job.queue, job.task, job.payload, job.priority, run_at,
                job.max_attempts, now,
            )  # fmt: skip
            if metas:
                params.append(job.meta)
            out.append(Inserted(next_id, True, run_at, now))
        insert_rows(conn, params, metas)
        return out

    def enqueue_rows(
        self, job: NewJob, payloads: Sequence[str], build: Callable[[InsertedRows], T]
    ) -> T:
        """One plain job per payload (see :meth:`durq.store.base.Store.enqueue_rows`): ids
        from ``sqlite_sequence`` under the write lock, one statement per
        :data:`ROWS_PER_INSERT` rows that binds the template's values once
        (:meth:`_insert_payloads`); ``build`` runs after the commit.

        Raises:
            ValueError: ``job`` is not plain.
            StoreError: the database refused the rows; none of them was written.
        """
        if not job.plain:
            raise ValueError("enqueue_rows takes a plain job (no key, batch, hooks, ...)")
        if not payloads:
            return build(InsertedRows([], self.now(), self.now()))
        ids, run_at, now = self._insert_payloads(job, payloads)
        return build(InsertedRows(list(ids), run_at, now))

    def _insert(
        self,
        conn: sqlite3.Connection,
        jobs: Sequence[NewJob],
        *,
        explicit_ids: bool,
    ) -> list[Inserted]:
        """Insert on ``conn`` inside whatever transaction it has open.

        With ``explicit_ids`` (only under our own ``BEGIN IMMEDIATE``, where nobody else can
        insert) plain rows get ids from ``sqlite_sequence`` and go in multi-row INSERTs
        (:func:`insert_rows`); otherwise each row is inserted on its own and SQLite
        assigns its id. Rows that are all plain take :meth:`_insert_plain` instead.
        """
        now = self.now()
        out: list[Inserted] = []
        next_id = conn.execute(q.LAST_JOB_ID).fetchone()[0] if explicit_ids else 0
        # The plain rows' parameters, flat (insert_rows' layout); meta only when a row has one
        plain: list[Any] = []
        metas = explicit_ids and any(job.meta is not None for job in jobs)
        # unique keys of this insert: a later row with one holds no new job either (its
        # key is written on the first row only after the loop, by _set_workflow)
        uniques: dict[tuple[str, str, float | None], Inserted] = {}
        slot: tuple[str, str, float | None] | None = None  # the unique key of the row before
        for job in jobs:
            run_at = now + job.delay if job.run_at is None else job.run_at
            if slot is not None:  # the row before had a unique key: this is its job
                uniques[slot] = out[-1]
                slot = None
            if job.unique_key is not None:
                if plain:
                    insert_rows(conn, plain, metas)
                    plain = []
                slot = (job.queue, job.unique_key, job.unique_period)
                holder = uniques.get(slot) or self._unique_holder(conn, job, now)
                if holder is not None:
                    out.append(replace(holder, created=False))
                    continue
                if job.key is None:
                    row = {
                        "queue": job.queue, "task": job.task, "payload": job.payload,
                        "priority": job.priority, "run_at": run_at,
                        "max_attempts": job.max_attempts, "key": None, "created_at": now,
                        "meta": job.meta,
                    }  # fmt: skip
                    new_id = conn.execute(q.INSERT_ONE, row).fetchone()[0]
                    out.append(Inserted(new_id, True, run_at, now))
                    next_id = max(next_id, new_id)
                    continue
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
                plain += (
                    next_id, job.queue, job.task, job.payload, job.priority, run_at,
                    job.max_attempts, now,
                )  # fmt: skip
                if metas:
                    plain.append(job.meta)
                out.append(Inserted(next_id, True, run_at, now))
                continue
            # Keyed rows go one by one: a conflict returns the existing job.
            if plain:
                insert_rows(conn, plain, metas)
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
            insert_rows(conn, plain, metas)
        self._set_limits(conn, jobs, out)
        self._set_hooks(conn, jobs, out)
        self._set_workflow(conn, jobs, out)
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
        limited: int | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        conn = self._conn()
        applied: list[bool] = []
        claimed: list[Claimed] = []
        capped: list[Claimed] = []  # jobs with a limit: at most `limited`, returned first
        limited = limit if limited is None else min(limited, limit)
        tasks_json = json.dumps(list(tasks))
        if not outcomes and (limit <= 0 or not self._ready(conn, queues, tasks_json)):
            return applied, claimed  # nothing to write: no write lock taken
        with self._write(urgent=bool(outcomes)):  # outcomes go before ordinary writers
            now = self.now()  # after the lock is ours: a wait for it must not shorten leases
            applied = self._finish_all(conn, outcomes, now)
            if outcomes:
                self._close_batches_of(outcomes, applied, now)
                finished = [o.job_id for o, done in zip(outcomes, applied, strict=True) if done]
                deps.settle(
                    conn, finished, now, self.codec, self.payload_limit
                )  # children of the jobs that just ended
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
                    room = min(limit - len(claimed) - len(capped), limited - len(capped))
                    # once per queue: nothing adds a limited or fair job meanwhile
                    any_limited, fair = conn.execute(q.CLAIM_PASSES, params).fetchone()
                    if any_limited:
                        capped.extend(self._claim_limited(conn, params, room))
                    if fair:
                        n = limit - len(claimed) - len(capped)
                        claimed.extend(self._claim_fair(conn, params, n, probed=True))
                    if len(claimed) + len(capped) >= limit:
                        break
                    params["limit"] = limit - len(claimed) - len(capped)
                    rows = conn.execute(q.CLAIM, params).fetchall()
                    rows.sort(key=lambda r: (r[8], r[9], r[0]))
                    claimed.extend(
                        Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10], float(r[9]))
                        for r in rows
                    )
                    left = limit - len(claimed) - len(capped)
                    if left > 0 and fair:  # slots left: more rounds over the fair keys
                        claimed.extend(self._claim_fair(conn, params, left, rounds=limit))
                    if len(claimed) + len(capped) >= limit:
                        break
        return applied, capped + claimed

    def give_back(self, leases: Sequence[tuple[int, int]]) -> list[int]:
        if not leases:
            return []
        conn = self._conn()
        back: list[int] = []
        with self._write(urgent=True):
            for job_id, token in leases:
                if conn.execute(q.GIVE_BACK, {"id": job_id, "token": token}).rowcount == 1:
                    back.append(job_id)
        return back

    def paused_among(self, queues: Sequence[str]) -> set[str]:
        rows = self._read(q.PAUSED_AMONG, {"queues": json.dumps(list(queues))})
        return {r[0] for r in rows}

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

    @classmethod
    def _finish_all(
        cls, conn: sqlite3.Connection, outcomes: Sequence[Outcome], now: float
    ) -> list[bool]:
        """Write ``outcomes`` (each fenced by its lease token); whether each was applied,
        in order. Successes go in one statement (``FINISH_SUCCEEDED_MANY``), the rest
        one statement each, and so does a success whose result holds a NUL (a codec's
        stored text: SQLite's JSON would cut it there) or is long (:data:`JOIN_MAX`)."""
        wins = [o for o in outcomes if _joinable(o)]
        many = len(wins) > 1 and len({o.job_id for o in outcomes}) == len(outcomes)
        done: set[int] = set()
        if many:  # (one job twice, two attempts' outcomes: RETURNING could not tell them apart)
            rows = json.dumps([[o.job_id, o.lease_token, o.result] for o in wins])
            cur = conn.execute(q.FINISH_SUCCEEDED_MANY, {"rows": rows, "now": now})
            done = {r[0] for r in cur.fetchall()}
        applied = []
        for o in outcomes:
            if many and _joinable(o):
                applied.append(o.job_id in done)
            else:
                applied.append(cls._finish_one(conn, o, now))
        return applied

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
        if o.kind == SNOOZE_KIND:
            params["run_at"], params["max_snoozes"] = now + o.delay, o.max_snoozes
            return conn.execute(q.FINISH_SNOOZE, params).rowcount == 1
        return conn.execute(q.FINISH_FAILED, params).rowcount == 1

    def extend_leases(
        self, leases: Sequence[tuple[int, int]], lease: float
    ) -> list[tuple[int, int]]:
        if not leases:
            return []
        conn = self._conn()
        lost: list[tuple[int, int]] = []
        with self._write(urgent=True):  # a heartbeat goes before ordinary writers
            expires = self.now() + lease  # after the lock is ours, not before the wait for it
            for job_id, token in leases:
                cur = conn.execute(
                    q.EXTEND_LEASE, {"id": job_id, "token": token, "expires": expires}
                )
                if cur.rowcount != 1:
                    lost.append((job_id, token))
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
                deps.settle(conn, [job_id], params["now"], self.codec, self.payload_limit)
                self._fail_hooks(conn, [job_id], params["now"], flagged=not on_fail)
        return (row[0], row[1]) if row else None

    def reap(self, fail_tasks: Sequence[str] = ()) -> ReapSummary:
        conn = self._conn()
        with self._write():
            now = self.now()
            self._raise_clock_mark(conn, now)
            rows = conn.execute(q.REAP, {"now": now}).fetchall()
            sb.close_for_jobs(conn, [r[0] for r in rows if r[1] == "failed"], now)
            failed = [r[0] for r in rows if r[1] == "failed"]
            deps.settle(conn, failed, now, self.codec, self.payload_limit)
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


#: Rows per multi-row INSERT: 9 parameters each, within SQLite's default limit of 32,766
#: variables (3.32+; a build with a lower limit gets smaller chunks, see :func:`insert_rows`).
ROWS_PER_INSERT = 500


_is_plain = NewJob.plain.fget  # type: ignore[attr-defined]  # (no generator frame a row)


def insert_rows(conn: sqlite3.Connection, params: list[Any], meta: bool) -> None:
    """Insert plain rows (explicit ids, no key) with one multi-row ``INSERT … VALUES (…),
    (…)`` statement per chunk of :data:`ROWS_PER_INSERT`.

    ``params`` holds the rows' parameters one after the other, each row's as
    :data:`durq.store.sqlite.queries.INSERT_JOB_COLUMNS` says: with ``meta`` nine a row,
    without (every row's meta is NULL) eight, the NULL written in the statement.

    One statement per chunk instead of one step per row (``executemany``): SQLite parses
    and plans it once per chunk size (the sqlite3 module caches statements by their text)
    and runs the whole chunk in C. Measured on the 2-core test machine: see
    docs/features/performance.md.
    """
    width = q.INSERT_JOB_COLUMNS if meta else q.INSERT_JOB_COLUMNS - 1
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    size = max(1, min(ROWS_PER_INSERT, limit // width)) * width
    for start in range(0, len(params), size):
        chunk = params[start : start + size] if len(params) > size else params
        conn.execute(q.insert_jobs(len(chunk) // width, meta), chunk)


#: Longest result (characters) written in ``FINISH_SUCCEEDED_MANY``; longer ones go one
#: statement each. The batch is one bound string: 1,000 outcomes of results up to the
#: 1 MiB ``result_limit``, escaped again inside the array, could pass SQLite's
#: SQLITE_MAX_LENGTH (1e9 bytes) and fail the whole batch (and stop the claimer), where one
#: statement per result never comes near it; and a long result's own copy costs more than
#: the statement the batch saves.
JOIN_MAX = 64 * 1024


def _joinable(o: Outcome) -> bool:
    """Whether ``o`` can go in ``FINISH_SUCCEEDED_MANY``: a success whose result is short
    (:data:`JOIN_MAX`) and survives SQLite's JSON unchanged (no NUL; durq's own JSON
    escapes it, a codec may not)."""
    result = o.result
    return o.kind == "succeeded" and (
        result is None or (len(result) <= JOIN_MAX and "\x00" not in result)
    )
