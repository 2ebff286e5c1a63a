"""PostgresBase: what the per-concern mixins of :class:`PostgresStore` use of its plumbing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import contextlib
    import threading
    from collections.abc import Callable, Sequence

    import psycopg

    from durq.model import Claimed, Inserted, NewJob, Outcome
    from durq.store.postgres.batches import Batches
    from durq.store.postgres.connection import PostgresOptions
    from durq.store.postgres.dependencies import Dependencies
    from durq.store.postgres.wakes import Wakes


class PostgresBase:
    """The base of every mixin of :class:`durq.store.postgres.store.PostgresStore`: empty
    at run time.

    For the type checker it declares the attributes and the plumbing of the store (store.py)
    and the helpers one mixin calls on another, so that each mixin checks on its own; the
    store and the mixins define them.
    """

    if TYPE_CHECKING:
        options: PostgresOptions
        channel: str
        _clock: Callable[[], float]
        _sql: dict[str, Any]
        _batches: Batches
        _deps: Dependencies
        _wakes: Wakes  # the enqueues' wake-ups, sent after their commits
        # wake-ups and leadership
        _changed: threading.Event
        _listener: threading.Thread | None
        _listener_lock: threading.Lock
        _cancelled: threading.Event  # a cancel's NOTIFY arrived (durq.worker.stopping)
        _cancel_polled: float
        _closing: threading.Event
        _leader: psycopg.Connection[Any] | None
        _leader_lock: threading.Lock
        _leads: set[str]
        # limits
        _lsql: dict[str, Any]
        _limit_ns: int
        _limited_queues: set[str]
        _limited_ids: set[int]

        # plumbing (store.py)
        def _at(self) -> float | None: ...

        def now(self) -> float: ...

        def _tx(
            self, transaction: bool = True
        ) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]: ...

        # fairness.py
        def _claim_fair(
            self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
        ) -> list[Claimed]: ...

        def _hold_turns(
            self, conn: psycopg.Connection[Any], turns: Sequence[tuple[str, str]]
        ) -> None: ...

        # workflows.py
        def _unique_holder(
            self, conn: psycopg.Connection[Any], job: NewJob, at: float | None
        ) -> Inserted | None: ...

        def _set_workflow(
            self,
            conn: psycopg.Connection[Any],
            jobs: Sequence[NewJob],
            out: Sequence[Inserted],
            at: float | None,
        ) -> None: ...

        # jobs.py
        def _enqueue_on(
            self,
            conn: psycopg.Connection[Any],
            jobs: Sequence[NewJob],
            *,
            simple: bool = False,
            notify: bool = True,
        ) -> list[Inserted]: ...

        def _committed_then_woken(
            self,
            jobs: Sequence[NewJob],
            insert: Callable[[psycopg.Connection[Any]], list[Inserted]],
        ) -> list[Inserted]: ...

        @staticmethod
        def _claimed_in_order(rows: Sequence[Sequence[Any]]) -> list[Claimed]: ...

        # batching.py
        def _close_batches_of(
            self,
            conn: psycopg.Connection[Any],
            outcomes: Sequence[Outcome],
            done: set[int],
            at: float | None,
        ) -> None: ...

        def _enqueue_in_batch(self, jobs: Sequence[NewJob], connection: Any) -> list[Inserted]: ...

        # parking.py
        def _set_extras(
            self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], inserted: list[Inserted]
        ) -> list[Inserted]: ...

        # limiting.py
        def _set_limits(
            self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], out: Sequence[Inserted]
        ) -> None: ...

        def _claim_limited(
            self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
        ) -> list[Claimed]: ...

        def _limited_finished(self, job_ids: Sequence[int]) -> None: ...

        # hooking.py
        def _set_hooks(
            self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], out: Sequence[Inserted]
        ) -> None: ...

        def _fail_hooks(
            self,
            conn: psycopg.Connection[Any],
            ids: Sequence[int],
            at: float | None,
            flagged: bool,
            tasks: Sequence[str] = (),
        ) -> None: ...
