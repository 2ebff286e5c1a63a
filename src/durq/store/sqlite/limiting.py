"""Task limits on SQLite: limited claims and holds (SQL in :mod:`.limits`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from durq.model import Claimed, Inserted, NewJob
from durq.model.limits import LimitUsage
from durq.store.sqlite import limits as lq
from durq.store.sqlite.base import SqliteBase


class LimitingMixin(SqliteBase):
    """Concurrency and rate limits: the limited claim, holds and usage."""

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
        (inside the caller's write transaction), and log the starts of rate-limited ones.
        The caller runs it only when ``queries.CLAIM_PASSES`` found such a job waiting in
        this transaction (the probe that saves the claim's ~180 µs on a queue without any)."""
        if limit <= 0:
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
        return [
            Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10], float(r[9]))
            for r in rows
        ]

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

    def extend_job_holds(self, holds: Sequence[tuple[int, int]], lease: float) -> None:
        if not holds:
            return
        conn = self._conn()
        with self._write(urgent=True):  # like a heartbeat: it keeps a slot alive
            now = self.now()
            conn.executemany(
                lq.EXTEND_JOB_HOLD,
                [{"id": i, "token": t, "now": now, "expires": now + lease} for i, t in holds],
            )

    def release_job_holds(self, holds: Sequence[tuple[int, int]]) -> int:
        if not holds:
            return 0
        conn = self._conn()
        with self._write():
            before = conn.total_changes
            conn.executemany(lq.RELEASE_JOB_HOLD, [{"id": i, "token": t} for i, t in holds])
            return conn.total_changes - before

    def limit_usage(self) -> list[LimitUsage]:
        rows = self._read(lq.LIMIT_USAGE, {"now": self.now()})
        return [
            LimitUsage(r[0], int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4]))
            for r in rows
        ]
