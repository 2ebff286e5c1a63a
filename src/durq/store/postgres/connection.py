"""PostgreSQL plumbing for durq: URL options, the connection pool, migrations, errors."""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from durq.errors import ConfigError, SchemaTooNew, StoreError, StoreUnavailable
from durq.failpoints import hit

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ConfigError("the PostgreSQL backend needs psycopg: pip install 'durq[postgres]'") from exc

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
DURQ_OPTIONS = ("schema", "pool_size")
NOTIFY_CHANNEL = "durq_jobs"
#: The longest channel name PostgreSQL takes (NAMEDATALEN - 1 bytes; a longer one is refused
#: by pg_notify, "channel name too long").
MAX_CHANNEL = 63


def channel_for(schema: str) -> str:
    """The NOTIFY channel of the durq tables in ``schema``: ``durq_jobs_<schema>``, or,
    when that would be over :data:`MAX_CHANNEL` bytes (a schema over 53 characters),
    ``durq_jobs_`` and the first 32 hex digits of the schema's SHA-256. Case is kept:
    LISTEN must quote it (unquoted, PostgreSQL folds it to lower case)."""
    name = f"{NOTIFY_CHANNEL}_{schema}"
    if len(name.encode()) <= MAX_CHANNEL:
        return name
    return f"{NOTIFY_CHANNEL}_{hashlib.sha256(schema.encode()).hexdigest()[:32]}"


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """What a ``postgresql://`` URL says.

    Attributes:
        conninfo: the URL as libpq takes it (durq's own options removed).
        masked: the URL with its password replaced by ``***``, for messages.
        schema: where durq's tables live (default ``durq``).
        pool_size: connections per process at most (default 8).
    """

    conninfo: str
    masked: str
    schema: str = "durq"
    pool_size: int = 8


def mask(url: str) -> str:
    """The URL with any password replaced by ``***``. Never raises: a URL that cannot be
    parsed comes back with everything between ``://`` and its last ``@`` masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else url
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def parse_url(url: str) -> PostgresOptions:
    """Parse ``postgresql://user:password@host:port/db?schema=durq&pool_size=8``.

    Other query options are passed to libpq unchanged (``sslmode``, ``connect_timeout``...).

    Raises:
        ConfigError: a URL that cannot be parsed (an unclosed ``[`` of an IPv6 host), a bad
            schema name or pool size.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # the URL is not echoed: it may hold a password
        raise ConfigError(f"malformed PostgreSQL URL: {exc}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in DURQ_OPTIONS}
    rest = [(k, v) for k, v in query if k not in DURQ_OPTIONS]
    if not any(k == "connect_timeout" for k, _ in rest):
        rest.append(("connect_timeout", "5"))
    schema = ours.get("schema", "durq")
    if not IDENTIFIER.match(schema):
        raise ConfigError(f"schema must be a plain identifier, not {schema!r}")
    try:
        pool_size = int(ours.get("pool_size", 8))
    except ValueError:
        raise ConfigError(f"pool_size must be an integer in {mask(url)}") from None
    if pool_size < 2:
        raise ConfigError("pool_size must be at least 2")
    conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    return PostgresOptions(conninfo, mask(url), schema, pool_size)


def translate(exc: Exception, opts: PostgresOptions) -> StoreError:
    """psycopg and pool errors → durq's tree, with the URL's password masked."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreUnavailable(f"cannot reach PostgreSQL at {opts.masked}: {first}")
    return StoreError(f"PostgreSQL at {opts.masked}: {type(exc).__name__}: {exc}")


#: A pooled connection idle for longer than this (seconds) is pinged before it is handed
#: out, so one that the server dropped meanwhile is replaced instead of failing a call.
CHECK_AFTER_IDLE = 1.0


class _IdleCheck:
    """The pool's ``check`` callback: ping only connections that may have sat idle.

    A ping on every checkout costs a round trip per transaction on the worker's hot path;
    a connection used a moment ago is as good as one just pinged. The mark is the
    previous checkout, not the return: the time since it is never shorter than the idle
    time, so no connection idle for longer than :data:`CHECK_AFTER_IDLE` escapes the ping
    (one held that long and handed out at once is pinged needlessly, a rare round trip).
    It is not the pool's ``reset`` callback: with one, psycopg_pool hands every returned
    connection to its worker thread (a queue put and a thread switch per transaction, and
    the next checkout finding it not yet back).
    """

    def __init__(self) -> None:
        self._used: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def check(self, conn: Any) -> None:
        now = time.monotonic()
        if now - self._used.get(conn, 0.0) > CHECK_AFTER_IDLE:
            ConnectionPool.check_connection(conn)
            now = time.monotonic()
        self._used[conn] = now


def _first_connection(opts: PostgresOptions) -> None:
    """Connect once, directly, before the pool: a wrong host, port, database, role or
    password then fails at the server's first answer with its reason, said once (the pool
    would retry in the background for its whole timeout, logging each try).

    Raises:
        ConfigError: libpq refused an option of the URL (named once).
        StoreUnavailable: the server refused or could not be reached.
    """
    try:
        psycopg.connect(opts.conninfo, autocommit=True).close()
    except psycopg.ProgrammingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"{opts.masked}: {first} (durq's own options are {sorted(DURQ_OPTIONS)}; "
            f"the others go to libpq)"
        ) from None
    except psycopg.OperationalError as exc:
        raise translate(exc, opts) from None


def open_pool(opts: PostgresOptions) -> ConnectionPool:
    """Open a pool and check one connection now, so a wrong URL fails at once.

    Connections are in autocommit mode: a single statement is its own transaction (one round
    trip); several that must commit together run inside ``conn.transaction()``.

    Raises:
        StoreUnavailable: the server cannot be reached (the message names the masked URL).
    """
    _first_connection(opts)
    idle = _IdleCheck()
    pool = ConnectionPool(
        opts.conninfo,
        min_size=1,
        max_size=opts.pool_size,
        open=False,
        check=idle.check,
        kwargs={"autocommit": True},
        name="durq",
    )
    try:
        pool.open(wait=True, timeout=10.0)
    except Exception as exc:
        pool.close()
        raise translate(exc, opts) from exc
    return pool


def lock_key(schema: str, what: str) -> int:
    """A stable 63-bit advisory-lock key for (schema, purpose)."""
    digest = hashlib.sha256(f"durq:{schema}:{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF


def migration_files() -> list[tuple[int, str, str]]:
    folder = importlib.resources.files("durq.store.postgres") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql") and entry.name[:4].isdigit():
            found.append((int(entry.name[:4]), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def render(statement: str, schema: str) -> Any:
    """A statement with ``{s}`` / ``{schema}`` replaced by the quoted schema, compacted
    first (:func:`compact`)."""
    quoted = sql.Identifier(schema).as_string(None)
    return compact(statement).replace("{schema}", quoted).replace("{s}", quoted)


#: A string literal, a quoted identifier, a dollar-quote's opening tag, a comment or a run of
#: whitespace: what :func:`compact` looks at.
_SQL_TOKEN = re.compile(
    r"""(?P<literal>'(?:[^']|'')*')|(?P<ident>"(?:[^"]|"")*")"""
    r"""|(?P<dollar>\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$)|(?P<comment>--[^\n]*|/\*.*?\*/)"""
    r"""|(?P<space>\s+)""",
    re.S,
)


@functools.lru_cache(maxsize=1024)
def compact(statement: str) -> str:
    """``statement`` without its comments, every run of whitespace one space; string
    literals, quoted identifiers and dollar-quoted bodies kept as they are.

    Why: psycopg converts a statement's ``%(name)s`` placeholders on every execution
    unless the statement is at most ``MAX_CACHED_STATEMENT_LENGTH`` (4,096) characters
    (``psycopg/_queries.py``); the hot finish-and-claim statement, indented, was 3,816
    before its schema name went in 17 times, so a schema name of 17 characters or more
    made every batch convert it again (~47 µs of the worker's CPU). Compacted, every
    statement fits with a schema name of PostgreSQL's longest, 63 characters
    (``tests/unit/test_pg_statements.py``). Cached: some statements are rendered per call.
    """
    out: list[str] = []
    at, end = 0, len(statement)
    while at < end:
        m = _SQL_TOKEN.search(statement, at)
        if m is None:
            out.append(statement[at:])
            break
        if m.start() > at:
            out.append(statement[at : m.start()])
        kind, token = m.lastgroup, m.group(0)
        if kind == "dollar":  # kept whole, to its closing tag
            close = statement.find(token, m.end())
            stop = end if close < 0 else close + len(token)
            out.append(statement[m.start() : stop])
            at = stop
            continue
        if kind in ("comment", "space"):
            if out and not out[-1].endswith(" "):
                out.append(" ")
        else:
            out.append(token)
        at = m.end()
    return "".join(out).strip()


def require_current(pool: ConnectionPool, opts: PostgresOptions) -> None:
    """For read-only use: refuse a schema that is not exactly this durq's (writes nothing).

    Raises:
        StoreError: no durq schema there, or an older one (``durq migrate`` fixes both).
        SchemaTooNew: a newer durq migrated it.
    """
    from durq.store.postgres import queries as q

    latest = migration_files()[-1][0]
    try:
        with pool.connection() as conn:
            if conn.execute(q.SCHEMA_EXISTS, {"name": opts.schema}).fetchone() is None:
                current = 0
            else:
                row = conn.execute(render(q.CURRENT_VERSION, opts.schema)).fetchone()
                current = int(row[0]) if row else 0
    except psycopg.errors.UndefinedTable:
        current = 0
    except psycopg.Error as exc:
        raise translate(exc, opts) from exc
    if current > latest:
        raise SchemaTooNew(
            f"schema {opts.schema!r} at {opts.masked} is at durq schema v{current}, but this "
            f"durq knows up to v{latest}; upgrade durq (refusing to touch it)"
        )
    if current == 0:  # as on SQLite: say what creates it, and where else it may live
        raise StoreError(
            f"no durq schema {opts.schema!r} at {opts.masked}: nothing has created it yet "
            "(the first enqueue, a worker or `durq migrate` does), or it lives in another "
            "schema or database (give ?schema= in the URL, --db or DURQ_URL)"
        )
    if current < latest:
        raise StoreError(
            f"schema {opts.schema!r} at {opts.masked} has durq schema v{current}; run "
            f"`durq migrate` to bring it to v{latest}"
        )


def migrate(pool: ConnectionPool, opts: PostgresOptions) -> int:
    """Create the schema or bring it to the newest version, under an advisory lock so that
    two processes starting at once cannot both migrate. Versions live in
    ``<schema>.schema_version``; each migration runs in the same transaction as its record.

    Raises:
        SchemaTooNew: the database was migrated by a newer durq; nothing is changed.
        StoreError: a migration failed (rolled back).
    """
    from durq.store.postgres import queries as q

    files = migration_files()
    latest = files[-1][0]
    try:
        with pool.connection() as conn, conn.transaction():  # one transaction: all or nothing
            conn.execute(q.MIGRATION_LOCK, {"key": lock_key(opts.schema, "migrate")})
            conn.execute(render(q.CREATE_SCHEMA, opts.schema))
            conn.execute(render(q.CREATE_VERSION_TABLE, opts.schema))
            row = conn.execute(render(q.CURRENT_VERSION, opts.schema)).fetchone()
            current = int(row[0]) if row else 0
            if current > latest:
                raise SchemaTooNew(
                    f"schema {opts.schema!r} at {opts.masked} is at durq schema v{current}, but "
                    f"this durq knows up to v{latest}; upgrade durq (refusing to touch it)"
                )
            for version, _name, text in files:
                if version > current:
                    conn.execute(render(text, opts.schema))
                    hit("migration")
                    conn.execute(render(q.RECORD_VERSION, opts.schema), {"version": version})
    except (SchemaTooNew, StoreError):
        raise
    except psycopg.Error as exc:
        raise translate(exc, opts) from exc
    return latest
