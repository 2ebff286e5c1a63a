"""Every SQLite statement durq runs must work on the oldest SQLite it accepts
(``durq.store.sqlite.connection.MIN_SQLITE``): a statement that needs a newer one fails
only on the machines that have it (Ubuntu 22.04's Python links SQLite 3.37.2), and a
batch of successes that cannot be written stops the worker's claimer.

The test machine's SQLite is newer than the minimum, so running the statements here proves
nothing about it; this scans their text for syntax that SQLite added after the minimum,
with the release that added it (sqlite.org/changes.html).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import durq.store.sqlite as sqlite_store
from durq.store.sqlite.connection import MIN_SQLITE

#: (pattern, the SQLite release that first accepts it, what it is)
NEWER: list[tuple[str, tuple[int, int, int], str]] = [
    (r"->", (3, 38, 0), "the JSON operators -> and ->> (use json_extract)"),
    (r"\bunixepoch\s*\(", (3, 38, 0), "unixepoch()"),
    (r"\)\s*STRICT\b", (3, 37, 0), "STRICT tables"),
    (r"\b(RIGHT|FULL)\s+(OUTER\s+)?JOIN\b", (3, 39, 0), "RIGHT and FULL JOIN"),
    (r"\bIS\s+(NOT\s+)?DISTINCT\s+FROM\b", (3, 39, 0), "IS [NOT] DISTINCT FROM"),
    (r"\b(octet_length|timediff)\s*\(", (3, 43, 0), "octet_length(), timediff()"),
    (r"\b(concat|concat_ws|string_agg)\s*\(", (3, 44, 0), "concat(), string_agg()"),
    (r"\bjsonb", (3, 45, 0), "JSONB functions"),
]

SQL_WORDS = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|CREATE)\b")
COMMENT = re.compile(r"--[^\n]*")


def statements() -> list[tuple[str, str]]:
    """(where, text) of every SQL text of the SQLite store: the str constants of its
    modules that hold a statement, and its migration files."""
    found: list[tuple[str, str]] = []
    for info in pkgutil.iter_modules(sqlite_store.__path__, sqlite_store.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, str) and SQL_WORDS.search(value):
                found.append((f"{info.name}.{name}", value))
    for path in sorted(Path(sqlite_store.__path__[0], "migrations").glob("*.sql")):
        found.append((path.name, path.read_text()))
    return found


def test_the_scan_sees_the_hot_statements() -> None:
    names = {where for where, _ in statements()}
    assert "durq.store.sqlite.queries.FINISH_SUCCEEDED_MANY" in names
    assert "durq.store.sqlite.queries.CLAIM" in names
    assert "0001_initial.sql" in names


def test_no_statement_needs_a_newer_sqlite_than_durq_accepts() -> None:
    bad = []
    for where, text in statements():
        text = COMMENT.sub("", text)  # a comment's "a -> b" is prose
        for pattern, since, what in NEWER:
            if since > MIN_SQLITE and re.search(pattern, text, re.IGNORECASE):
                version = ".".join(map(str, since))
                bad.append(f"{where}: {what} needs SQLite {version}")
    minimum = ".".join(map(str, MIN_SQLITE))
    assert bad == [], f"durq accepts SQLite {minimum}: " + "; ".join(bad)
