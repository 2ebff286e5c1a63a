"""The context a running task sees through :func:`durq.context`."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from durq.codecs import Codec
from durq.dependencies import ParentResults
from durq.errors import DurqError, Snooze
from durq.model import ParentResult
from durq.payload import encode, is_finite_fraction
from durq.steps import StepStore, run_step, run_step_async

log = logging.getLogger("durq.worker")


def _call_quietly(callback: Callable[[str], object], reason: str) -> None:
    try:
        callback(reason)
    except Exception:  # a user's cleanup must not break the worker
        log.exception("durq: an on_interrupt callback failed")


_current: contextvars.ContextVar[JobContext] = contextvars.ContextVar("durq_job_context")


@dataclass
class JobContext:
    """What a task can learn and say about its own job while it runs.

    Attributes:
        job_id: the job's id.
        task: the task name.
        queue: the job's queue.
        attempt: this attempt's number (1-based).
        max_attempts: the attempts the job may use in all.
        lease_token: the fencing token of this attempt's claim.
    """

    job_id: int
    task: str
    queue: str
    attempt: int
    max_attempts: int
    lease_token: int
    _write_progress: Callable[[int, int, str], bool] = field(repr=False)
    _lost: bool = field(default=False, repr=False)
    _steps: StepStore | None = field(default=None, repr=False)
    _will_retry: Callable[[BaseException], bool] | None = field(default=None, repr=False)
    _parents: Callable[[int], list[ParentResult]] | None = field(default=None, repr=False)
    _codec: Codec | None = field(default=None, repr=False)
    _interrupted: str | None = field(default=None, repr=False, init=False)
    _on_interrupt: list[Callable[[str], object]] = field(
        default_factory=list, repr=False, init=False
    )
    #: (time, progress JSON) written through a :func:`direct_context`; empty otherwise.
    progress_log: list[tuple[float, str]] = field(default_factory=list, repr=False, init=False)

    @property
    def lease_lost(self) -> bool:
        """True once this attempt's lease was taken over (reaped, cancelled, timed out).

        A task that sees it should stop: nothing it writes for this job will be kept.
        """
        return self._lost

    def mark_lease_lost(self) -> None:
        self._lost = True

    @property
    def interrupted(self) -> str | None:
        """Why the worker asked this body to stop (``"timeout"``, ``"cancelled"``,
        ``"expired"``), or None while it has not. See :class:`durq.Interrupted`."""
        return self._interrupted

    def on_interrupt(self, callback: Callable[[str], object]) -> None:
        """Call ``callback(reason)`` once if the worker interrupts this attempt.

        For what an exception in the body's thread cannot stop: a subprocess the body
        started (``ctx.on_interrupt(lambda _: proc.kill())``), a blocking wait another
        thread can end. It runs on a worker thread, at once if the attempt was already
        interrupted; its errors are logged and ignored. Keep it short and non-blocking.

        Args:
            callback: called with the reason (``"timeout"``, ``"cancelled"``, ``"expired"``).
        """
        self._on_interrupt.append(callback)
        if self._interrupted is not None:
            _call_quietly(callback, self._interrupted)

    def mark_interrupted(self, reason: str) -> None:
        """Record that the worker interrupts this body and run its callbacks (worker side)."""
        if self._interrupted is not None:
            return
        self._interrupted = reason
        for callback in list(self._on_interrupt):
            _call_quietly(callback, reason)

    def progress(self, fraction: float, message: str = "", **extra: Any) -> bool:
        """Persist progress for this job (shown by ``durq jobs show`` and ``durq status``).

        Args:
            fraction: how far along, from 0.0 to 1.0.
            message: a short human-readable note.
            **extra: more JSON-serialisable fields to store with it.

        Returns:
            True if written; False when the lease was lost (the write was fenced out).

        Raises:
            DurqError: ``fraction`` is not a number in [0, 1].
            PayloadError: ``extra`` is not JSON-serialisable.
        """
        if not is_finite_fraction(fraction):
            raise DurqError(f"progress fraction must be a number in [0, 1], not {fraction!r}")
        body = encode({"fraction": float(fraction), "message": message, **extra}, what="progress")
        ok = self._write_progress(self.job_id, self.lease_token, body)
        if not ok:
            self.mark_lease_lost()
        return ok

    # -- steps --

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per job and remember its result.

        The result is stored as JSON under ``(job_id, name)`` in the job's own database.
        A later attempt of the same job (a retry, a job recovered after its worker died, or
        one re-queued by ``dq.retry()``) gets the stored result back and ``fn`` is not
        called again. Names are per job; use a distinct name per distinct step.

        ``fn`` runs outside any database transaction. Steps are at-least-once, not
        exactly-once: if the worker dies after ``fn`` returned but before its result was
        written, the next attempt runs ``fn`` again (make such effects idempotent).

        Args:
            name: the step's name, unique within the job (1 to 200 characters).
            fn: a synchronous callable; ``*args`` and ``**kwargs`` are passed to it.

        Returns:
            ``fn``'s result after a JSON round trip (tuples come back as lists, dict keys
            as str), which is also exactly what later attempts get.

        Raises:
            LeaseLost: this attempt's lease was lost (reaped, cancelled, timed out) before
                ``fn`` ran (``fn`` is not called) or before its result could be written
                (``fn`` ran, nothing was recorded). :attr:`lease_lost` becomes True.
            StepResultError: ``fn``'s result is not JSON-serialisable or is over 1 MiB as
                JSON, or on PostgreSQL the app's codec stored it with a NUL character;
                ``fn`` ran, nothing was recorded. It is a ``PayloadError`` and a
                ``durq.Permanent``: left uncaught, the job fails without a retry.
            ConfigError: a bad name, or ``fn`` is not callable.
            DurqError: this context was not made by a worker (no store to write to).
            Whatever ``fn`` raises propagates unchanged, and nothing is recorded.
        """
        return run_step(self, self._steps, name, fn, args, kwargs)

    # -- dependencies --

    def parent_results(self) -> ParentResults:
        """The results of this job's parents (``after=``), read from the store once per call.

        Returns:
            A :class:`durq.dependencies.ParentResults`: ``results[parent_id]`` or
            ``results["task_name"]``; a parent that did not succeed (possible with
            ``on_parent_failure="run"``) gives None. Empty for a job without parents.

        Raises:
            DurqError: this context was not made by a worker.
        """
        if self._parents is None:
            raise DurqError("parent_results() needs a context made by a durq worker")
        return ParentResults(self._parents(self.job_id), self._codec)

    async def astep(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`step` for ``async def`` tasks: ``await ctx.astep("fetch", fetch, url)``.

        ``fn`` may be an ``async def`` (awaited on the task's loop) or a plain function
        (run in a thread); the step's store reads and writes run in a thread, so the
        event loop is not blocked. Same contract, results and errors as :meth:`step`.
        """
        return await run_step_async(self, self._steps, name, fn, args, kwargs)

    # -- hooks --

    def snooze(self, seconds: float) -> NoReturn:
        """Put this job back to run again ``seconds`` from now without spending an attempt:
        raises :class:`durq.Snooze` (let it escape the task; see that class and
        docs/features/snooze.md).

        Args:
            seconds: the delay, 0 to 30 days (:data:`durq.errors.MAX_SNOOZE`).

        Raises:
            Snooze: always (that is how the job is put back).
            SnoozeError: a bad delay (not a number, negative, not finite, over 30 days).
        """
        raise Snooze(seconds)

    def will_retry(self, exc: BaseException) -> bool:
        """Whether the worker would retry this job if the task raised ``exc`` now.

        The worker's own decision (:meth:`durq.worker.executor.Executor.would_retry`): the
        same classification (a :class:`durq.Permanent` / :class:`durq.Transient` type, the
        task's ``classify`` rules, then the app's, then the built-in ones, and the app's
        ``retry_unclassified`` for the rest) and attempts left (``attempt <
        max_attempts``). So a task can say "retrying (attempt 2 of 3)" or "final failure"
        exactly when the worker does that. It does not foresee a timeout, a lost lease or
        a :meth:`durq.Durq.cancel`. A :class:`durq.PauseQueue` gives the job back: True.

        Args:
            exc: the exception the task is about to raise (or let escape).

        Raises:
            DurqError: this context was not made by a worker.
        """
        if self._will_retry is None:
            raise DurqError("will_retry() needs a context made by a durq worker")
        return self._will_retry(exc)


class MemorySteps:
    """Step results kept in memory: the step store of a context made by
    :func:`direct_context` (a task called directly, as in a test)."""

    def __init__(self) -> None:
        self.results: dict[str, str] = {}

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        return self.results.get(name), True

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        self.results.setdefault(name, result)
        return True


def direct_context(task: str, queue: str, max_attempts: int) -> JobContext:
    """A context for a task function called directly (``my_task(x=1)`` in a test): job id
    0, attempt 1, no lease to lose. Progress is kept on the context (``ctx.progress_log``),
    steps run and are remembered in memory for this call, and ``will_retry`` answers
    False (a direct call is one attempt; nothing retries it)."""
    log: list[tuple[float, str]] = []

    def write(_job_id: int, _token: int, body: str) -> bool:
        log.append((time.time(), body))
        return True

    ctx = JobContext(
        0, task, queue, 1, max_attempts, 0, write, _steps=MemorySteps(),
        _will_retry=lambda _exc: False,
    )  # fmt: skip
    ctx.progress_log = log
    return ctx


def current() -> JobContext | None:
    """The running job's context, or None outside a job (no error)."""
    return _current.get(None)


def context() -> JobContext:
    """The :class:`JobContext` of the job running in this thread or asyncio task.

    A task function called directly (``my_task(x=1)``, as in a test) gets a context of
    its own (:func:`direct_context`).

    Raises:
        LookupError: called outside a running durq task.
    """
    try:
        return _current.get()
    except LookupError:
        raise LookupError("durq.context() called outside a running durq task") from None


def bind(ctx: JobContext) -> contextvars.Token[JobContext]:
    return _current.set(ctx)


def unbind(token: contextvars.Token[JobContext]) -> None:
    _current.reset(token)
