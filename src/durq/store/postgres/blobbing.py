"""The blob store's rows on PostgreSQL: blobs, references, aliases (SQL in :mod:`.blobs`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.model.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult
from durq.store.postgres import blobs as bq
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render


class BlobbingMixin(PostgresBase):
    """Blob rows, their references and aliases."""

    @property
    def _bsql(self) -> dict[str, Any]:
        """The blob statements (durq.store.postgres.blobs), rendered for this schema once."""
        rendered: dict[str, Any] | None = getattr(self, "_blob_sql", None)
        if rendered is None:
            rendered = {
                name: render(getattr(bq, name), self.options.schema)
                for name in dir(bq)
                if name.isupper()
            }
            self._blob_sql = rendered
        return rendered

    @staticmethod
    def _blob_record(r: Sequence[Any]) -> BlobRecord:
        return BlobRecord(
            r[0], int(r[1]), bool(r[2]), int(r[3]), r[4], r[5], float(r[6]), float(r[7])
        )

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
        sql = self._bsql
        at = self._at()
        with self._tx() as conn:
            if (
                job_id is not None
                and not conn.execute(sql["JOB_EXISTS"], {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            params: dict[str, Any] = {"key": key, "size": size, "name": name, "at": at}
            if only_if_stored:
                if conn.execute(sql["TOUCH_STORED"], params).fetchone() is None:
                    return "absent"
            else:
                conn.execute(sql["UPSERT_BLOB"], params)
            if holder is not None:
                ref = {"key": key, "holder": holder, "job_id": job_id, "at": at}
                if conn.execute(sql["INSERT_REF"], ref).fetchone() is not None:
                    conn.execute(sql["ADD_HOLDS"], {"key": key, "n": 1})
            if alias is not None:
                conn.execute(sql["UPSERT_ALIAS"], {"name": alias, "key": key, "at": at})
        return "ok"

    def blob_ref(self, key: str, holder: str, job_id: int | None) -> RefResult:
        sql = self._bsql
        at = self._at()
        with self._tx() as conn:
            if (
                job_id is not None
                and not conn.execute(sql["JOB_EXISTS"], {"job_id": job_id}).fetchone()
            ):
                return "no_job"
            # The touch locks the blob row first: a concurrent release waits, then re-checks
            # holds on the row we changed and misses it; a release that won finds no row here.
            if conn.execute(sql["TOUCH_BLOB"], {"key": key, "at": at}).fetchone() is None:
                return "no_blob"
            ref = {"key": key, "holder": holder, "job_id": job_id, "at": at}
            if conn.execute(sql["INSERT_REF"], ref).fetchone() is None:
                return "held"
            conn.execute(sql["ADD_HOLDS"], {"key": key, "n": 1})
        return "added"

    def blob_unref(self, key: str, holder: str, release: bool) -> BlobRelease:
        sql = self._bsql
        with self._tx() as conn:
            conn.execute(sql["LOCK_BLOB"], {"key": key})  # the blob row first (see blobs.py)
            if conn.execute(sql["DELETE_REF"], {"key": key, "holder": holder}).fetchone() is None:
                return BlobRelease(False, False)
            dead = len(conn.execute(sql["DELETE_DEAD_REFS_OF"], {"key": key}).fetchall())
            row = conn.execute(sql["ADD_HOLDS"], {"key": key, "n": -1 - dead}).fetchone()
            if not release or row is None or row[0] > 0:
                return BlobRelease(True, False)
            won = conn.execute(sql["RELEASE_DROP"], {"key": key}).fetchone()
            if won is not None:
                conn.execute(sql["DELETE_ALIASES_OF"], {"keys": [key]})
            else:
                won = conn.execute(sql["RELEASE_KEEP"], {"key": key}).fetchone()
        return BlobRelease(True, won is not None, int(won[1]) if won else 0)

    def blob_collect(self, grace: float, limit: int) -> BlobCollected:
        sql = self._bsql
        with self._tx() as conn:
            dead: dict[str, int] = {}
            keys = [r[0] for r in conn.execute(sql["DEAD_REF_KEYS"], {"limit": limit})]
            if keys:  # blob rows first, in key order, then their references
                conn.execute(sql["LOCK_BLOBS"], {"keys": keys}).fetchall()
            for key in keys:
                n = len(conn.execute(sql["DELETE_DEAD_REFS_OF"], {"key": key}).fetchall())
                if n:
                    dead[key] = n
                    conn.execute(sql["ADD_HOLDS"], {"key": key, "n": -n})
            params = {"at": self._at(), "grace": float(grace), "limit": limit}
            dropped = conn.execute(sql["COLLECT_DROP"], params).fetchall()
            kept = conn.execute(sql["COLLECT_KEEP"], params).fetchall()
            empty = conn.execute(sql["DROP_EMPTY"]).fetchall()
            gone = [r[0] for r in dropped] + [r[0] for r in empty]
            if gone:
                conn.execute(sql["DELETE_ALIASES_OF"], {"keys": gone})
        released = [(r[0], int(r[1])) for r in dropped + kept]
        return BlobCollected(released, sum(dead.values()), len(empty))

    def blob_stored(self, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["STORED_AMONG"], {"keys": list(keys)}).fetchall()
        return {r[0] for r in rows}

    def blob_get(self, key: str) -> BlobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._bsql["SELECT_BLOB"], {"key": key}).fetchone()
        return self._blob_record(row) if row else None

    def blob_list(self, after: str, limit: int) -> list[BlobRecord]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(
                self._bsql["LIST_BLOBS"], {"after": after, "limit": limit}
            ).fetchall()
        return [self._blob_record(r) for r in rows]

    def blob_holders(self, key: str) -> list[tuple[str, int | None, float]]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["SELECT_REFS"], {"key": key}).fetchall()
        return [(r[0], None if r[1] is None else int(r[1]), float(r[2])) for r in rows]

    def blob_aliases(self, key: str) -> list[str]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._bsql["SELECT_ALIASES"], {"key": key}).fetchall()
        return [r[0] for r in rows]

    def blob_set_external(self, key: str, external_id: str | None) -> bool:
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._bsql["SET_EXTERNAL"], {"key": key, "external_id": external_id}
            ).fetchone()
        return row is not None

    def blob_alias(self, name: str, key: str) -> bool:
        sql = self._bsql
        with self._tx() as conn:
            if conn.execute(sql["BLOB_EXISTS"], {"key": key}).fetchone() is None:
                return False
            conn.execute(sql["UPSERT_ALIAS"], {"name": name, "key": key, "at": self._at()})
        return True

    def blob_unalias(self, name: str) -> bool:
        with self._tx(transaction=False) as conn:
            return conn.execute(self._bsql["DELETE_ALIAS"], {"name": name}).rowcount == 1

    def blob_lookup(self, name: str) -> BlobRecord | None:
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._bsql["LOOKUP_ALIAS"], {"name": name}).fetchone()
        return self._blob_record(row) if row else None
