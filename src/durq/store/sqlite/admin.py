"""Reading and admin on SQLite: get, list, retry, cancel, purge, pending checks, find by key."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from durq.model import JobRecord
from durq.store.base import unique_key_held
from durq.store.sqlite import batches as sb
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite import limits as lq
from durq.store.sqlite import queries as q
from durq.store.sqlite.base import SqliteBase
from durq.store.sqlite.fairness import ADD_TURNS_OF


class AdminMixin(SqliteBase):
    """Reads of job rows and the admin transitions on them."""

    def get(self, job_id: int) -> JobRecord | None:
        rows = self._read(q.SELECT_JOB, {"id": job_id})
        return JobRecord(*rows[0]) if rows else None

    def list_jobs(
        self,
        *,
        state: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        tag: str | None = None,
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
            "tag": tag,
            "limit": limit,
        }
        return [JobRecord(*r) for r in self._read(q.LIST_JOBS, params)]

    def retry(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            try:
                cur = conn.execute(q.RETRY, {"id": job_id, "now": self.now()})
            except sqlite3.IntegrityError as exc:  # jobs_unique_active: the statement undid
                raise unique_key_held(job_id) from exc
            if cur.rowcount == 1:
                sb.reopen_for_jobs(conn, [job_id])
                conn.execute(ADD_TURNS_OF, {"ids": json.dumps([job_id])})  # a fair key's turn
        return cur.rowcount == 1

    def retry_matching(
        self,
        state: str,
        queue: str | None,
        task: str | None,
        after: int,
        upto: int,
        limit: int,
    ) -> tuple[list[int], int | None]:
        conn = self._conn()
        params: dict[str, object] = {
            "state": state, "queue": queue, "task": task, "after": after, "upto": upto,
            "limit": limit,
        }  # fmt: skip
        with self._write():
            now = self.now()
            found = [r[0] for r in conn.execute(q.REPLAY_CANDIDATES, params).fetchall()]
            if not found:
                return [], None
            try:
                rows = conn.execute(q.RETRY_IDS, {"ids": json.dumps(found), "now": now})
                ids = sorted(r[0] for r in rows.fetchall())
            except sqlite3.IntegrityError:  # two of the chunk share an active unique key
                ids = []
                for job_id in found:  # one by one: the first of them wins, the rest wait
                    try:
                        if conn.execute(q.RETRY, {"id": job_id, "now": now}).rowcount == 1:
                            ids.append(job_id)
                    except sqlite3.IntegrityError:
                        continue
            if ids:
                sb.reopen_for_jobs(conn, ids)
                conn.execute(ADD_TURNS_OF, {"ids": json.dumps(ids)})
        return ids, found[-1]

    def purge(self, queue: str, states: Sequence[str]) -> int:
        conn = self._conn()
        states_json = json.dumps(list(states))
        with self._write():
            hit_batches = sb.batches_in_purge(conn, queue, states_json)
            cur = conn.execute(q.PURGE, {"queue": queue, "states": states_json})
            sb.after_purge(conn, hit_batches, self.now())  # same transaction
        return cur.rowcount

    def purge_held(self, queue: str, states: Sequence[str]) -> int:
        params = {"queue": queue, "states": json.dumps(list(states))}
        return int(self._read(q.PURGE_HELD, params)[0][0])

    def delete_failed(self, job_ids: Sequence[int]) -> int:
        """Delete those of ``job_ids`` that are failed, for good (one transaction, their
        batches closed if nothing is left to wait for); the count deleted."""
        if not job_ids:
            return 0
        conn = self._conn()
        with self._write():
            batch_ids = sb.batches_of(conn, job_ids)
            cur = conn.execute(q.DELETE_FAILED, {"ids": json.dumps(list(job_ids))})
            if batch_ids:
                sb.close_batches(conn, batch_ids, self.now())
        return cur.rowcount

    def cancel(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            now = self.now()
            # a running body keeps its limit slot until its worker reports it gone
            conn.execute(lq.HOLD_CANCELLED, {"id": job_id, "now": now})
            cur = conn.execute(q.CANCEL, {"id": job_id, "now": now})
            if cur.rowcount == 1:
                sb.close_for_jobs(conn, [job_id], now)
                deps.settle(conn, [job_id], now, self.codec, self.payload_limit)
        return cur.rowcount == 1

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool:
        params = {"queues": json.dumps(list(queues)), "tasks": json.dumps(list(tasks))}
        return bool(self._read(q.HAS_PENDING, params)[0][0])

    def find(self, queue: str, key: str) -> JobRecord | None:
        """The job of ``queue`` holding idempotency key ``key``, or None."""
        rows = self._read(q.SELECT_JOB_BY_KEY, {"queue": queue, "key": key})
        return JobRecord(*rows[0]) if rows else None
