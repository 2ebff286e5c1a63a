"""Reading and admin on PostgreSQL: get, list, retry, cancel, purge, pending, find by key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.model import JobRecord
from durq.store.base import unique_key_held
from durq.store.postgres import queries as q
from durq.store.postgres.base import PostgresBase


class AdminMixin(PostgresBase):
    """Reads of job rows and the admin transitions on them."""

    def get(self, job_id: int) -> JobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._sql["SELECT_JOB"], {"id": job_id}).fetchone()
        return JobRecord(*row) if row else None

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
            "at": self._at(), "state": state, "ready": ready, "queue": queue,
            "task": task, "limit": limit, "tag": tag,
        }  # fmt: skip
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._sql["LIST_JOBS"], params).fetchall()
        return [JobRecord(*r) for r in rows]

    def retry(self, job_id: int) -> bool:
        with self._tx() as conn:  # the job and its batch (reopened) change together
            try:
                with conn.transaction():  # a savepoint: a unique violation undoes only this
                    cur = conn.execute(self._sql["RETRY"], {"at": self._at(), "id": job_id})
            except psycopg.errors.UniqueViolation as exc:  # jobs_unique_active
                raise unique_key_held(job_id) from exc
            row = cur.fetchone()
            if row is not None:
                self._batches.reopen_for_jobs(conn, [job_id])
                self._notify_replayed(conn)
                if row[1] is not None:  # its fair key gets its turn row again (fairness.py)
                    self._hold_turns(conn, [(row[0], row[1])])
            return row is not None

    def retry_matching(
        self,
        state: str,
        queue: str | None,
        task: str | None,
        after: int,
        upto: int,
        limit: int,
    ) -> tuple[list[int], int | None]:
        at = self._at()
        params = {
            "at": at, "state": state, "queue": queue, "task": task, "after": after,
            "upto": upto, "limit": limit,
        }  # fmt: skip
        with self._tx() as conn:  # the jobs and their batches (reopened) change together
            rows = conn.execute(self._sql["REPLAY_CANDIDATES"], params).fetchall()
            found = [int(r[0]) for r in rows]
            if not found:
                return [], None
            try:
                with conn.transaction():  # a savepoint
                    cur = conn.execute(self._sql["RETRY_IDS"], {"at": at, "ids": found})
                    rows = cur.fetchall()
            except psycopg.errors.UniqueViolation:  # two of the chunk share a unique key
                rows = []
                for job_id in found:  # one by one: the first of them wins, the rest wait
                    try:
                        with conn.transaction():
                            cur = conn.execute(self._sql["RETRY"], {"at": at, "id": job_id})
                            rows.extend((job_id, *r) for r in cur.fetchall())
                    except psycopg.errors.UniqueViolation:
                        continue
            ids = sorted(int(r[0]) for r in rows)
            if ids:
                self._batches.reopen_for_jobs(conn, ids)
                self._notify_replayed(conn)
                turns = [(r[1], r[2]) for r in rows if r[2] is not None]
                if turns:  # their fair keys get their turn rows again (fairness.py)
                    self._hold_turns(conn, turns)
        return ids, found[-1]

    def _notify_replayed(self, conn: psycopg.Connection[Any]) -> None:
        """With a replay's commit: the cancel watches of the workers look (an earlier body
        of a replayed job may still run somewhere: it is stopped, ``lease_lost``, once the
        replay is claimed, docs/features/replay.md), and idle workers wake to claim it (the
        listener wakes them on any NOTIFY)."""
        conn.execute(self._sql["NOTIFY"], {"channel": self.channel, "queue": q.CANCEL_PAYLOAD})

    def purge(self, queue: str, states: Sequence[str]) -> int:
        at = self._at()
        with self._tx() as conn:  # the delete and its batches' close commit together
            hit_batches = self._batches.batches_in_purge(conn, queue, states)
            cur = conn.execute(self._sql["PURGE"], {"queue": queue, "states": list(states)})
            self._batches.after_purge(conn, hit_batches, at)
            return cur.rowcount

    def purge_held(self, queue: str, states: Sequence[str]) -> int:
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._sql["PURGE_HELD"], {"queue": queue, "states": list(states)}
            ).fetchone()
        return int(row[0]) if row else 0

    def delete_failed(self, job_ids: Sequence[int]) -> int:
        """Delete those of ``job_ids`` that are failed, for good (one transaction, their
        batches closed if nothing is left to wait for); the count deleted."""
        if not job_ids:
            return 0
        at = self._at()
        with self._tx() as conn:
            batch_ids = self._batches.batches_of(conn, job_ids)
            cur = conn.execute(self._sql["DELETE_FAILED"], {"ids": list(job_ids)})
            if batch_ids:
                self._batches.close_batches(conn, batch_ids, at)
            return cur.rowcount

    def cancel(self, job_id: int) -> bool:
        at = self._at()
        with self._tx() as conn:  # the job and its batch (maybe completed) change together
            done = conn.execute(self._sql["CANCEL"], {"at": at, "id": job_id}).rowcount == 1
            if done:
                self._batches.close_for_jobs(conn, [job_id], at)
                self._deps.settle(conn, [job_id], at)
                # the worker running it (on any host) stops its body: durq.worker.stopping
                payload = {"channel": self.channel, "queue": q.CANCEL_PAYLOAD}
                conn.execute(self._sql["NOTIFY"], payload)
            return done

    def has_pending(self, queues: Sequence[str], tasks: Sequence[str]) -> bool:
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._sql["HAS_PENDING"], {"queues": list(queues), "tasks": list(tasks)}
            ).fetchone()
        return bool(row and row[0])

    def find(self, queue: str, key: str) -> JobRecord | None:
        """The job of ``queue`` holding idempotency key ``key``, or None."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._sql["SELECT_JOB_BY_KEY"], {"queue": queue, "key": key}
            ).fetchone()
        return JobRecord(*row) if row else None
