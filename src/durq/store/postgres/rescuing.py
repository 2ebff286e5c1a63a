"""Rescue in seconds on PostgreSQL: liveness beats, and the return of a dead worker's jobs
(statements in :mod:`.rescue_queries`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.model import RescueSummary
from durq.store.postgres import rescue_queries as rq
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render


class RescuingMixin(PostgresBase):
    """``beat_worker``, ``local_workers`` and ``rescue`` (see :class:`durq.store.base.Store`)."""

    def _rq(self, name: str) -> Any:
        """A statement of :mod:`durq.store.postgres.rescue_queries`, rendered once."""
        cache: dict[str, Any] = self.__dict__.setdefault("_rq_sql", {})
        if name not in cache:
            cache[name] = render(getattr(rq, name), self.options.schema)
        return cache[name]

    def beat_worker(
        self, worker_id: str, rescue_after: float | None, proc: str | None
    ) -> int | None:
        params = {"at": self._at(), "id": worker_id, "rescue_after": rescue_after, "proc": proc}
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._rq("BEAT_WORKER"), params).fetchone()
        return None if row is None else int(row[0])

    def local_workers(self, host: str) -> list[tuple[str, int, str]]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._rq("LOCAL_WORKERS"), {"host": host}).fetchall()
        return [(r[0], int(r[1]), r[2]) for r in rows]

    def rescue(self, dead: Sequence[str] = (), fail_tasks: Sequence[str] = ()) -> RescueSummary:
        at = self._at()
        with self._tx(transaction=False) as conn:
            stale = conn.execute(self._rq("STALE_HOLDERS"), {"at": at}).fetchall()
        if not stale and not dead:
            return RescueSummary(at=self.now())  # the common case: one read
        with self._tx() as conn:
            params: dict[str, Any] = {"at": at, "dead": list(dead)}
            ids = [r[0] for r in conn.execute(self._rq("DEAD_WORKERS"), params).fetchall()]
            if not ids:
                return RescueSummary(at=self.now())
            params["ids"] = ids
            rows = conn.execute(self._rq("RESCUE_JOBS"), params).fetchall()
            failed = [int(r[0]) for r in rows if r[1] == "failed"]
            self._batches.close_for_jobs(conn, failed, at)
            self._deps.settle(conn, failed, at)
            self._fail_hooks(conn, failed, at, flagged=True, tasks=fail_tasks)
            conn.execute(self._rq("MARK_RESCUED"), {"ids": ids})
            if dead:
                conn.execute(self._rq("FORGET_WORKERS"), {"ids": list(dead)})
            if rows:  # wake the workers: the rescued jobs are ready now; and the cancel
                # watch of a rescued worker still running their bodies stops them (lease_lost)
                payload = {"channel": self.channel, "queue": self._sql["CANCEL_PAYLOAD"]}
                conn.execute(self._sql["NOTIFY"], payload)
        return RescueSummary(
            at=self.now(),
            workers=tuple(ids),
            recovered=sum(1 for r in rows if r[1] == "queued"),
            failed=len(failed),
            job_ids=tuple(sorted(int(r[0]) for r in rows)),
        )
