"""One attempt as named steps: decode → resolve task → run → classify → outcome.

Nothing here writes to the store: each step returns an :class:`durq.model.Outcome` that
the claimer records under the attempt's lease token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from durq.checks import MAX_WAIT
from durq.classify import PERMANENT, Classification, classify, describe
from durq.codecs import UndecodableValue, decode_with, encode_with
from durq.context import JobContext, bind, unbind
from durq.errors import Interrupted, PauseQueue, PayloadError, PayloadTooLarge, Permanent, Snooze
from durq.failpoints import hit
from durq.model import SNOOZE_KIND, AttemptError, Claimed, Outcome
from durq.pause import pause_outcome
from durq.payload import UndecodablePayload, decode_payload, encode_result
from durq.retry import retry_after_of
from durq.worker.tracebacks import format_task_error

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.task import Task
    from durq.worker.interrupt import BodyGuard


class Executor:
    """Runs attempts for one app and turns what happened into outcomes.

    Args:
        app: the :class:`durq.Durq` whose tasks run here.
        max_retry_after: a cap in seconds on a delay asked for by Retry-After, over each
            task's own ``max_retry_after`` (None: the task's alone).
        around: a function returning a context manager entered around each body, where
            the body runs (see :class:`durq.worker.Worker`); None: none.
    """

    def __init__(
        self,
        app: Registry,
        max_retry_after: float | None = None,
        around: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.app = app
        self.around = around
        # The store's clock: on PostgreSQL an estimate of the database clock, so that error
        # history is stamped alike whichever worker (and whatever its clock) recorded it.
        self.clock: Callable[[], float] = lambda: app.store.now()
        self.max_retry_after = max_retry_after

    # -- steps ----------------------------------------------------------------------------

    def prepare(self, job: Claimed) -> tuple[Task[Any, Any], dict[str, Any]] | Outcome:
        """Decode the payload and resolve the task; an Outcome means "do not run"."""
        try:
            payload = decode_payload(decode_with(self.app.store.codec, job.payload))
        except UndecodableValue as exc:  # encrypted under a key this worker lacks
            return self.failed(job, "UndecodablePayload", str(exc), "undecodable_payload")
        except UndecodablePayload as exc:
            return self.failed(job, "UndecodablePayload", str(exc), "undecodable_payload")
        task = self.app.tasks.get(job.task)
        if task is None:  # claims only ask for registered tasks; kept for safety
            return self.failed(job, "UnknownTask", f"unknown task: {job.task}", "unknown_task")
        problem = task.payload_problem(payload)
        if problem is not None:
            message = f"payload does not fit {task.name}(): {problem}"
            return self.failed(job, "BadPayload", message, "bad_payload")
        if task.typed.checked:  # typed payloads: dataclasses, enums, datetimes, models
            try:
                payload = task.typed.from_payload(payload, task.name)
            except PayloadError as exc:
                return self.failed(job, "BadPayload", str(exc), "bad_payload")
        return task, payload

    def run_sync(self, job: Claimed, ctx: JobContext, guard: BodyGuard | None = None) -> Outcome:
        """Run a ``def`` task's attempt on this thread; with ``guard``, the body (and only
        the body) can be interrupted through it (:mod:`durq.worker.interrupt`)."""
        prepared = self.prepare(job)
        if isinstance(prepared, Outcome):
            return prepared
        task, payload = prepared
        token = bind(ctx)
        try:
            if self.around is None:  # the common case: no context manager per job
                value = guard.run(lambda: task.fn(**payload)) if guard else task.fn(**payload)
            else:
                with self.around():
                    value = guard.run(lambda: task.fn(**payload)) if guard else task.fn(**payload)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            if isinstance(exc, Interrupted):
                return self.interrupted(job, task, exc.reason)
            return self.errored(job, task, exc)
        finally:
            unbind(token)
        hit("after_task")
        return self.succeeded(job, value)

    async def run_async(self, job: Claimed, ctx: JobContext) -> Outcome:
        prepared = self.prepare(job)
        if isinstance(prepared, Outcome):
            return prepared
        task, payload = prepared
        token = bind(ctx)
        try:
            with self.around() if self.around is not None else contextlib.nullcontext():
                coro = task.fn(**payload)
                if task.timeout is not None:
                    # in this task, not wait_for's inner one: a body that swallows the
                    # cancel keeps running here (its slot held), never orphaned beside the
                    # next body
                    async with asyncio.timeout(task.timeout):
                        value = await coro
                else:
                    value = await coro
        except TimeoutError as exc:
            if task.timeout is not None:
                return self.timed_out(job, task.timeout)
            return self.errored(job, task, exc)
        except Exception as exc:  # noqa: BLE001
            return self.errored(job, task, exc)
        finally:
            unbind(token)
        hit("after_task")
        return self.succeeded(job, value)

    # -- outcomes -------------------------------------------------------------------------

    def succeeded(self, job: Claimed, value: Any) -> Outcome:
        try:
            result = encode_result(value, self.app.result_limit)
        except PayloadTooLarge as exc:
            return self.failed(job, type(exc).__name__, describe(exc), "result_too_large")
        except PayloadError as exc:
            return self.failed(job, type(exc).__name__, describe(exc), "unserialisable_result")
        result = encode_with(self.app.store.codec, result)
        return Outcome(job.id, job.lease_token, "succeeded", result=result)

    def failed(
        self, job: Claimed, type_name: str, message: str, kind: str, tb: str = ""
    ) -> Outcome:
        error = AttemptError(job.attempt, self.clock(), type_name, message, tb, kind)
        return Outcome(job.id, job.lease_token, "failed", error=error)

    def interrupted(self, job: Claimed, task: Task[Any, Any], reason: str) -> Outcome:
        """The outcome of a body the worker stopped: a timeout (retry or fail as its task
        says); a cancelled or expired job's outcome is dropped by the worker anyway."""
        if reason == "timeout":
            return self.timed_out(job, task.timeout or 0.0)
        return self.failed(job, "Interrupted", f"the body was stopped: job {reason}", reason)

    def timed_out(self, job: Claimed, timeout: float) -> Outcome:
        message = f"attempt ran longer than its timeout of {timeout} s"
        return self._retry_or_fail(job, None, "Timeout", message, "", "timeout", None)

    def errored(self, job: Claimed, task: Task[Any, Any], exc: BaseException) -> Outcome:
        """Classify a task's exception: fail now, or schedule a retry with backoff."""
        if isinstance(exc, PauseQueue):  # not a failure: see durq.worker.pausing.settle_pause
            return pause_outcome(job, exc, self.clock())
        if isinstance(exc, Snooze):  # not a failure: the attempt is handed back
            return self.snoozed(job, task, exc)
        decision = self.decision(task, exc)
        type_name = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
        tb = format_task_error(exc)  # from the task's frames, not the executor's
        kind = (
            decision.kind
            if decision.reason in ("", "unclassified")
            else f"{decision.kind}:{decision.reason}"
        )
        if decision.kind == PERMANENT or isinstance(exc, Permanent):
            return self.failed(job, type_name, describe(exc), kind, tb)
        return self._retry_or_fail(job, task, type_name, describe(exc), tb, kind, exc)

    def decision(self, task: Task[Any, Any], exc: BaseException) -> Classification:
        """The classification of a task's exception: the task's rules, then the app's, then
        the built-in ones; unclassified errors by the app's ``retry_unclassified``."""
        default = "transient" if self.app.retry_unclassified else PERMANENT
        return classify(exc, (*task.rules, *self.app.rules), default=default)

    def snoozed(self, job: Claimed, task: Task[Any, Any], exc: Snooze) -> Outcome:
        """The outcome of :class:`durq.Snooze`: back in ``exc.seconds`` without spending
        the attempt, or failed by the store once the job used its ``max_snoozes``."""
        message = f"snoozed for {exc.seconds:g} s (no attempt spent)"
        error = AttemptError(job.attempt, self.clock(), "Snooze", message, "", "snoozed")
        return Outcome(
            job.id,
            job.lease_token,
            SNOOZE_KIND,
            error=error,
            delay=exc.seconds,
            max_snoozes=task.max_snoozes,
        )

    def would_retry(self, job: Claimed, task: Task[Any, Any], exc: BaseException) -> bool:
        """Whether :meth:`errored` would schedule a retry of ``job`` for ``exc`` (behind
        ``durq.context().will_retry``): not permanent, and attempts left. A
        :class:`durq.PauseQueue` gives the job back without a failure: True."""
        if isinstance(exc, PauseQueue | Snooze):
            return True
        if isinstance(exc, Permanent) or self.decision(task, exc).kind == PERMANENT:
            return False
        return job.attempt < job.max_attempts

    def _retry_or_fail(
        self,
        job: Claimed,
        task: Task[Any, Any] | None,
        type_name: str,
        message: str,
        tb: str,
        kind: str,
        exc: BaseException | None,
    ) -> Outcome:
        now = self.clock()
        if job.attempt >= job.max_attempts:
            error = AttemptError(job.attempt, now, type_name, message, tb, kind)
            return Outcome(job.id, job.lease_token, "failed", error=error)
        task = task if task is not None else self.app.get_task(job.task)
        delay: float | None = None
        if exc is not None:
            asked = retry_after_of(exc, now)
            if asked is not None:
                delay = asked
                caps = [c for c in (task.max_retry_after, self.max_retry_after) if c is not None]
                if caps and asked > min(caps):
                    delay = min(caps)
                    message += (
                        f" [Retry-After {asked:g} s cut to max_retry_after={delay:g} s; "
                        "raise durq.Snooze to wait longer without spending an attempt]"
                    )
        if delay is None:
            delay = max(0.0, float(task.backoff.delay(job.attempt, exc)))
        if not delay <= MAX_WAIT:  # Retry-After under no cap, a backoff's inf or 1e300
            message += f" [a retry delay of {delay:g} s cut to {MAX_WAIT:g} s (10 years)]"
            delay = MAX_WAIT
        error = AttemptError(job.attempt, now, type_name, message, tb, kind)
        return Outcome(job.id, job.lease_token, "retry", error=error, delay=delay)
