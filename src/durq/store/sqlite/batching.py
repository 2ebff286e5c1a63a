"""Batches on SQLite: enqueue into a batch, create, seal, read (steps in :mod:`.batches`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from durq.errors import ConfigError
from durq.model import Inserted, NewJob, Outcome
from durq.model.batches import BatchRecord, NewBatch
from durq.store.sqlite import batches as sb
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite.base import SqliteBase
from durq.store.sqlite.connection import translate


class BatchingMixin(SqliteBase):
    """The batch transitions, and the finish hook that closes batches."""

    def _close_batches_of(
        self, outcomes: Sequence[Outcome], applied: Sequence[bool], now: float
    ) -> None:
        """The finish hook: close the batches of applied outcomes (same transaction)."""
        ids = [o.batch_id for o, ok in zip(outcomes, applied, strict=True) if ok and o.batch_id]
        if ids:
            sb.close_batches(self._conn(), ids, now)

    def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]:
        """Insert jobs and make the new ones members of their batch, in one transaction
        (the caller's with ``connection``). A keyed job that already existed does not join.

        Raises:
            ConfigError: the batch is sealed or unknown (nothing written).
        """
        if connection is not None and not isinstance(connection, sqlite3.Connection):
            raise ConfigError(
                f"connection= must be a sqlite3.Connection on {self.path}, "
                f"not {type(connection).__name__}"
            )
        conn = connection if connection is not None else self._conn()
        tx = contextlib.nullcontext() if connection is not None else self._write()
        try:
            with tx:
                batch_ids = sorted({j.batch_id for j in jobs if j.batch_id is not None})
                for batch_id in batch_ids:
                    sb.require_building(conn, batch_id)
                out = self._insert(conn, jobs, explicit_ids=connection is None)
                self._set_extras(conn, jobs, out)  # parked / deadline columns, as outside
                by_batch: dict[int, list[int]] = {}
                for job, ins in zip(jobs, out, strict=True):
                    if job.batch_id is not None and ins.created:
                        by_batch.setdefault(job.batch_id, []).append(ins.id)
                for batch_id in batch_ids:
                    sb.add_members(conn, batch_id, by_batch.get(batch_id, []))
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return out

    def create_batch(self, spec: NewBatch) -> int:
        conn = self._conn()
        with self._write():
            return sb.create(conn, spec, self.now())

    def seal_batch(self, batch_id: int, aborted: str | None = None) -> bool:
        conn = self._conn()
        with self._write():
            now = self.now()
            cancelled: list[int] = []
            done = sb.seal(conn, batch_id, aborted, now, cancelled)
            deps.settle(
                conn, cancelled, now, self.codec, self.payload_limit
            )  # their dependents, same transaction
            return done

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        conn = self._conn()
        try:
            conn.execute("BEGIN")  # the row and its counts from one snapshot
            try:
                return sb.get(conn, batch_id)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
