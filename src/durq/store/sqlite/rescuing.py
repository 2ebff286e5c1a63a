"""Rescue in seconds on SQLite: liveness beats, and the return of a dead worker's jobs."""

from __future__ import annotations

import json
from collections.abc import Sequence

from durq.model import RescueSummary
from durq.store.sqlite import batches as sb
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite import rescue_queries as rq
from durq.store.sqlite.base import SqliteBase


class RescuingMixin(SqliteBase):
    """``beat_worker``, ``local_workers`` and ``rescue`` (see :class:`durq.store.base.Store`)."""

    def beat_worker(
        self, worker_id: str, rescue_after: float | None, proc: str | None
    ) -> int | None:
        conn = self._conn()
        params = {"id": worker_id, "rescue_after": rescue_after, "proc": proc}
        with self._write(urgent=True):  # a liveness beat must not wait behind a flood
            params["now"] = self.now()
            row = conn.execute(rq.BEAT_WORKER, params).fetchone()
        return None if row is None else int(row[0])

    def local_workers(self, host: str) -> list[tuple[str, int, str]]:
        return [(r[0], int(r[1]), r[2]) for r in self._read(rq.LOCAL_WORKERS, {"host": host})]

    def rescue(self, dead: Sequence[str] = (), fail_tasks: Sequence[str] = ()) -> RescueSummary:
        now = self.now()
        stale = [r[0] for r in self._read(rq.STALE_HOLDERS, {"now": now})]
        if not stale and not dead:
            return RescueSummary(at=now)  # the common case: a read, no write lock
        conn = self._conn()
        with self._write():
            now = self.now()
            gone = json.dumps(list(dead))
            ids = [r[0] for r in conn.execute(rq.DEAD_WORKERS, {"dead": gone, "now": now})]
            if not ids:
                return RescueSummary(at=now)
            params = {"ids": json.dumps(ids), "now": now, "dead": gone}
            rows = conn.execute(rq.RESCUE_JOBS, params).fetchall()
            failed = [r[0] for r in rows if r[1] == "failed"]
            sb.close_for_jobs(conn, failed, now)
            deps.settle(conn, failed, now, self.codec, self.payload_limit)
            self._fail_hooks(conn, failed, now, flagged=True, tasks=fail_tasks)
            conn.execute(rq.MARK_RESCUED, {"ids": json.dumps(ids)})
            if dead:
                conn.execute(rq.FORGET_WORKERS, {"ids": gone})
        return RescueSummary(
            at=now,
            workers=tuple(sorted(ids)),
            recovered=sum(1 for r in rows if r[1] == "queued"),
            failed=len(failed),
            job_ids=tuple(sorted(r[0] for r in rows)),
        )
