"""SQL for ``durq soak`` on PostgreSQL (parameters, not the ``{schema}.`` prefix: the
statement reads the catalogue for a schema name)."""

#: Bytes on disk of every table of the schema, with its indexes and TOAST data.
STORAGE_BYTES = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'm', 'p')
"""
