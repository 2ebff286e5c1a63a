"""Queue pauses and alert cooldowns on SQLite (statements in :mod:`.pause_queries`)."""

from __future__ import annotations

from typing import Any

from durq.model.alerts import Alert
from durq.model.pauses import QueuePause
from durq.store.sqlite import pause_queries as pq
from durq.store.sqlite.base import SqliteBase


class PausingMixin(SqliteBase):
    """Pause, resume and requeue-on-pause of queues; alerts with their cooldown."""

    def pause_queue(self, queue: str, reason: str, source: str) -> bool:
        conn = self._conn()
        params: dict[str, Any] = {"queue": queue, "reason": reason, "source": source}
        with self._write():
            params["now"] = self.now()
            row = conn.execute(pq.PAUSE_QUEUE, params).fetchone()
        return row is not None

    def resume_queue(self, queue: str, source: str | None) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(pq.RESUME_QUEUE, {"queue": queue, "source": source})
        return cur.rowcount == 1

    def queue_pause(self, queue: str) -> QueuePause | None:
        rows = self._read(pq.SELECT_PAUSE, {"queue": queue})
        if not rows:
            return None
        name, reason, source, paused_at = rows[0]
        return QueuePause(name, reason or "", source or "", float(paused_at or 0.0))

    def requeue_paused(self, job_id: int, token: int, queue: str, reason: str) -> tuple[bool, bool]:
        conn = self._conn()
        with self._write():
            now = self.now()
            cur = conn.execute(pq.REQUEUE_PAUSED, {"id": job_id, "token": token})
            requeued = cur.rowcount == 1
            params = {"queue": queue, "reason": reason, "source": "auto", "now": now}
            paused = conn.execute(pq.PAUSE_QUEUE, params).fetchone() is not None
        return requeued, paused

    def raise_alert(self, key: str, message: str, severity: str, cooldown: float) -> Alert | None:
        conn = self._conn()
        params: dict[str, Any] = {
            "key": key,
            "message": message,
            "severity": severity,
            "cooldown": float(cooldown),
        }
        with self._write():
            params["now"] = self.now()
            sent, reported, since, at = conn.execute(pq.RAISE_ALERT, params).fetchone()
        if not sent:
            return None
        first = float(since) if reported and since is not None else float(at)
        return Alert(key, message, severity, float(at), int(reported), first)
