"""Registry: what the feature modules and the worker see of a :class:`durq.Durq` app.

A structural type (a :class:`typing.Protocol`): the task registry, the open store, the
app's settings and the two enqueue paths. :class:`durq.Durq` satisfies it; the layers
below the facade (features, worker) are typed against this protocol instead of importing
``durq.app``, so that every import points down (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from durq.task import TaskApp

if TYPE_CHECKING:
    from durq.classify import Classifier, Rule
    from durq.job import Job
    from durq.model import Alert, NewJob
    from durq.periodic import Periodic
    from durq.store import Store
    from durq.task import EnqueueOptions, Task


class Registry(TaskApp, Protocol):
    """A durq app as the features and the worker use it.

    Attributes:
        url: the database URL the app was opened with.
        payload_limit: the largest payload accepted, in bytes of JSON, or None.
        result_limit: the largest result a task may return, in bytes of JSON, or None.
        rules: the app's classifiers, tried after a task's own.
        retry_unclassified: whether an error no classifier recognises is retried.
        tasks: the registered tasks by name (the worker adds its hook tasks here).
    """

    url: str
    payload_limit: int | None
    result_limit: int | None
    rules: tuple[Rule | Classifier, ...]
    retry_unclassified: bool
    tasks: dict[str, Task[Any, Any]]

    @property
    def store(self) -> Store: ...

    @property
    def periodics(self) -> dict[str, Periodic]: ...

    def get(self, job_id: int) -> Job: ...

    def alert(
        self, key: str, message: str, *, severity: str = ..., cooldown: float = ...
    ) -> Alert | None: ...

    def get_task(self, name: str) -> Task[Any, Any]: ...

    def _template(
        self, task_name: str, opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> NewJob: ...

    def _with_payload(self, t: NewJob, payload: Mapping[str, Any], key: str | None) -> NewJob: ...
