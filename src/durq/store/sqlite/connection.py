"""Opening SQLite connections for durq: URL parsing, pragmas, busy handling, migrations."""

from __future__ import annotations

import contextlib
import importlib.resources
import math
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

from durq.errors import (
    ConfigError,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
)
from durq.failpoints import hit
from durq.shield import enter as shield_enter
from durq.shield import leave as shield_leave
from durq.store.sqlite.gate import WriteGate

MIN_SQLITE = (3, 35, 0)  # RETURNING
SYNCHRONOUS_MODES = ("full", "normal", "extra")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """What a ``sqlite:///`` URL says.

    Attributes:
        path: the database file (``:memory:`` is refused: workers run in other processes).
        synchronous: ``full`` (default: a committed job survives power loss), ``normal``
            (faster; the last commits may be lost on power loss, never on a process crash)
            or ``extra``.
        busy_timeout: seconds SQLite itself waits for another writer before reporting busy
            (migrations and connection set-up; the store's own write transactions poll
            ``BEGIN IMMEDIATE`` through the fair writer instead, up to ``lock_timeout``).
        lock_timeout: seconds durq keeps retrying a busy write before raising StoreBusy.
    """

    path: str
    synchronous: str = "full"
    busy_timeout: float = 5.0
    lock_timeout: float = 30.0


def parse_url(url: str) -> SqliteOptions:
    """Parse ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a bare path.

    Query options: ``synchronous`` (full|normal|extra), ``busy_timeout`` and
    ``lock_timeout`` (seconds).

    Raises:
        ConfigError: a URL that cannot be parsed (an unclosed ``[``, a ``#``), an unknown
            option or value, or an empty path.
    """
    if url.startswith("sqlite:"):
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise ConfigError(f"malformed SQLite URL {url!r}: {exc}") from None
        if parts.fragment or url.endswith("#"):  # urlsplit drops it: the path would end early
            raise ConfigError(
                f"'#' in SQLite URL {url!r} starts a URL fragment, so the path would end before "
                "it; write it as %23 (or give a bare file path)"
            )
        if url.startswith("sqlite:/") and not url.startswith("sqlite://"):
            name = parts.path.lstrip("/")
            raise ConfigError(
                f"one slash in {url!r}: did you mean sqlite:///{name} (three slashes for a "
                f"path relative to the current directory, four for an absolute one: "
                f"sqlite:////{name})?"
            )
        path = unquote(parts.path)
        if url.startswith("sqlite:///"):
            path = path[1:] if path.startswith("/") else path
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    else:
        path, query = url, {}
    if not path:
        hint = ""
        if url.startswith("sqlite:") and urlsplit(url).netloc:
            name = urlsplit(url).netloc
            hint = (
                f"; did you mean sqlite:///{name} (three slashes for a path relative to "
                f"the current directory, four for an absolute one: sqlite:////abs/{name})?"
            )
        raise ConfigError(f"no database path in {url!r}{hint}")
    if path == ":memory:":
        raise ConfigError("':memory:' cannot be shared with worker processes; use a file path")
    unknown = set(query) - {"synchronous", "busy_timeout", "lock_timeout"}
    if unknown:
        raise ConfigError(f"unknown SQLite option(s) {sorted(unknown)} in {url!r}")
    sync = query.get("synchronous", "full").lower()
    if sync not in SYNCHRONOUS_MODES:
        raise ConfigError(f"synchronous must be one of {SYNCHRONOUS_MODES}, not {sync!r}")
    try:
        busy = float(query.get("busy_timeout", 5.0))
        lock = float(query.get("lock_timeout", 30.0))
    except ValueError as exc:
        raise ConfigError(f"bad timeout in {url!r}: {exc}") from None
    for name, value in (("busy_timeout", busy), ("lock_timeout", lock)):
        if not (math.isfinite(value) and 0 <= value <= 3600):
            raise ConfigError(f"{name} must be seconds from 0 to 3600, not {value} (in {url!r})")
    return SqliteOptions(path=path, synchronous=sync, busy_timeout=busy, lock_timeout=lock)


def is_busy(exc: sqlite3.Error) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED ('database is locked')."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def translate(exc: sqlite3.Error, path: str) -> StoreError:
    """Turn a sqlite3 error into durq's error tree with a message naming the file."""
    text = str(exc)
    low = text.lower()
    if "file is not a database" in low or "disk image is malformed" in low:
        return StoreError(f"{path} is not a SQLite database (or is corrupt): {text}")
    if "disk is full" in low:
        return StoreFull(f"cannot write {path}: disk full ({text}); free some space and try again")
    if "disk i/o error" in low:
        return StoreError(f"cannot write {path}: {text}; free some space and try again")
    if "readonly" in low or "read-only" in low:
        return StoreReadOnly(f"cannot write {path}: read-only ({text})")
    if "unable to open" in low:
        return StoreError(f"cannot open {path}: {_unopenable(path)}{text}")
    if is_busy(exc):
        return StoreBusy(
            f"{path} stayed locked by another connection (another process, or an open "
            f"transaction of this one): {text}"
        )
    return StoreError(f"{path}: {text}")


def _unopenable(path: str) -> str:
    """Why SQLite's "unable to open database file" happened, when it can be told: the path
    is a directory, or the file does not exist and its directory cannot be written (a
    read-only mount, no permission); "" otherwise."""
    p = Path(path)
    if p.is_dir():
        return "it is a directory, not a file; "
    if not p.exists() and p.parent.is_dir() and not os.access(p.parent, os.W_OK):
        return (
            f"the file does not exist and directory {p.parent} is not writable (read-only,"
            " or no permission), so it cannot be created; "
        )
    return ""


def connect(opts: SqliteOptions) -> sqlite3.Connection:
    """Open one connection with durq's pragmas (WAL, synchronous, busy_timeout).

    Raises:
        StoreError: the file cannot be opened, or is not a SQLite database.
    """
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreError(
            f"durq needs SQLite >= {'.'.join(map(str, MIN_SQLITE))}, found {sqlite3.sqlite_version}"
        )
    parent = Path(opts.path).parent
    if not parent.exists():
        raise StoreError(f"cannot open {opts.path}: directory {parent} does not exist")
    uri = read_only_uri(opts.path)
    try:
        conn = sqlite3.connect(
            uri or opts.path,
            timeout=opts.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=uri is not None,
        )
    except sqlite3.Error as exc:
        raise translate(exc, opts.path) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(opts.busy_timeout * 1000)}")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"), opts)
        conn.execute(f"PRAGMA synchronous = {opts.synchronous.upper()}")
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, opts.path) from exc
    return conn


def read_only_uri(path: str) -> str | None:
    """A ``file:`` URI that opens ``path`` read-only, when its directory cannot be written
    (a read-only filesystem or directory); None otherwise.

    SQLite in WAL mode must create ``<file>-shm`` (and ``-wal``) next to the database, so
    a plain open fails there with "unable to open database file". Read-only, and with no
    ``-wal`` file (every commit is in the main file), ``immutable=1`` reads the file as it
    is (https://www.sqlite.org/wal.html#readonly). Writes then fail as
    :class:`durq.errors.StoreReadOnly`.
    """
    if not os.path.exists(path):
        return None
    full = os.path.abspath(path)
    if os.access(os.path.dirname(full), os.W_OK):
        return None
    immutable = "" if os.path.exists(full + "-wal") else "&immutable=1"
    return f"file:{quote(full)}?mode=ro{immutable}"


def retry_busy(fn: Callable[[], T], opts: SqliteOptions) -> T:
    """Call ``fn()`` and retry it with jittered backoff while SQLite reports busy.

    Raises:
        StoreBusy: still busy after ``opts.lock_timeout`` seconds.
    """
    deadline = time.monotonic() + opts.lock_timeout
    pause = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.25)


@contextlib.contextmanager
def write_transaction(
    conn: sqlite3.Connection,
    opts: SqliteOptions,
    gate: WriteGate | None = None,
    urgent: bool = False,
) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, waiting out other writers up to ``lock_timeout``.

    With a ``gate`` (durq/store/sqlite/gate.py) the transaction first waits for its turn
    among this process's writers (``urgent`` ones first) and at the gate between processes.

    Raises:
        StoreBusy: the write lock (or the turn) could not be had in ``opts.lock_timeout``
            seconds.
        StoreError: any other SQLite failure (disk full, read-only file, ...); the
            transaction was rolled back and nothing was written.
    """
    if gate is None:
        with _transaction(conn, opts):
            yield
        return
    with GatedTransaction(conn, opts, gate, urgent):
        yield


class GatedTransaction:
    """:func:`write_transaction` with a gate, as a plain context manager (no generator
    frames: it is on every enqueue's path). The turn is taken on entry and given back on
    exit, after ``COMMIT`` (or ``ROLLBACK`` when the body raised).

    Raises (on entry):
        StoreBusy: no turn or no write lock within ``opts.lock_timeout`` seconds.
        StoreError: ``BEGIN`` failed otherwise.
    """

    __slots__ = ("closed", "conn", "gate", "opts", "urgent")

    def __init__(
        self, conn: sqlite3.Connection, opts: SqliteOptions, gate: WriteGate, urgent: bool
    ) -> None:
        self.conn = conn
        self.opts = opts
        self.gate = gate
        self.urgent = urgent
        self.closed = False

    def __enter__(self) -> None:
        # Shielded from entry to the end of __exit__ (durq.shield): a task body's
        # interruption must not land between taking the turn and giving it back.
        shield_enter()
        try:
            closed = self.gate.enter(self.urgent, self.opts.lock_timeout)
            if closed is None:
                raise StoreBusy(
                    f"{self.opts.path}: no turn for the write lock within "
                    f"{self.opts.lock_timeout} s (other writers of this process held it)"
                )
            try:
                _begin_gated(self.conn, self.opts, self.gate, self.urgent)
            except BaseException as exc:
                self.gate.leave(closed)
                if isinstance(exc, sqlite3.Error):
                    raise translate(exc, self.opts.path) from exc
                raise
        except BaseException:
            shield_leave()
            raise
        self.closed = closed

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        conn = self.conn
        try:
            if exc is None:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as failed:
                    _roll_back(conn)
                    raise translate(failed, self.opts.path) from failed
                except BaseException:  # e.g. KeyboardInterrupt in COMMIT
                    _roll_back(conn)
                    raise
                return
            _roll_back(conn)
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, self.opts.path) from exc
        finally:
            try:
                self.gate.leave(self.closed)
            finally:
                shield_leave()


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def gated_statement(
    conn: sqlite3.Connection, opts: SqliteOptions, gate: WriteGate, sql: str, params: Any
) -> sqlite3.Cursor:
    """Run one write statement in a transaction of its own (SQLite's autocommit) as an
    ordinary writer of the fair writer: this process's turn and the gate are taken around
    it, and a busy database is polled as :func:`_begin_gated` polls ``BEGIN IMMEDIATE``
    (a statement refused as busy wrote nothing, so running it again is safe).

    ``conn`` must have ``busy_timeout`` 0 (:meth:`SqliteStore._writer_conn`): one statement
    instead of ``BEGIN`` / ``COMMIT`` and two ``PRAGMA busy_timeout`` around it, which is
    what one enqueue costs beyond the raw commit.

    Raises:
        StoreBusy: no turn, or still busy after ``opts.lock_timeout`` seconds.
        StoreError: any other SQLite failure (the statement wrote nothing).
    """
    shield_enter()  # no task body's interruption lands while the turn is held
    try:
        closed = gate.enter(False, opts.lock_timeout)
        if closed is None:
            raise StoreBusy(
                f"{opts.path}: no turn for the write lock within {opts.lock_timeout} s "
                "(other writers of this process held it)"
            )
        try:
            deadline = time.monotonic() + opts.lock_timeout
            pause = 0.001
            while True:
                try:
                    return conn.execute(sql, params)
                except sqlite3.OperationalError as exc:
                    _roll_back(conn)  # nothing is pending (WAL refuses before writing)
                    if not is_busy(exc) or time.monotonic() >= deadline:
                        raise
                left = max(0.0, deadline - time.monotonic())
                if gate.turns.urgent_waiting() and not gate.turns.step_aside(left):
                    raise sqlite3.OperationalError("database is locked (no turn)")
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 0.05)
        except sqlite3.Error as exc:
            raise translate(exc, opts.path) from exc
        finally:
            gate.leave(closed)
    finally:
        shield_leave()


def _begin_gated(
    conn: sqlite3.Connection, opts: SqliteOptions, gate: WriteGate, urgent: bool
) -> None:
    """``BEGIN IMMEDIATE`` polled by durq rather than by SQLite's busy handler (which would
    sleep in C for up to ``busy_timeout`` while holding this process's turn): an urgent
    writer retries every millisecond or two; an ordinary one backs off, and steps aside
    whenever an urgent writer of this process is waiting for the turn it holds.

    Raises:
        sqlite3.OperationalError: still busy after ``lock_timeout`` seconds.
    """
    deadline = time.monotonic() + opts.lock_timeout
    pause = 0.001
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
            left = max(0.0, deadline - time.monotonic())
            if not urgent and gate.turns.urgent_waiting() and not gate.turns.step_aside(left):
                raise sqlite3.OperationalError("database is locked (no turn)")
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.002 if urgent else 0.05)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(opts.busy_timeout * 1000)}")


@contextlib.contextmanager
def _transaction(
    conn: sqlite3.Connection,
    opts: SqliteOptions,
    begin: Callable[[], object] | None = None,
) -> Iterator[None]:
    shield_enter()  # see GatedTransaction
    try:
        try:
            if begin is None:
                retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"), opts)
            else:
                begin()
        except sqlite3.Error as exc:
            raise translate(exc, opts.path) from exc
        try:
            yield
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, opts.path) from exc
            raise
    finally:
        shield_leave()


def migration_files() -> list[tuple[int, str, str]]:
    """The numbered migrations shipped with durq: (version, name, sql), in order."""
    folder = importlib.resources.files("durq.store.sqlite") / "migrations"
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def split_statements(sql: str) -> list[str]:
    """Split a migration file into complete statements (sqlite3.complete_statement)."""
    statements, buf = [], ""
    for line in sql.splitlines(keepends=True):
        if not buf and line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def too_new(opts: SqliteOptions, current: int, latest: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"{opts.path} has durq schema v{current}, but this durq knows up to v{latest}; "
        "upgrade durq (refusing to touch the database)"
    )


def require_current(conn: sqlite3.Connection, opts: SqliteOptions) -> None:
    """For read-only use: refuse a database whose schema is not exactly this durq's.

    Raises:
        StoreError: no durq schema (``durq migrate`` creates it) or an older one.
        SchemaTooNew: a newer durq migrated it.
    """
    latest = migration_files()[-1][0]
    try:
        current = schema_version(conn)
    except sqlite3.Error as exc:
        raise translate(exc, opts.path) from exc
    if current > latest:
        raise too_new(opts, current, latest)
    if current == 0:
        raise StoreError(
            f"{opts.path} holds no durq jobs (no durq schema); `durq migrate` creates it"
        )
    if current < latest:
        raise StoreError(
            f"{opts.path} has durq schema v{current}; run `durq migrate` to bring it to v{latest}"
        )


def migrate(conn: sqlite3.Connection, opts: SqliteOptions) -> int:
    """Bring the schema to the newest version this durq knows; returns that version.

    Each pending migration runs once, all in one ``BEGIN IMMEDIATE`` transaction, after a
    backup copy of an existing database is written next to it
    (``<file>.v<old>-<unix time>.bak``). The version lives in ``PRAGMA user_version``.

    Raises:
        SchemaTooNew: the file's schema is newer than this durq; nothing is touched.
        StoreError: the file is not a database, or a migration failed (rolled back).
    """
    files = migration_files()
    latest = files[-1][0] if files else 0
    try:
        current = schema_version(conn)
    except sqlite3.Error as exc:
        raise translate(exc, opts.path) from exc
    if current > latest:
        raise too_new(opts, current, latest)
    if current == latest:
        return current
    has_tables = bool(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    if (current > 0 or has_tables) and os.path.exists(opts.path):
        backup = f"{opts.path}.v{current}-{int(time.time())}.bak"
        dest = sqlite3.connect(backup)
        try:
            conn.backup(dest)
        finally:
            dest.close()
    with write_transaction(conn, opts):
        current = schema_version(conn)  # another process may have migrated meanwhile
        if current > latest:
            raise too_new(opts, current, latest)
        for version, _name, sql in files:
            if version <= current:
                continue
            for statement in split_statements(sql):
                conn.execute(statement)
                hit("migration")
            conn.execute(f"PRAGMA user_version = {version}")
    return latest
