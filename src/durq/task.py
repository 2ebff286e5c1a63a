"""Task: a registered function plus its defaults, and the ways to enqueue it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from durq.classify import Classifier, Rule
from durq.context import JobContext, bind, current, direct_context, unbind
from durq.retry import MAX_RETRY_AFTER, Backoff
from durq.typed import TypedParams

if TYPE_CHECKING:
    from durq.job import Job
    from durq.limits import TaskLimits

#: Snoozes a job may take before it fails (the task option ``max_snoozes``).
DEFAULT_MAX_SNOOZES = 100

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-enqueue options; ``None`` means "the task's default"."""

    queue: str | None = None
    delay: float | None = None
    run_at: float | datetime | None = None
    priority: int | None = None
    key: str | None = None
    max_attempts: int | None = None
    meta: Mapping[str, Any] | None = None
    connection: Any = None
    # -- parked / deadlines -- (see Durq.enqueue)
    park: bool = False
    park_ttl: float | None = None
    deadline: float | datetime | None = None
    deadline_in: float | None = None
    notice_after: float | None = None
    # -- workflows -- (docs/features/dependencies.md, tags.md, uniqueness.md)
    after: Sequence[Any] = ()  # parent jobs: ids, Jobs (or Signatures inside enqueue_graph)
    on_parent_failure: str | None = None  # "cancel" (default) or "run"
    tags: Sequence[str] = ()
    unique: str | None = None  # None (the key is held until pruned), "active", "period:N"


#: The options of a plain ``task.enqueue(...)``: one shared (frozen) object, so the enqueue
#: path can tell "no options given" by identity and reuse the task's checked template.
NO_OPTIONS = EnqueueOptions()


class TaskApp(Protocol):
    """What a task needs of the app it is registered on: its two enqueue paths
    (:class:`durq.Durq` provides them)."""

    def enqueue_with(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        opts: EnqueueOptions,
        *,
        task: Task[Any, Any] | None,
    ) -> Job: ...

    def enqueue_many_with(
        self,
        task_name: str,
        items: Sequence[Mapping[str, Any]],
        opts: EnqueueOptions,
        *,
        keys: Sequence[str | None] | None,
        task: Task[Any, Any] | None,
    ) -> list[Job]: ...


class Task(Generic[P, R]):
    """A function registered with :meth:`durq.Durq.task`.

    Calling the task object calls the function directly (handy in tests); ``enqueue``
    stores a job that a worker will run.

    Attributes:
        name: the name jobs are routed by.
        fn: the wrapped function (``def`` or ``async def``).
        queue, max_attempts, priority: defaults for its jobs.
        backoff: the :class:`durq.retry.Backoff` policy between attempts.
        timeout: seconds an attempt may run, or None.
        rules: classifiers tried before the app's and the built-in ones.
        deadline_in, notice_after: default seconds after a job's creation until it expires /
            until its slow notice (None: none); see docs/features/deadlines.md.
        on_expire, on_slow: hooks ``fn(job: durq.Job) -> None`` run (as hook jobs) once a
            job of this task expired / was noticed as slow, or None.
        limits: its concurrency / rate limit (:class:`durq.limits.TaskLimits`), or None.
        on_fail: hook ``fn(job: durq.Job) -> None`` run (as a hook job) once a job of this
            task ended ``failed``, by any path, or None (docs/features/hooks.md).
        hook_queue: the queue of its hook jobs, or None for the job's own queue.
        max_snoozes: how many times one of its jobs may snooze (:class:`durq.Snooze`)
            before it fails instead (docs/features/snooze.md).
        max_retry_after: the cap in seconds on a Retry-After delay
            (``Transient(retry_after=)``, a provider's header), or None for no cap.
    """

    def __init__(
        self,
        app: TaskApp,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        max_attempts: int,
        backoff: Backoff,
        timeout: float | None,
        priority: int,
        rules: Sequence[Rule | Classifier],
        deadline_in: float | None = None,
        notice_after: float | None = None,
        on_expire: Callable[[Job], Any] | None = None,
        on_slow: Callable[[Job], Any] | None = None,
        limits: TaskLimits | None = None,
        on_fail: Callable[[Job], Any] | None = None,
        hook_queue: str | None = None,
        fair_key: Callable[[dict[str, Any]], str] | None = None,
        strict_types: bool = False,
        max_snoozes: int = DEFAULT_MAX_SNOOZES,
        max_retry_after: float | None = MAX_RETRY_AFTER,
    ) -> None:
        self.app = app
        self.max_snoozes = max_snoozes
        self.max_retry_after = max_retry_after
        self.fair_key = fair_key
        self.strict_types = strict_types
        self.typed = TypedParams(fn, strict_types)  # typed payloads (durq.typed)
        self.fn = fn
        self.name = name
        self.queue = queue
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.timeout = timeout
        self.priority = priority
        self.rules = tuple(rules)
        self.deadline_in = deadline_in
        self.notice_after = notice_after
        self.on_expire = on_expire
        self.on_slow = on_slow
        self.limits = limits
        self.on_fail = on_fail
        self.hook_queue = hook_queue
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = inspect.signature(fn)
        params = self.signature.parameters.values()
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        self._names = frozenset(p.name for p in params if p.kind in kinds)
        self._required = frozenset(
            p.name for p in params if p.kind in kinds and p.default is p.empty
        )
        self._any_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        # (the defaults it was checked for, the row template): filled by the app's first
        # enqueue without options (durq.facade.enqueue), checked again on every one
        self._template_cache: tuple[tuple[Any, ...], Any] | None = None

    def __repr__(self) -> str:
        return f"<durq.Task {self.name} queue={self.queue}>"

    def payload_problem(self, payload: dict[str, Any]) -> str | None:
        """Why ``payload`` cannot be the function's keyword arguments, or None if it can."""
        keys = payload.keys()
        if self._required <= keys and (self._any_kwargs or keys <= self._names):
            return None
        missing = sorted(self._required - keys)
        unexpected = [] if self._any_kwargs else sorted(keys - self._names)
        parts = []
        if missing:
            parts.append(f"missing {', '.join(map(repr, missing))}")
        if unexpected:
            parts.append(f"unexpected {', '.join(map(repr, unexpected))}")
        if parts:
            return "; ".join(parts) + f" (it takes {', '.join(sorted(self._names)) or 'nothing'})"
        try:
            self.signature.bind(**payload)
        except TypeError as exc:
            return str(exc)
        return None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function directly, in this thread (as a test does).

        Outside a running job, ``durq.context()`` inside it gives a context of its own
        (:func:`durq.context.direct_context`: job id 0, attempt 1, steps remembered for
        this call); inside a running job the job's context stays.
        """
        if current() is not None:
            return self.fn(*args, **kwargs)
        ctx = direct_context(self.name, self.queue, self.max_attempts)
        if self.is_async:
            return _with_context(ctx, self.fn, args, kwargs)  # type: ignore[return-value]
        token = bind(ctx)
        try:
            return self.fn(*args, **kwargs)
        finally:
            unbind(token)

    def options(
        self,
        *,
        queue: str | None = None,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        key: str | None = None,
        max_attempts: int | None = None,
        meta: Mapping[str, Any] | None = None,
        connection: Any = None,
        park: bool = False,
        park_ttl: float | None = None,
        deadline: float | datetime | None = None,
        deadline_in: float | None = None,
        notice_after: float | None = None,
        after: Sequence[Any] = (),
        on_parent_failure: str | None = None,
        tags: Sequence[str] = (),
        unique: str | None = None,
    ) -> BoundTask:
        """Options for the next enqueue; see :meth:`durq.Durq.enqueue` for each one."""
        opts = EnqueueOptions(
            queue, delay, run_at, priority, key, max_attempts, meta, connection,
            park=park, park_ttl=park_ttl, deadline=deadline, deadline_in=deadline_in,
            notice_after=notice_after, after=after, on_parent_failure=on_parent_failure,
            tags=tags, unique=unique,
        )  # fmt: skip
        return BoundTask(self, opts)

    def s(self, **kwargs: Any) -> Signature:
        """A signature: this task with these keyword arguments, not yet enqueued, for
        :meth:`durq.Durq.chain`, :meth:`durq.Durq.group` and
        :meth:`durq.Durq.enqueue_graph`."""
        return Signature(self, dict(kwargs), EnqueueOptions())

    def result_parameter(self, given: Mapping[str, Any]) -> str | None:
        """The parameter that receives a previous step's result in a chain: the first
        required parameter (in signature order) that ``given`` does not fill; None when
        every required parameter is given (the step then runs after, without it)."""
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        for p in self.signature.parameters.values():
            if p.kind in kinds and p.default is p.empty and p.name not in given:
                return p.name
        return None

    def enqueue(self, **kwargs: Any) -> Job:
        """Store a job that runs this task with ``kwargs``; returns when it is committed.

        Raises:
            PayloadError: ``kwargs`` is not JSON-serialisable (a ``TypeError``).
            PayloadTooLarge: the payload is over the app's limit.
            StoreBusy: the database stayed locked past the lock timeout.
        """
        return self.app.enqueue_with(self.name, kwargs, NO_OPTIONS, task=self)

    def enqueue_many(
        self, items: Sequence[Mapping[str, Any]], *, keys: Sequence[str | None] | None = None
    ) -> list[Job]:
        """Store one job per item in one transaction (all or none).

        Args:
            items: one dict of keyword arguments per job.
            keys: optional idempotency keys, one per item (None for no key); under
                ``.options(unique="active" | "period:N")`` each is the item's unique key
                instead (docs/features/uniqueness.md): an item whose key is held, or that
                repeats an earlier item's key, gets the holder's job.

        Raises:
            PayloadError, PayloadTooLarge: one item is bad; nothing is written.
            ConfigError: ``keys`` has a different length from ``items``; ``options(key=)``
                (one job's key: pass ``keys=``); ``options(unique=...)`` without ``keys``,
                or an unknown mode.
        """
        return self.app.enqueue_many_with(self.name, items, NO_OPTIONS, keys=keys, task=self)

    async def aenqueue(self, **kwargs: Any) -> Job:
        """:meth:`enqueue` for asyncio callers: the store call runs in a thread (the event
        loop is not blocked) with this task's context, so inside ``async with dq.abatch()``
        the job joins the batch. Same errors as :meth:`enqueue`."""
        return await asyncio.to_thread(self.enqueue, **kwargs)

    async def aenqueue_many(
        self, items: Sequence[Mapping[str, Any]], *, keys: Sequence[str | None] | None = None
    ) -> list[Job]:
        """:meth:`enqueue_many` for asyncio callers (one transaction, in a thread)."""
        return await asyncio.to_thread(self.enqueue_many, items, keys=keys)

    #: The earlier name of :meth:`aenqueue`.
    enqueue_async = aenqueue


async def _with_context(
    ctx: JobContext, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = bind(ctx)
    try:
        return await fn(*args, **kwargs)
    finally:
        unbind(token)


class BoundTask:
    """A task with options fixed for the next enqueue (from :meth:`Task.options`)."""

    def __init__(self, task: Task[Any, Any], opts: EnqueueOptions) -> None:
        self.task = task
        self.opts = opts

    def options(self, **changes: Any) -> BoundTask:
        return BoundTask(self.task, replace(self.opts, **changes))

    def enqueue(self, **kwargs: Any) -> Job:
        return self.task.app.enqueue_with(self.task.name, kwargs, self.opts, task=self.task)

    def enqueue_many(
        self, items: Sequence[Mapping[str, Any]], *, keys: Sequence[str | None] | None = None
    ) -> list[Job]:
        return self.task.app.enqueue_many_with(
            self.task.name, items, self.opts, keys=keys, task=self.task
        )

    async def aenqueue(self, **kwargs: Any) -> Job:
        return await asyncio.to_thread(self.enqueue, **kwargs)

    async def aenqueue_many(
        self, items: Sequence[Mapping[str, Any]], *, keys: Sequence[str | None] | None = None
    ) -> list[Job]:
        return await asyncio.to_thread(self.enqueue_many, items, keys=keys)

    enqueue_async = aenqueue

    def s(self, **kwargs: Any) -> Signature:
        """A signature with these options: see :meth:`Task.s`."""
        return Signature(self.task, dict(kwargs), self.opts)


class Signature:
    """A task, its keyword arguments and its options, not yet enqueued (``task.s(...)``).

    ``parents`` are what it waits for when enqueued with :meth:`durq.Durq.enqueue_graph`:
    earlier signatures of the same graph, :class:`durq.Job` objects or job ids.
    """

    __slots__ = ("kwargs", "opts", "parents", "pass_as", "pass_list", "task")

    def __init__(
        self,
        task: Task[Any, Any],
        kwargs: dict[str, Any],
        opts: EnqueueOptions,
        parents: tuple[Any, ...] = (),
        pass_as: str | None = None,
        pass_list: bool = False,
    ) -> None:
        self.task = task
        self.kwargs = kwargs
        self.opts = opts
        self.parents = parents
        self.pass_as = pass_as
        self.pass_list = pass_list

    def __repr__(self) -> str:
        return f"<durq.Signature {self.task.name}({self.kwargs})>"

    def options(self, **changes: Any) -> Signature:
        """The same signature with options changed (see :meth:`Task.options`)."""
        return Signature(
            self.task, self.kwargs, replace(self.opts, **changes), self.parents,
            self.pass_as, self.pass_list,
        )  # fmt: skip

    def after(self, *parents: Any, pass_as: str | None = None, as_list: bool = False) -> Signature:
        """The same signature waiting for ``parents`` as well (signatures earlier in the
        graph, Jobs or ids). ``pass_as`` names an argument that receives the parents'
        result (``as_list``: the list of their results, in parent id order)."""
        return Signature(
            self.task, self.kwargs, self.opts, self.parents + parents,
            pass_as or self.pass_as, as_list or self.pass_list,
        )  # fmt: skip
