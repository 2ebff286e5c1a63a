"""The blob store's rows on SQLite: blobs, references, aliases (SQL in :mod:`.blobs`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from durq.model.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult
from durq.store.sqlite import blobs as bq
from durq.store.sqlite.base import SqliteBase


class BlobbingMixin(SqliteBase):
    """Blob rows, their references and aliases."""

    @staticmethod
    def _blob_record(r: Sequence[Any]) -> BlobRecord:
        return BlobRecord(r[0], int(r[1]), bool(r[2]), int(r[3]), r[4], r[5], r[6], r[7])

    def blob_put(
        self,
        key: str,
        size: int,
        *,
        name: str | None,
        holder: str | None,
        job_id: int | None,
        alias: str | None,
        only_if_stored: bool,
    ) -> PutResult:
        conn = self._conn()
        with self._write():
            now = self.now()
            if (
                job_id is not None
                and not conn.execute(bq.JOB_EXISTS, {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            params: dict[str, Any] = {"key": key, "size": size, "name": name, "now": now}
            if only_if_stored:
                if conn.execute(bq.TOUCH_STORED, params).fetchone() is None:
                    return "absent"
            else:
                conn.execute(bq.UPSERT_BLOB, params)
            if holder is not None:
                ref = {"key": key, "holder": holder, "job_id": job_id, "now": now}
                if conn.execute(bq.INSERT_REF, ref).fetchone() is not None:
                    conn.execute(bq.ADD_HOLDS, {"key": key, "n": 1})
            if alias is not None:
                conn.execute(bq.UPSERT_ALIAS, {"name": alias, "key": key, "now": now})
        return "ok"

    def blob_ref(self, key: str, holder: str, job_id: int | None) -> RefResult:
        conn = self._conn()
        with self._write():
            now = self.now()
            if (
                job_id is not None
                and not conn.execute(bq.JOB_EXISTS, {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            if conn.execute(bq.TOUCH_BLOB, {"key": key, "now": now}).fetchone() is None:
                return "no_blob"
            ref = {"key": key, "holder": holder, "job_id": job_id, "now": now}
            if conn.execute(bq.INSERT_REF, ref).fetchone() is None:
                return "held"
            conn.execute(bq.ADD_HOLDS, {"key": key, "n": 1})
        return "added"

    def blob_unref(self, key: str, holder: str, release: bool) -> BlobRelease:
        conn = self._conn()
        with self._write():
            if conn.execute(bq.DELETE_REF, {"key": key, "holder": holder}).fetchone() is None:
                return BlobRelease(False, False)
            dead = len(conn.execute(bq.DELETE_DEAD_REFS_OF, {"key": key}).fetchall())
            row = conn.execute(bq.ADD_HOLDS, {"key": key, "n": -1 - dead}).fetchone()
            if not release or row is None or row[0] > 0:
                return BlobRelease(True, False)
            return self._blob_release(conn, key)

    @staticmethod
    def _blob_release(conn: sqlite3.Connection, key: str) -> BlobRelease:
        won = conn.execute(bq.RELEASE_DROP, {"key": key}).fetchone()
        if won is not None:
            conn.execute(bq.DELETE_ALIASES_OF, {"keys": json.dumps([key])})
        else:
            won = conn.execute(bq.RELEASE_KEEP, {"key": key}).fetchone()
        return BlobRelease(True, won is not None, int(won[1]) if won else 0)

    def blob_collect(self, grace: float, limit: int) -> BlobCollected:
        conn = self._conn()
        with self._write():
            dead: dict[str, int] = {}
            for (key,) in conn.execute(bq.DELETE_DEAD_REFS).fetchall():
                dead[key] = dead.get(key, 0) + 1
            for key, n in dead.items():
                conn.execute(bq.ADD_HOLDS, {"key": key, "n": -n})
            params = {"cutoff": self.now() - grace, "limit": limit}
            dropped = conn.execute(bq.COLLECT_DROP, params).fetchall()
            kept = conn.execute(bq.COLLECT_KEEP, params).fetchall()
            empty = conn.execute(bq.DROP_EMPTY).fetchall()
            gone = [r[0] for r in dropped] + [r[0] for r in empty]
            if gone:
                conn.execute(bq.DELETE_ALIASES_OF, {"keys": json.dumps(gone)})
        released = [(r[0], int(r[1])) for r in dropped + kept]
        return BlobCollected(released, sum(dead.values()), len(empty))

    def blob_stored(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        return {r[0] for r in self._read(bq.STORED_AMONG, {"keys": json.dumps(list(keys))})}

    def blob_get(self, key: str) -> BlobRecord | None:
        rows = self._read(bq.SELECT_BLOB, {"key": key})
        return self._blob_record(rows[0]) if rows else None

    def blob_list(self, after: str, limit: int) -> list[BlobRecord]:
        return [
            self._blob_record(r)
            for r in self._read(bq.LIST_BLOBS, {"after": after, "limit": limit})
        ]

    def blob_holders(self, key: str) -> list[tuple[str, int | None, float]]:
        return [(r[0], r[1], r[2]) for r in self._read(bq.SELECT_REFS, {"key": key})]

    def blob_aliases(self, key: str) -> list[str]:
        return [r[0] for r in self._read(bq.SELECT_ALIASES, {"key": key})]

    def blob_set_external(self, key: str, external_id: str | None) -> bool:
        conn = self._conn()
        with self._write():
            row = conn.execute(bq.SET_EXTERNAL, {"key": key, "external_id": external_id}).fetchone()
        return row is not None

    def blob_alias(self, name: str, key: str) -> bool:
        conn = self._conn()
        with self._write():
            if conn.execute(bq.BLOB_EXISTS, {"key": key}).fetchone() is None:
                return False
            conn.execute(bq.UPSERT_ALIAS, {"name": name, "key": key, "now": self.now()})
        return True

    def blob_unalias(self, name: str) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(bq.DELETE_ALIAS, {"name": name})
        return cur.rowcount == 1

    def blob_lookup(self, name: str) -> BlobRecord | None:
        rows = self._read(bq.LOOKUP_ALIAS, {"name": name})
        return self._blob_record(rows[0]) if rows else None
