"""Every SQL statement of the blob store (durq.blobs) on SQLite, one named constant each.

They run inside the store's ``BEGIN IMMEDIATE`` write transaction, so statements of one
transition see no other writer between them. ``holds`` is kept by arithmetic in the same
transaction as the ``blob_refs`` row it counts; a release is conditional on the blob row
(``holds = 0 AND stored = 1``), so exactly one caller wins it.
"""

from __future__ import annotations

BLOB_COLUMNS = "key, size, stored, holds, external_id, name, created_at, touched_at"

JOB_EXISTS = "SELECT 1 FROM jobs WHERE id = :job_id"

# put, content already stored: touch it (gc spares it for its grace period).
TOUCH_STORED = """
UPDATE blobs SET touched_at = :now, name = coalesce(:name, name)
WHERE key = :key AND stored = 1
RETURNING key
"""

# put, bytes just placed: (re)record them as stored.
UPSERT_BLOB = """
INSERT INTO blobs (key, size, stored, holds, name, created_at, touched_at)
VALUES (:key, :size, 1, 0, :name, :now, :now)
ON CONFLICT (key) DO UPDATE SET
    stored = 1, size = excluded.size, touched_at = excluded.touched_at,
    name = coalesce(excluded.name, blobs.name)
"""

# ref: touch the blob first (a ref keeps it; the touch also restarts gc's grace).
TOUCH_BLOB = "UPDATE blobs SET touched_at = :now WHERE key = :key RETURNING key"

INSERT_REF = """
INSERT INTO blob_refs (key, holder, job_id, created_at) VALUES (:key, :holder, :job_id, :now)
ON CONFLICT (key, holder) DO NOTHING
RETURNING key
"""

ADD_HOLDS = "UPDATE blobs SET holds = holds + :n WHERE key = :key RETURNING holds"

DELETE_REF = "DELETE FROM blob_refs WHERE key = :key AND holder = :holder RETURNING job_id"

# The job references of one blob whose job row is gone (retention pruned it).
DELETE_DEAD_REFS_OF = """
DELETE FROM blob_refs
WHERE key = :key AND job_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = blob_refs.job_id)
RETURNING key
"""

# Every job reference whose job row is gone.
DELETE_DEAD_REFS = """
DELETE FROM blob_refs
WHERE job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = blob_refs.job_id)
RETURNING key
"""

# Releasing one blob's bytes: conditional on the row, so exactly one caller wins. Without an
# external id the record goes; with one it stays, marked as holding no bytes.
RELEASE_DROP = """
DELETE FROM blobs
WHERE key = :key AND holds = 0 AND stored = 1 AND external_id IS NULL
RETURNING key, size
"""

RELEASE_KEEP = """
UPDATE blobs SET stored = 0
WHERE key = :key AND holds = 0 AND stored = 1 AND external_id IS NOT NULL
RETURNING key, size
"""

# gc: idle blobs (no holder, untouched since the cutoff), at most :limit per pass.
COLLECT_DROP = """
DELETE FROM blobs
WHERE key IN (SELECT key FROM blobs
              WHERE stored = 1 AND holds = 0 AND touched_at <= :cutoff AND external_id IS NULL
              LIMIT :limit)
RETURNING key, size
"""

COLLECT_KEEP = """
UPDATE blobs SET stored = 0
WHERE key IN (SELECT key FROM blobs
              WHERE stored = 1 AND holds = 0 AND touched_at <= :cutoff
                AND external_id IS NOT NULL
              LIMIT :limit)
RETURNING key, size
"""

# Records with neither bytes nor an external id nor a holder (an external id was cleared).
DROP_EMPTY = """
DELETE FROM blobs WHERE stored = 0 AND external_id IS NULL AND holds = 0 RETURNING key
"""

DELETE_ALIASES_OF = "DELETE FROM blob_aliases WHERE key IN (SELECT value FROM json_each(:keys))"

SET_EXTERNAL = "UPDATE blobs SET external_id = :external_id WHERE key = :key RETURNING key"

BLOB_EXISTS = "SELECT 1 FROM blobs WHERE key = :key"

UPSERT_ALIAS = """
INSERT INTO blob_aliases (name, key, created_at) VALUES (:name, :key, :now)
ON CONFLICT (name) DO UPDATE SET key = excluded.key, created_at = excluded.created_at
"""

DELETE_ALIAS = "DELETE FROM blob_aliases WHERE name = :name"

SELECT_BLOB = "SELECT " + BLOB_COLUMNS + " FROM blobs WHERE key = :key"

LOOKUP_ALIAS = (
    "SELECT b.key, b.size, b.stored, b.holds, b.external_id, b.name, b.created_at, b.touched_at "
    "FROM blob_aliases a JOIN blobs b ON b.key = a.key WHERE a.name = :name"
)

LIST_BLOBS = "SELECT " + BLOB_COLUMNS + " FROM blobs WHERE key > :after ORDER BY key LIMIT :limit"

SELECT_REFS = (
    "SELECT holder, job_id, created_at FROM blob_refs WHERE key = :key ORDER BY created_at, holder"
)

SELECT_ALIASES = "SELECT name FROM blob_aliases WHERE key = :key ORDER BY name"

STORED_AMONG = (
    "SELECT key FROM blobs WHERE stored = 1 AND key IN (SELECT value FROM json_each(:keys))"
)
