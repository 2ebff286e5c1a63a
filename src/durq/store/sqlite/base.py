"""SqliteBase: what the per-concern mixins of :class:`SqliteStore` use of its plumbing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3
    import threading
    from collections.abc import Callable, Sequence

    from durq.codecs import Codec
    from durq.model import Claimed, Inserted, NewJob, Outcome
    from durq.store.sqlite.connection import SqliteOptions
    from durq.store.sqlite.gate import WriteGate


class SqliteBase:
    """The base of every mixin of :class:`durq.store.sqlite.store.SqliteStore`: empty at
    run time.

    For the type checker it declares the attributes and the plumbing of the store (store.py)
    and the helpers one mixin calls on another, so that each mixin checks on its own; the
    store and the mixins define them.
    """

    if TYPE_CHECKING:
        path: str
        codec: Codec | None
        payload_limit: int | None
        options: SqliteOptions
        _clock: Callable[[], float]
        _local: threading.local
        _gate: WriteGate

        # plumbing (store.py)
        def now(self) -> float: ...

        def _conn(self) -> sqlite3.Connection: ...

        def _write(self, urgent: bool = False) -> Any: ...

        def _write_one(self, sql: str, params: Any) -> sqlite3.Cursor: ...

        def _read(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]: ...

        def _raise_clock_mark(self, conn: sqlite3.Connection, now: float) -> None: ...

        # jobs.py
        def _insert(
            self,
            conn: sqlite3.Connection,
            jobs: Sequence[NewJob],
            *,
            explicit_ids: bool,
        ) -> list[Inserted]: ...

        # batching.py
        def _close_batches_of(
            self, outcomes: Sequence[Outcome], applied: Sequence[bool], now: float
        ) -> None: ...

        def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]: ...

        # parking.py
        @staticmethod
        def _set_extras(
            conn: sqlite3.Connection, jobs: Sequence[NewJob], inserted: list[Inserted]
        ) -> list[Inserted]: ...

        # limiting.py
        @staticmethod
        def _set_limits(
            conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
        ) -> None: ...

        def _claim_limited(
            self, conn: sqlite3.Connection, params: dict[str, Any], limit: int
        ) -> list[Claimed]: ...

        # workflows.py
        @staticmethod
        def _unique_holder(
            conn: sqlite3.Connection, job: NewJob, now: float
        ) -> Inserted | None: ...

        def _set_workflow(
            self, conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
        ) -> None: ...

        # fairness.py
        def _any_fair(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool: ...

        def _claim_fair(
            self,
            conn: sqlite3.Connection,
            params: dict[str, Any],
            limit: int,
            rounds: int = 1,
            probed: bool = False,
        ) -> list[Claimed]: ...

        # hooking.py
        @staticmethod
        def _set_hooks(
            conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
        ) -> None: ...

        @staticmethod
        def _fail_hooks(
            conn: sqlite3.Connection,
            ids: Sequence[int],
            now: float,
            flagged: bool,
            tasks: Sequence[str] = (),
        ) -> None: ...

        def _fail_hooks_of(
            self,
            conn: sqlite3.Connection,
            outcomes: Sequence[Outcome],
            applied: Sequence[bool],
            now: float,
        ) -> None: ...
