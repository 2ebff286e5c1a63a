"""The worker's loops: claimer, completer, heartbeat, reaper and timeouts.

Each is a :class:`Service` on its own thread. Store errors that pass (a locked database,
a full disk) are logged and retried with backoff; anything else stops the worker.
"""

from __future__ import annotations

import json
import logging
import queue
import time
from typing import TYPE_CHECKING

from durq.errors import StoreBusy, StoreError
from durq.failpoints import hit
from durq.model import Outcome
from durq.observability import events
from durq.worker.service import Service
from durq.worker.state import Attempt

if TYPE_CHECKING:
    from durq.worker.worker import Worker

log = logging.getLogger("durq.worker")


def passing(exc: BaseException) -> bool:
    """Store errors a loop waits out instead of stopping the worker."""
    if isinstance(exc, StoreBusy):
        return True
    return isinstance(exc, StoreError) and (
        "disk is full" in str(exc) or "disk i/o" in str(exc).lower()
    )


class Claimer(Service):
    """Fills free slots: claims up to that many ready jobs per queue in one statement,
    round-robin over the worker's queues; when idle, polls the database's change counter
    every ``poll_interval`` and claims anyway every ``idle_claim_interval`` (due jobs)."""

    name = "claimer"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.worker = worker

    def wake(self) -> None:
        with self.worker.inflight.lock:
            self.worker.inflight.freed.notify_all()

    def run(self) -> None:
        w = self.worker
        store, queues, tasks = w.app.store, w.queues, w.task_names
        turn = 0
        pause = 0.01
        while not self.stopping:
            free = w.inflight.free_slots()
            if free <= 0:
                with w.inflight.lock:
                    if w.inflight.slots - len(w.inflight.attempts) <= 0 and not self.stopping:
                        w.inflight.freed.wait(0.1)
                continue
            got = 0
            try:
                for i in range(len(queues)):
                    name = queues[(turn + i) % len(queues)]
                    jobs = store.claim(name, tasks, free, w.lease, w.id)
                    hit("after_claim")
                    for job in jobs:
                        w.dispatch(job)
                    got += len(jobs)
                    free -= len(jobs)
                    if free <= 0 or self.stopping:
                        break
                pause = 0.01
            except Exception as exc:
                if not passing(exc):
                    raise
                events.emit(events.STORE_BUSY, logging.WARNING, loop=self.name, error=str(exc))
                self.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            turn += 1
            if not got:
                self.idle()

    def idle(self) -> None:
        w = self.worker
        store = w.app.store
        until = time.monotonic() + w.idle_claim_interval
        while not self.stopping and time.monotonic() < until:
            if store.changed():
                return
            if self.sleep(w.poll_interval):
                return


class Completer(Service):
    """Records outcomes: takes every outcome waiting and writes them in one transaction,
    each row still conditional on its own lease token (grouped finishes, DESIGN §3)."""

    name = "completer"
    max_batch = 1000

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.worker = worker
        self.queue: queue.SimpleQueue[tuple[Attempt, Outcome]] = queue.SimpleQueue()

    def submit(self, attempt: Attempt, outcome: Outcome) -> None:
        self.queue.put((attempt, outcome))

    def run(self) -> None:
        while True:
            try:
                first = self.queue.get(timeout=0.05)
            except queue.Empty:
                if self.stopping:
                    return
                continue
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            self.flush(batch)

    def flush(self, batch: list[tuple[Attempt, Outcome]]) -> None:
        w = self.worker
        pause = 0.01
        while True:
            try:
                hit("before_finish")
                applied = w.app.store.finish([o for _, o in batch])
                break
            except Exception as exc:
                if not passing(exc):
                    raise
                events.emit(events.STORE_BUSY, logging.WARNING, loop=self.name, error=str(exc))
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
        log_events = events.enabled()
        for (attempt, outcome), ok in zip(batch, applied, strict=True):
            w.inflight.settle(attempt)
            if log_events or not ok:
                w.report(attempt, outcome, ok)


class Heartbeat(Service):
    """Extends the leases of running jobs every ``heartbeat_interval`` (lease/3) and marks
    the worker alive. A lease that could not be extended was taken over: the task's
    context reports ``lease_lost`` and a ``lease_lost`` event is logged."""

    name = "heartbeat"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:
        w = self.worker
        interval = w.heartbeat_interval
        while not self.sleep(interval):
            try:
                self.beat()
                interval = w.heartbeat_interval
            except Exception as exc:
                if not passing(exc):
                    raise
                events.emit(events.STORE_BUSY, logging.WARNING, loop=self.name, error=str(exc))
                interval = min(1.0, w.heartbeat_interval)

    def beat(self) -> None:
        w = self.worker
        hit("heartbeat")
        lost = w.app.store.extend_leases(w.inflight.leases(), w.lease)
        for job_id in lost:
            with w.inflight.lock:
                attempt = w.inflight.attempts.get(job_id)
                if attempt is None or attempt.settled:
                    continue
            attempt.ctx.mark_lease_lost()
            events.emit(
                events.LEASE_LOST,
                logging.WARNING,
                id=job_id,
                queue=attempt.job.queue,
                task=attempt.job.task,
                attempt=attempt.job.attempt,
            )
        w.app.store.touch_worker(w.id)


class Reaper(Service):
    """Returns expired leases to the queue (or fails them when no attempts are left),
    at start and every ``reap_interval`` seconds."""

    name = "reaper"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:
        while not self.sleep(self.worker.reap_interval):
            try:
                self.reap_once()
            except Exception as exc:
                if not passing(exc):
                    raise
                events.emit(events.STORE_BUSY, logging.WARNING, loop=self.name, error=str(exc))

    def reap_once(self) -> None:
        summary = self.worker.app.store.reap()
        if summary.recovered or summary.failed:
            events.emit(
                events.LEASES_RECOVERED,
                logging.WARNING,
                recovered=summary.recovered,
                failed=summary.failed,
                ids=list(summary.job_ids[:50]),
            )


class Timeouts(Service):
    """Fails attempts of ``def`` tasks that outrun their ``timeout``: a thread cannot be
    killed, so the job is settled with a timeout outcome (retry or fail), its context
    reports ``lease_lost``, and the thread's late outcome is dropped."""

    name = "timeouts"
    tick = 0.05

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:
        w = self.worker
        while not self.sleep(self.tick):
            for attempt in w.inflight.overdue(time.monotonic()):
                attempt.ctx.mark_lease_lost()
                task = w.app.tasks[attempt.job.task]
                outcome = w.executor.timed_out(attempt.job, task.timeout or 0.0)
                w.completer.submit(attempt, outcome)


def error_json(kind: str, message: str, attempt: int, at: float) -> str:
    return json.dumps(
        {
            "attempt": attempt,
            "at": at,
            "type": "Shutdown",
            "message": message,
            "traceback": "",
            "kind": kind,
        }
    )
