"""Every SQL statement of the blob store (durq.blobs) on PostgreSQL, one named constant each.

``{s}`` is the schema (see :func:`durq.store.postgres.connection.render`); times are
``{s}.epoch(%(at)s)``, the database clock. ``holds`` is kept by arithmetic in the same
transaction as the ``blob_refs`` row it counts. Under READ COMMITTED a statement that waited
for a row lock re-checks its WHERE clause against the row's newest version (not against a
sub-select's snapshot), so every release is conditional on columns of the blob row itself
(``holds = 0 AND stored``): a ``ref`` that locked and changed the row first makes the release
miss it, and a release that won first makes the ``ref`` find no row. gc picks its rows with
``FOR UPDATE SKIP LOCKED``: rows another transaction holds wait for the next pass.
"""

from __future__ import annotations

BLOB_COLUMNS = "key, size, stored, holds, external_id, name, created_at, touched_at"

JOB_EXISTS = "SELECT 1 FROM {s}.jobs WHERE id = %(job_id)s"

TOUCH_STORED = """
UPDATE {s}.blobs SET touched_at = {s}.epoch(%(at)s), name = coalesce(%(name)s, name)
WHERE key = %(key)s AND stored
RETURNING key
"""

UPSERT_BLOB = """
INSERT INTO {s}.blobs (key, size, stored, holds, name, created_at, touched_at)
VALUES (%(key)s, %(size)s, true, 0, %(name)s, {s}.epoch(%(at)s), {s}.epoch(%(at)s))
ON CONFLICT (key) DO UPDATE SET
    stored = true, size = excluded.size, touched_at = excluded.touched_at,
    name = coalesce(excluded.name, {s}.blobs.name)
"""

TOUCH_BLOB = "UPDATE {s}.blobs SET touched_at = {s}.epoch(%(at)s) WHERE key = %(key)s RETURNING key"

INSERT_REF = """
INSERT INTO {s}.blob_refs (key, holder, job_id, created_at)
VALUES (%(key)s, %(holder)s, %(job_id)s, {s}.epoch(%(at)s))
ON CONFLICT (key, holder) DO NOTHING
RETURNING key
"""

ADD_HOLDS = "UPDATE {s}.blobs SET holds = holds + %(n)s WHERE key = %(key)s RETURNING holds"

DELETE_REF = (
    "DELETE FROM {s}.blob_refs WHERE key = %(key)s AND holder = %(holder)s RETURNING job_id"
)

DELETE_DEAD_REFS_OF = """
DELETE FROM {s}.blob_refs r
WHERE r.key = %(key)s AND r.job_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = r.job_id)
RETURNING r.key
"""

# Lock order, everywhere: the blob row first, then its blob_refs rows (ref, unref and gc
# alike), so that they cannot deadlock; gc locks several blob rows in key order.
LOCK_BLOB = "SELECT holds FROM {s}.blobs WHERE key = %(key)s FOR UPDATE"

# Blobs with job references whose job row is gone (a read: no locks).
DEAD_REF_KEYS = """
SELECT DISTINCT r.key FROM {s}.blob_refs r
WHERE r.job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = r.job_id)
ORDER BY r.key
LIMIT %(limit)s
"""

LOCK_BLOBS = "SELECT key FROM {s}.blobs WHERE key = ANY(%(keys)s::text[]) ORDER BY key FOR UPDATE"

RELEASE_DROP = """
DELETE FROM {s}.blobs
WHERE key = %(key)s AND holds = 0 AND stored AND external_id IS NULL
RETURNING key, size
"""

RELEASE_KEEP = """
UPDATE {s}.blobs SET stored = false
WHERE key = %(key)s AND holds = 0 AND stored AND external_id IS NOT NULL
RETURNING key, size
"""

COLLECT_DROP = """
DELETE FROM {s}.blobs
WHERE key IN (SELECT key FROM {s}.blobs
              WHERE stored AND holds = 0 AND external_id IS NULL
                AND touched_at <= {s}.epoch(%(at)s) - %(grace)s
              ORDER BY key
              LIMIT %(limit)s
              FOR UPDATE SKIP LOCKED)
  AND stored AND holds = 0 AND external_id IS NULL
  AND touched_at <= {s}.epoch(%(at)s) - %(grace)s
RETURNING key, size
"""

COLLECT_KEEP = """
UPDATE {s}.blobs SET stored = false
WHERE key IN (SELECT key FROM {s}.blobs
              WHERE stored AND holds = 0 AND external_id IS NOT NULL
                AND touched_at <= {s}.epoch(%(at)s) - %(grace)s
              ORDER BY key
              LIMIT %(limit)s
              FOR UPDATE SKIP LOCKED)
  AND stored AND holds = 0 AND external_id IS NOT NULL
  AND touched_at <= {s}.epoch(%(at)s) - %(grace)s
RETURNING key, size
"""

DROP_EMPTY = """
DELETE FROM {s}.blobs WHERE NOT stored AND external_id IS NULL AND holds = 0 RETURNING key
"""

DELETE_ALIASES_OF = "DELETE FROM {s}.blob_aliases WHERE key = ANY(%(keys)s::text[])"

SET_EXTERNAL = (
    "UPDATE {s}.blobs SET external_id = %(external_id)s WHERE key = %(key)s RETURNING key"
)

# Locks the row against a concurrent release while an alias to it is written.
BLOB_EXISTS = "SELECT 1 FROM {s}.blobs WHERE key = %(key)s FOR KEY SHARE"

UPSERT_ALIAS = """
INSERT INTO {s}.blob_aliases (name, key, created_at) VALUES (%(name)s, %(key)s, {s}.epoch(%(at)s))
ON CONFLICT (name) DO UPDATE SET key = excluded.key, created_at = excluded.created_at
"""

DELETE_ALIAS = "DELETE FROM {s}.blob_aliases WHERE name = %(name)s"

SELECT_BLOB = "SELECT " + BLOB_COLUMNS + " FROM {s}.blobs WHERE key = %(key)s"

LOOKUP_ALIAS = (
    "SELECT b.key, b.size, b.stored, b.holds, b.external_id, b.name, b.created_at, b.touched_at "
    "FROM {s}.blob_aliases a JOIN {s}.blobs b ON b.key = a.key WHERE a.name = %(name)s"
)

LIST_BLOBS = (
    "SELECT " + BLOB_COLUMNS + " FROM {s}.blobs WHERE key > %(after)s ORDER BY key LIMIT %(limit)s"
)

SELECT_REFS = (
    "SELECT holder, job_id, created_at FROM {s}.blob_refs WHERE key = %(key)s "
    "ORDER BY created_at, holder"
)

SELECT_ALIASES = "SELECT name FROM {s}.blob_aliases WHERE key = %(key)s ORDER BY name"

STORED_AMONG = "SELECT key FROM {s}.blobs WHERE stored AND key = ANY(%(keys)s::text[])"
