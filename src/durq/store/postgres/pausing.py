"""Queue pauses and alert cooldowns on PostgreSQL (statements in :mod:`.pause_queries`)."""

from __future__ import annotations

from typing import Any

from durq.model.alerts import Alert
from durq.model.pauses import QueuePause
from durq.store.postgres import pause_queries as pq
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render


class PausingMixin(PostgresBase):
    """Pause, resume and requeue-on-pause of queues; alerts with their cooldown."""

    def _pq(self, name: str) -> Any:
        """A statement of :mod:`durq.store.postgres.pause_queries`, rendered once."""
        cache: dict[str, Any] = self.__dict__.setdefault("_pq_sql", {})
        if name not in cache:
            cache[name] = render(getattr(pq, name), self.options.schema)
        return cache[name]

    def pause_queue(self, queue: str, reason: str, source: str) -> bool:
        params = {"at": self._at(), "queue": queue, "reason": reason, "source": source}
        with self._tx(transaction=False) as conn:
            return conn.execute(self._pq("PAUSE_QUEUE"), params).fetchone() is not None

    def resume_queue(self, queue: str, source: str | None) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(self._pq("RESUME_QUEUE"), {"queue": queue, "source": source})
            return cur.rowcount == 1

    def queue_pause(self, queue: str) -> QueuePause | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._pq("SELECT_PAUSE"), {"queue": queue}).fetchone()
        if row is None:
            return None
        return QueuePause(row[0], row[1] or "", row[2] or "", float(row[3] or 0.0))

    def requeue_paused(self, job_id: int, token: int, queue: str, reason: str) -> tuple[bool, bool]:
        at = self._at()
        with self._tx() as conn:  # one transaction: the job back and the queue paused
            cur = conn.execute(self._pq("REQUEUE_PAUSED"), {"id": job_id, "token": token})
            requeued = cur.rowcount == 1
            params = {"at": at, "queue": queue, "reason": reason, "source": "auto"}
            paused = conn.execute(self._pq("PAUSE_QUEUE"), params).fetchone() is not None
        return requeued, paused

    def raise_alert(self, key: str, message: str, severity: str, cooldown: float) -> Alert | None:
        params = {
            "at": self._at(),
            "key": key,
            "message": message,
            "severity": severity,
            "cooldown": float(cooldown),
        }
        with self._tx(transaction=False) as conn:  # one statement: its own transaction
            row = conn.execute(self._pq("RAISE_ALERT"), params).fetchone()
        assert row is not None
        sent, reported, since, at = row
        if not sent:
            return None
        first = float(since) if reported and since is not None else float(at)
        return Alert(key, message, severity, float(at), int(reported), first)
