"""Batches on PostgreSQL: enqueue into a batch, create, seal, read (steps in :mod:`.batches`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.model import Inserted, NewJob, Outcome
from durq.model.batches import BatchRecord, NewBatch
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import translate


class BatchingMixin(PostgresBase):
    """The batch transitions, and the finish hook that closes batches."""

    def _close_batches_of(
        self,
        conn: psycopg.Connection[Any],
        outcomes: Sequence[Outcome],
        done: set[int],
        at: float | None,
    ) -> None:
        """The finish hook, inside the finish's transaction: close the batches of the
        outcomes that applied."""
        ids = [o.batch_id for o in outcomes if o.batch_id is not None and o.job_id in done]
        if ids:
            self._batches.close_batches(conn, ids, at)

    def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]:
        """Insert jobs and make the new ones members of their batch, in one transaction
        (the caller's with ``connection``). A keyed job that already existed does not join.

        Raises:
            ConfigError: the batch is sealed or unknown (nothing written).
        """

        def run(conn: psycopg.Connection[Any], notify: bool = True) -> list[Inserted]:
            batch_ids = sorted({j.batch_id for j in jobs if j.batch_id is not None})
            for batch_id in batch_ids:
                self._batches.require_building(conn, batch_id)
            out = self._enqueue_on(conn, jobs, notify=notify)
            self._set_extras(conn, jobs, out)  # parked / deadline columns, as outside a batch
            for batch_id in batch_ids:
                members = [
                    ins.id
                    for job, ins in zip(jobs, out, strict=True)
                    if job.batch_id == batch_id and ins.created
                ]
                self._batches.add_members(conn, batch_id, members)
            return out

        if connection is not None:
            try:
                return run(connection)
            except psycopg.Error as exc:
                raise translate(exc, self.options) from exc
        return self._committed_then_woken(jobs, lambda conn: run(conn, notify=False))

    def create_batch(self, spec: NewBatch) -> int:
        with self._tx(transaction=False) as conn:
            return self._batches.create(conn, spec, self._at())

    def seal_batch(self, batch_id: int, aborted: str | None = None) -> bool:
        with self._tx() as conn:
            cancelled: list[int] = []
            done = self._batches.seal(conn, batch_id, aborted, self._at(), cancelled)
            self._deps.settle(conn, cancelled, self._at())  # their dependents, same transaction
            return done

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        with self._tx() as conn:
            return self._batches.get(conn, batch_id)
