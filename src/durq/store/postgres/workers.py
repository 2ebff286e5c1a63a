"""Workers on PostgreSQL: registrations, the status snapshot, wake-ups and leadership."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from durq.model import StatusData, WorkerInfo
from durq.store.postgres import queries as q
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import lock_key

#: Seconds between cancel checks without a NOTIFY (jobs expired by a deadline; a NOTIFY
#: lost while the LISTEN connection was down).
CANCEL_BACKSTOP = 1.0
#: Finished jobs of one (state, queue) are counted exactly up to this many; above it the
#: status shows the planner's estimate, marked as such (an exact count of a million
#: succeeded rows took 250 ms, over the overview's 200 ms budget).
FINISHED_EXACT_UP_TO = 10_000


class WorkersMixin(PostgresBase):
    """Worker registrations, status data, the LISTEN thread and the advisory-lock leader."""

    def register_worker(self, info: WorkerInfo) -> None:
        params = {
            "at": self._at(), "id": info.id, "host": info.host, "pid": info.pid,
            "queues": json.dumps(list(info.queues)), "tasks": json.dumps(list(info.tasks)),
            "lease": info.lease,
        }  # fmt: skip
        with self._tx() as conn:
            conn.execute(self._sql["DELETE_DEAD_WORKERS"], {"at": params["at"]})
            conn.execute(self._sql["UPSERT_WORKER"], params)

    def touch_worker(self, worker_id: str, wedged: int = 0, loop_blocked: float = 0.0) -> None:
        with self._tx(transaction=False) as conn:
            params = {
                "at": self._at(),
                "id": worker_id,
                "wedged": wedged,
                "loop_blocked": loop_blocked,
            }
            conn.execute(self._sql["TOUCH_WORKER"], params)

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
            self._finished_counts(conn, data)
            tasks: dict[tuple[str, str], int] = {}
            for queue, task, later, retried, n, oldest in conn.execute(
                self._sql["QUEUED_SUMMARY"], {"at": at}
            ):
                key = (queue, "queued", later, retried)
                data.counts[key] = data.counts.get(key, 0) + n
                tasks[(queue, task)] = tasks.get((queue, task), 0) + n
                if oldest is not None:
                    seen = data.oldest_ready.get(queue)
                    data.oldest_ready[queue] = float(oldest) if seen is None else min(seen, oldest)
            data.queued_tasks = [(queue, task, n) for (queue, task), n in tasks.items()]
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
                        int(r[8] or 0),
                        float(r[9] or 0.0),
                        float(r[10]) if r[10] is not None else None,
                        str(r[11]) if r[11] is not None else None,
                    )
                )
            meta = conn.execute(self._sql["GET_META"], {"key": "last_reap"}).fetchone()
            data.last_reap = json.loads(meta[0]) if meta else None
        return data

    def _finished_counts(self, conn: psycopg.Connection[Any], data: StatusData) -> None:
        """Finished jobs by (queue, state): counted up to :data:`FINISHED_EXACT_UP_TO`, the
        planner's estimate above (and the pair in ``data.estimated``)."""
        cap = FINISHED_EXACT_UP_TO
        for queue, state, n in conn.execute(self._sql["FINISHED_COUNTS"], {"cap": cap}).fetchall():
            if n >= cap:
                params = {"state": state, "queue": queue}
                plan = conn.execute(self._sql["FINISHED_ESTIMATE"], params).fetchone()
                n = max(cap, int(plan[0][0]["Plan"]["Plan Rows"])) if plan else n
                data.estimated.add((queue, state))
            data.counts[(queue, state, 0, 0)] = n

    # -- wake-ups and leadership ----------------------------------------------------------

    def _start_listener(self) -> bool:
        """Start the LISTEN thread unless it runs; True when this call started it."""
        with self._listener_lock:
            if self._listener is not None:
                return False
            self._listener = threading.Thread(target=self._listen, name="durq-listen", daemon=True)
            self._listener.start()
            return True

    def cancel_signalled(self) -> bool:
        if self._start_listener() or self._cancelled.is_set():
            self._cancelled.clear()
            self._cancel_polled = time.monotonic()
            return True
        if time.monotonic() - self._cancel_polled >= CANCEL_BACKSTOP:  # expiries; lost NOTIFYs
            self._cancel_polled = time.monotonic()
            return True
        return False

    def lost_among(self, leases: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        if not leases:
            return {}
        params = {"ids": [i for i, _ in leases], "tokens": [t for _, t in leases]}
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._sql["LOST_AMONG"], params).fetchall()
        return {(int(r[0]), int(r[1])): str(r[2]) for r in rows}

    def changed(self) -> bool:
        """True once a NOTIFY arrived since the last call (a listener thread waits for them)."""
        if self._start_listener():
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
                    # quoted: unquoted, PostgreSQL folds the name to lower case, and
                    # pg_notify on a mixed-case schema's channel would reach no one
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._changed.set()  # anything may have happened while we were away
                    self._cancelled.set()
                    pause = 0.1
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=1):
                            self._changed.set()
                            if note.payload == q.CANCEL_PAYLOAD:
                                self._cancelled.set()
            except psycopg.Error:
                self._changed.set()
                self._cancelled.set()
                self._closing.wait(pause)
                pause = min(pause * 2, 5.0)

    def lead(self, what: str, stale_after: float = 15.0) -> bool:
        """True when this process should run the leader-only services now.

        One process leads each duty ``what`` (its own advisory lock; only the processes
        that perform the duty ask): the one holding the lock on a dedicated session (if that
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
