"""PostgreSQL statements as the store sends them: compacted, and short enough for psycopg
to cache its conversion of their placeholders."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

pytest.importorskip("psycopg")

import durq.store.postgres as postgres_store
from durq.store.postgres.connection import compact, render

#: psycopg converts a statement's %(name)s placeholders on every execution when it is
#: longer than this (psycopg/_queries.py, MAX_CACHED_STATEMENT_LENGTH).
PSYCOPG_CACHED = 4096
#: The longest schema name every statement fits with (docs/architecture.md).
SCHEMA_FITS = 44


def statements() -> list[tuple[str, str]]:
    found = []
    for info in pkgutil.iter_modules(postgres_store.__path__):
        module = importlib.import_module(f"durq.store.postgres.{info.name}")
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and "{s}" in value:
                found.append((f"{info.name}.{name}", value))
    return found


def test_compact_drops_comments_and_runs_of_whitespace_only() -> None:
    text = (
        "SELECT  'a  -- not a comment'  ,\n  \"odd  name\" -- a comment\n"
        "  FROM t /* another */ WHERE x = $body$ kept  -- as is\n $body$  AND y = 'it''s  so'"
    )
    assert compact(text) == (
        "SELECT 'a  -- not a comment' , \"odd  name\" FROM t WHERE x = $body$ kept  -- as is\n"
        " $body$ AND y = 'it''s  so'"
    )


def test_every_statement_fits_psycopgs_cache_with_a_long_schema_name() -> None:
    found = statements()
    assert len(found) > 50  # the scan found the statement modules
    schema = "s" * SCHEMA_FITS
    too_long = {
        name: len(render(value, schema))
        for name, value in found
        if len(render(value, schema)) > PSYCOPG_CACHED
    }
    assert too_long == {}


def test_the_quoted_schema_is_not_compacted() -> None:
    assert render("SELECT 1\n  FROM {s}.jobs", "a  b") == 'SELECT 1 FROM "a  b".jobs'
