"""Task limits on PostgreSQL: limited claims under advisory locks, and holds (SQL in
:mod:`.limits`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.model import Claimed, Inserted, NewJob
from durq.model.limits import LimitUsage, lock_id
from durq.store.postgres.base import PostgresBase


class LimitingMixin(PostgresBase):
    """Concurrency and rate limits: the limited claim, holds, usage and their wake-ups."""

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

    def extend_job_holds(self, holds: Sequence[tuple[int, int]], lease: float) -> None:
        if not holds:
            return
        params = {
            "at": self._at(), "lease": lease,
            "ids": [i for i, _ in holds], "tokens": [t for _, t in holds],
        }  # fmt: skip
        with self._tx(transaction=False) as conn:
            conn.execute(self._lsql["EXTEND_JOB_HOLDS"], params)

    def release_job_holds(self, holds: Sequence[tuple[int, int]]) -> int:
        if not holds:
            return 0
        params = {"ids": [i for i, _ in holds], "tokens": [t for _, t in holds]}
        with self._tx(transaction=False) as conn:
            gone = conn.execute(self._lsql["RELEASE_JOB_HOLDS"], params).rowcount
        if gone:
            self._notify_limits()  # slots freed: idle workers claim
        return gone

    def limit_usage(self) -> list[LimitUsage]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._lsql["LIMIT_USAGE"], {"at": self._at()}).fetchall()
        return [
            LimitUsage(r[0], int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4]))
            for r in rows
        ]
