"""Running queued jobs in the calling thread, for tests: the body of ``durq.testing.drain``.

The same path a worker's job takes, without its threads: the claim (with a lease, so that
steps, progress and ``lease_lost`` behave as under a worker), the :class:`Executor`
(decode, run, classify), and the store's ``finish`` with the worker's outcome hooks
(``on_fail`` marking, the batch id), so retries, backoff, context, steps, batches and
their callbacks, ``on_fail`` hooks, deadlines (one sweep per round) and pauses all run
for real. Only the waiting is skipped: with ``skip_backoff`` a retry is stored as due at
once instead of after its backoff delay.

Not for production: nothing heartbeats (a job that runs longer than the lease may be
reaped by a real worker), and sync task timeouts are not enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from durq.context import JobContext
from durq.errors import ConfigError
from durq.hooks import mark_outcome
from durq.model import SNOOZE_KIND, Claimed, Outcome, WorkerInfo
from durq.pause import PAUSE_KIND
from durq.worker.pausing import settle_pause
from durq.worker.services import storable, with_batch
from durq.worker.state import Attempt

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.worker import Worker

#: Seconds of the lease an inline claim takes (long: nothing heartbeats it).
INLINE_LEASE = 300.0

_local = threading.local()


@dataclass
class DrainResult:
    """What :func:`drain` did.

    Attributes:
        ran: ids of the attempts run, in order (a retried job appears once per attempt).
        succeeded, failed, retried: job ids by the outcome of their attempts.
    """

    ran: list[int] = field(default_factory=list)
    succeeded: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    retried: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ran)


def draining() -> bool:
    """True while :func:`drain` runs a job in this thread (eager enqueues inside a job are
    picked up by that drain instead of starting another)."""
    return bool(getattr(_local, "depth", 0))


def drain(
    app: Registry,
    *,
    queues: Sequence[str] | None = None,
    max_jobs: int = 10_000,
    skip_backoff: bool = True,
) -> DrainResult:
    """Run the app's due jobs in this thread until none is left.

    Args:
        app: the app (a :class:`durq.Durq`); its registered tasks are claimed.
        queues: the queues to serve (default: every queue a registered task names,
            including hook queues).
        max_jobs: stop after this many attempts (a job that re-enqueues itself for ever
            would otherwise never let a test end).
        skip_backoff: store retries as due now, so a job's whole retry sequence runs in
            one call; False keeps the backoff delays (move an injected clock and drain
            again).

    Returns:
        A :class:`DrainResult`.

    Raises:
        ConfigError: the app has no registered tasks, or ``max_jobs`` < 1.
        StoreError: the database could not be read or written.
    """
    if max_jobs < 1:
        raise ConfigError(f"max_jobs must be >= 1, not {max_jobs}")
    from durq.worker.worker import Worker

    host = Worker(app, queues=queues, concurrency=1, lease=INLINE_LEASE, prune_interval=None)
    host.id = f"{socket.gethostname()}:{os.getpid()}:inline-{uuid.uuid4().hex[:6]}"
    store = app.store
    store.register_worker(
        WorkerInfo(
            host.id, socket.gethostname(), os.getpid(), tuple(host.queues),
            tuple(host.task_names), store.now(), store.now(), INLINE_LEASE,
        )
    )  # fmt: skip
    result = DrainResult()
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        while len(result.ran) < max_jobs:
            host.sweeper.sweep_once()
            job = _claim_one(host)
            if job is None:
                break
            _run_one(host, job, skip_backoff, result)
    finally:
        _local.depth -= 1
        with contextlib.suppress(Exception):
            store.unregister_worker(host.id)
    return result


def _claim_one(host: Worker) -> Claimed | None:
    store = host.app.store
    for queue in host.queues:
        claimed = store.claim(queue, host.task_names, 1, INLINE_LEASE, host.id)
        if claimed:
            return claimed[0]
    return None


def _run_one(host: Worker, job: Claimed, skip_backoff: bool, result: DrainResult) -> None:
    app = host.app
    task = app.tasks.get(job.task)
    ctx = JobContext(
        job.id, job.task, job.queue, job.attempt, job.max_attempts, job.lease_token,
        app.store.set_progress, _steps=app.store,
        _will_retry=None if task is None else partial(host.executor.would_retry, job, task),
    )  # fmt: skip
    attempt = Attempt(job, ctx, deadline=None)
    host.inflight.add(attempt)
    result.ran.append(job.id)
    if task is not None and task.is_async:
        outcome = _run_coroutine(lambda: host.executor.run_async(job, ctx))
    else:
        outcome = host.executor.run_sync(job, ctx)
    if outcome.kind == PAUSE_KIND:
        settle_pause(host, attempt, outcome)
        return
    if outcome.kind == "retry" and skip_backoff:
        outcome = dataclasses.replace(outcome, delay=0.0)
    outcome = storable(attempt, outcome, app.store)  # as the worker's claimer does
    (applied,) = app.store.finish([mark_outcome(app, job.task, with_batch(attempt, outcome))])
    host.inflight.settle(attempt)
    host.report(attempt, outcome, applied)
    if applied:
        kind = outcome.kind
        if kind == SNOOZE_KIND:  # the store fails a job past its max_snoozes
            row = app.store.get(job.id)
            kind = "failed" if row is not None and row.state == "failed" else "retry"
        {"succeeded": result.succeeded, "retry": result.retried}.get(kind, result.failed).append(
            job.id
        )


def _run_coroutine(make: Any) -> Outcome:
    """Run an async attempt to the end: on a fresh event loop in this thread, or, when
    this thread already runs a loop (an async test), on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[no-any-return]
    box: list[Outcome] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(asyncio.run(make()))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="durq-inline-async")
    thread.start()
    while thread.is_alive():
        thread.join(0.01)
        time.sleep(0)
    if errors:
        raise errors[0]
    return box[0]
