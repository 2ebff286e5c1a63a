"""Periodic slots on SQLite: anchors and the once-per-slot enqueue (SQL in :mod:`.periodic`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.failpoints import hit
from durq.model import Inserted, NewJob, ScheduleDefinition, ScheduleRecord
from durq.store.sqlite import periodic as per
from durq.store.sqlite.base import SqliteBase


class SchedulingMixin(SqliteBase):
    """The periodic scheduler's transitions."""

    def periodic_slots(self) -> dict[str, tuple[float, int | None]]:
        rows = self._read(per.SELECT_SLOTS)
        return {r[0]: (float(r[1]), None if r[2] is None else int(r[2])) for r in rows}

    def schedules(self) -> list[ScheduleRecord]:
        return [_record(r) for r in self._read(per.SELECT_SCHEDULES)]

    def define_schedules(
        self,
        schedules: Sequence[ScheduleDefinition],
        code_version: str,
        worker_id: str,
        fresh: float,
    ) -> None:
        if not schedules:
            return
        conn = self._conn()
        with self._write():
            now = self.now()
            rows = [
                {
                    "name": d.name,
                    "cron": d.cron,
                    "tz": d.tz,
                    "task": d.task,
                    "definition": d.definition,
                    "code_version": code_version,
                    "defined_by": worker_id,
                    "now": now,
                    "stale_before": now - fresh,
                }
                for d in schedules
            ]
            conn.executemany(per.DEFINE, rows)

    def touch_schedules(self, names: Sequence[str]) -> None:
        if not names:
            return
        conn = self._conn()
        with self._write():
            now = self.now()
            conn.executemany(per.TOUCH, [{"name": n, "now": now} for n in names])

    def enqueue_periodic(self, name: str, slot: float, job: NewJob) -> Inserted | None:
        conn = self._conn()
        with self._write():
            params: dict[str, Any] = {"name": name, "slot": slot, "now": self.now()}
            if conn.execute(per.ADVANCE, params).fetchone() is None:
                return None
            (inserted,) = self._insert(conn, [job], explicit_ids=True)
            self._set_extras(conn, [job], [inserted])  # the task's deadline_in / notice_after
            hit("periodic_tx")
            conn.execute(per.SET_JOB, {"name": name, "slot": slot, "job_id": inserted.id})
        return inserted


def _record(r: Any) -> ScheduleRecord:
    return ScheduleRecord(
        r[0],
        float(r[1]),
        None if r[2] is None else int(r[2]),
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        None if r[9] is None else float(r[9]),
    )
