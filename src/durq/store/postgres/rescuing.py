"""Rescue in seconds on PostgreSQL: liveness beats, and the return of a dead worker's jobs
(statements in :mod:`.rescue_queries`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from durq.model import RescueSummary
from durq.store.postgres import rescue_queries as rq
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render

#: Seconds after the rescue of a worker whose process is gone during which the leader
#: still returns jobs that a statement of that process committed late (see ``rescue``).
#: A dead client's statement runs at most until it next waits for that client or its
#: lock waits end; past the window, the jobs' leases still bring them back.
LATE_COMMIT_WINDOW = 60.0


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
        """See :meth:`durq.store.base.Store.rescue`.

        A worker whose process is gone (``dead``) has its row deleted with the rescue. On
        PostgreSQL a statement that process sent just before it died goes on without it
        and may commit after the rescue read the jobs (a claim blocked on a lock, or a
        slow commit): its jobs would be running under a worker with no row, which no
        later pass finds, and would wait for their leases (30 s by default). So for
        :data:`LATE_COMMIT_WINDOW` seconds after the rescue, each pass of this store
        (the leader's) also looks for running jobs of the workers it forgot and returns
        them. SQLite needs none of this: a dead process's transaction never commits.
        """
        at = self._at()
        forgotten = self._recently_forgotten()
        with self._tx(transaction=False) as conn:
            stale = conn.execute(self._rq("STALE_HOLDERS"), {"at": at}).fetchall()
            late = (
                [r[0] for r in conn.execute(self._rq("LATE_HOLDERS"), {"ids": forgotten})]
                if forgotten
                else []
            )
        if not stale and not dead and not late:
            return RescueSummary(at=self.now())  # the common case: one read
        dead = [*dead, *(i for i in late if i not in dead)]
        with self._tx() as conn:
            params: dict[str, Any] = {"at": at, "dead": list(dead)}
            ids = [r[0] for r in conn.execute(self._rq("DEAD_WORKERS"), params).fetchall()]
            ids += [i for i in late if i not in ids]  # no row to lock: it was deleted
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
        if dead:
            self._forgot(dead)
        return RescueSummary(
            at=self.now(),
            workers=tuple(ids),
            recovered=sum(1 for r in rows if r[1] == "queued"),
            failed=len(failed),
            job_ids=tuple(sorted(int(r[0]) for r in rows)),
        )

    def _recently_forgotten(self) -> list[str]:
        """The workers this store forgot less than :data:`LATE_COMMIT_WINDOW` seconds ago."""
        forgotten: dict[str, float] = self.__dict__.setdefault("_forgotten", {})
        edge = time.monotonic() - LATE_COMMIT_WINDOW
        for worker_id in [i for i, t in forgotten.items() if t < edge]:
            del forgotten[worker_id]
        return list(forgotten)

    def _forgot(self, ids: Sequence[str]) -> None:
        forgotten: dict[str, float] = self.__dict__.setdefault("_forgotten", {})
        now = time.monotonic()
        for worker_id in ids:
            forgotten.setdefault(worker_id, now)  # the window runs from the first rescue
