"""FacadeBase: what the feature mixins of :class:`durq.Durq` use of its core."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durq.codecs import Codec
    from durq.job import Job
    from durq.model import Inserted, JobRecord, NewJob
    from durq.store import Store
    from durq.task import EnqueueOptions, Task


class FacadeBase:
    """The base of every mixin in :mod:`durq.facade`: empty at run time.

    For the type checker it declares the attributes and methods of the core (app.py) that
    the mixins call, so that each mixin checks on its own; :class:`durq.Durq` defines them.
    """

    if TYPE_CHECKING:
        payload_limit: int | None
        tasks: dict[str, Task[Any, Any]]
        eager: bool
        codec: Codec | None

        @staticmethod
        def _parked_deadline_fields(
            opts: EnqueueOptions, task: Task[Any, Any] | None
        ) -> dict[str, Any]: ...

        @staticmethod
        def _record_extras(record: JobRecord, new: NewJob, ins: Inserted) -> JobRecord: ...

        url: str
        _store: Store | None

        @property
        def store(self) -> Store: ...

        def _store_for(self, connection: Any) -> Store: ...

        def _resolve_url(self) -> str: ...

        def get(self, job_id: int) -> Job: ...

        def task(self, *, queue: str = ...) -> Callable[[Callable[..., Any]], Task[Any, Any]]: ...

        def _template(
            self, task_name: str, opts: EnqueueOptions, task: Task[Any, Any] | None
        ) -> NewJob: ...

        def _with_payload(
            self, t: NewJob, payload: Mapping[str, Any], key: str | None, passed: str | None = None
        ) -> NewJob: ...

        def _job_after_insert(self, new: NewJob, ins: Inserted, log: bool) -> Job: ...
