"""Workers on SQLite: registrations, the status snapshot, leadership and the change counter."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from durq.model import StatusData, WorkerInfo
from durq.store.sqlite import queries as q
from durq.store.sqlite.base import SqliteBase
from durq.store.sqlite.connection import translate


class WorkersMixin(SqliteBase):
    """Worker registrations, status data, leadership (everyone leads) and change detection."""

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
            self._raise_clock_mark(conn, float(params["now"]))  # type: ignore[arg-type]
            conn.execute(q.DELETE_DEAD_WORKERS, {"now": params["now"]})
            conn.execute(q.UPSERT_WORKER, params)

    def touch_worker(self, worker_id: str, wedged: int = 0, loop_blocked: float = 0.0) -> None:
        conn = self._conn()
        with self._write(urgent=True):  # part of the heartbeat: it must not wait behind a flood
            now = self.now()
            self._raise_clock_mark(conn, now)
            conn.execute(
                q.TOUCH_WORKER,
                {"id": worker_id, "now": now, "wedged": wedged, "loop_blocked": loop_blocked},
            )

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
                tasks: dict[tuple[str, str], int] = {}
                for queue, task, later, retried, n, oldest in conn.execute(
                    q.QUEUED_SUMMARY, {"now": now}
                ):
                    key = (queue, "queued", later, retried)
                    data.counts[key] = data.counts.get(key, 0) + n
                    tasks[(queue, task)] = tasks.get((queue, task), 0) + n
                    if oldest is not None:
                        seen = data.oldest_ready.get(queue)
                        data.oldest_ready[queue] = oldest if seen is None else min(seen, oldest)
                data.queued_tasks = [(queue, task, n) for (queue, task), n in tasks.items()]
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
                            int(r[8] or 0),
                            float(r[9] or 0.0),
                            float(r[10]) if r[10] is not None else None,
                            str(r[11]) if r[11] is not None else None,
                        )
                    )
                row = conn.execute(q.GET_META, {"key": "last_reap"}).fetchone()
                data.last_reap = json.loads(row[0]) if row else None
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return data

    def lead(self, what: str, stale_after: float = 15.0) -> bool:
        """Every SQLite worker may run the reaper: it is one conditional UPDATE."""
        return True

    def cancel_signalled(self) -> bool:
        # on the calling thread's own connection, which only reads: its data version moves
        # whenever another connection commits (a cancel among them)
        version = int(self._read(q.DATA_VERSION)[0][0])
        seen = getattr(self, "_cancel_version", None)
        self._cancel_version = version
        return seen != version

    def lost_among(self, leases: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        if not leases:
            return {}
        rows = self._read(q.LOST_AMONG, {"leases": json.dumps([list(p) for p in leases])})
        return {(int(r[0]), int(r[1])): str(r[2]) for r in rows}

    def changed(self) -> bool:
        # on the calling thread's own connection (the claimer's): its data version moves
        # when another connection commits, not at this thread's own commits. The claimer's
        # own finish-and-claim is no news to it (the claim in that transaction saw what
        # the finish made runnable), so it does not wake for a claim round of its own
        # after every commit (one per step of a chain). Versions are per connection,
        # hence kept per thread.
        version = int(self._read(q.DATA_VERSION)[0][0])
        seen = getattr(self._local, "data_version", None)
        self._local.data_version = version
        return seen is None or seen != version
