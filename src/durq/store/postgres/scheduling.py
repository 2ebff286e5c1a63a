"""Periodic slots on PostgreSQL: anchors and the once-per-slot enqueue (SQL in
:mod:`.periodic`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.failpoints import hit
from durq.model import Inserted, NewJob, ScheduleDefinition, ScheduleRecord
from durq.store.postgres import periodic as per
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render


class SchedulingMixin(PostgresBase):
    """The periodic scheduler's transitions."""

    def _periodic_sql(self, name: str) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_periodic_rendered", {})
        if name not in cache:
            cache[name] = render(getattr(per, name), self.options.schema)
        return cache[name]

    def periodic_slots(self) -> dict[str, tuple[float, int | None]]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._periodic_sql("SELECT_SLOTS")).fetchall()
        return {r[0]: (float(r[1]), None if r[2] is None else int(r[2])) for r in rows}

    def schedules(self) -> list[ScheduleRecord]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._periodic_sql("SELECT_SCHEDULES")).fetchall()
        return [
            ScheduleRecord(
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
            for r in rows
        ]

    def define_schedules(
        self,
        schedules: Sequence[ScheduleDefinition],
        code_version: str,
        worker_id: str,
        fresh: float,
    ) -> None:
        if not schedules:
            return
        at = self._at()
        rows = [
            {
                "name": d.name,
                "cron": d.cron,
                "tz": d.tz,
                "task": d.task,
                "definition": d.definition,
                "code_version": code_version,
                "defined_by": worker_id,
                "at": at,
                "window": float(fresh),
            }
            for d in schedules
        ]
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(self._periodic_sql("DEFINE"), rows)

    def touch_schedules(self, names: Sequence[str]) -> None:
        if not names:
            return
        with self._tx(transaction=False) as conn:
            conn.execute(self._periodic_sql("TOUCH"), {"at": self._at(), "names": list(names)})

    def enqueue_periodic(self, name: str, slot: float, job: NewJob) -> Inserted | None:
        params = {"at": self._at(), "name": name, "slot": float(slot)}
        with self._tx() as conn:
            if conn.execute(self._periodic_sql("ADVANCE"), params).fetchone() is None:
                return None
            (inserted,) = self._enqueue_on(conn, [job])
            self._set_extras(conn, [job], [inserted])  # the task's deadline_in / notice_after
            hit("periodic_tx")
            conn.execute(
                self._periodic_sql("SET_JOB"),
                {"name": name, "slot": float(slot), "job_id": inserted.id},
            )
        return inserted
