"""The worker's loops: claimer (which also records outcomes), heartbeat, reaper (timeouts and
cancels: durq.worker.stopping).

Each is a :class:`Service` on its own thread. Store errors that pass (a locked database,
a full disk) are logged and retried with backoff; anything else stops the worker.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import threading
import time
from typing import TYPE_CHECKING

from durq.checks import INT32_MAX, MAX_WAIT
from durq.codecs import nul_problem
from durq.failpoints import hit
from durq.hooks import fail_tasks, mark_outcome
from durq.model import AttemptError, Outcome
from durq.observability import events
from durq.pause import PAUSE_KIND
from durq.worker.pausing import settle_pause
from durq.worker.service import Service, passing, store_waiting
from durq.worker.state import Attempt
from durq.worker.stopping import stop

if TYPE_CHECKING:
    from durq.store.base import Store
    from durq.worker.host import WorkerHost
    from durq.worker.prefetch import Prefetch
    from durq.worker.state import InFlight

log = logging.getLogger("durq.worker")


#: Seconds between change-counter polls once the worker has been idle for
#: :data:`IDLE_AFTER` seconds (the 1 ms poll cost an idle SQLite worker 5-8 % of a core;
#: at 4 ms a job enqueued into an idle worker still starts within ~2-3 ms at the median:
#: bench/idle_poll.py).
IDLE_POLL_INTERVAL = 0.004
#: Seconds without a claimed job or an outcome after which the poll backs off (a change
#: of the counter alone does not count: the worker's own beats move it every second).
IDLE_AFTER = 1.0
#: Seconds the claimer may hold the outcomes waiting while its worker has a backlog in
#: hand (see :meth:`Claimer.holding`), so that one statement records more of them: each
#: statement costs the same whatever it carries (PostgreSQL, 4 workers x 16 on the 2-core
#: test machine: ~0.8 ms of the server's CPU and ~0.4 ms of the worker's, against ~20 and
#: ~7 us per job), so fewer, fuller statements leave more CPU for the jobs.
HOLD_WAIT = 0.005
#: Seconds between looks at the outcomes while they are held.
HOLD_POLL = 0.0005


class Claimer(Service):
    """The worker's one writer of the hot path: in each transaction it records the outcomes
    waiting (each row conditional on its own lease token) and claims up to the free slots
    plus the prefetch's room, round-robin over the worker's queues (DESIGN §3: grouped
    finishes, batch claims). Claimed jobs go to the prefetch (durq/worker/prefetch.py),
    from which free slots start them at once; a slot that frees starts its next job from
    there on its own thread, while this loop commits its outcome with the next claim.

    When there is nothing to write and nothing was found last time, it polls the database's
    change counter every ``poll_interval`` (any commit by another connection wakes it) and
    claims anyway every ``idle_claim_interval`` so that scheduled jobs start when due.
    Prefetched jobs that waited longer than ``check_after`` are checked: those whose queue
    was paused are given back, those whose lease is gone (cancelled, reaped) dropped.
    After :meth:`stop_claiming` it only records outcomes; :meth:`stop` flushes and ends.
    """

    name = "claimer"
    max_batch = 1000
    check_after = 0.25  # seconds a prefetched job waits before its queue's pause is checked

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker
        self.outcomes: queue.SimpleQueue[tuple[Attempt, Outcome]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._waiting = False  # the loop is (about to be) asleep: submit must wake it
        self._claiming = True
        self._checked = 0.0

    def submit(self, attempt: Attempt, outcome: Outcome) -> None:
        """Hand over an attempt's outcome; it is committed with the next transaction."""
        if outcome.kind == PAUSE_KIND:  # recorded on its own, on the caller's thread
            settle_pause(self.worker, attempt, outcome)
            return
        self.outcomes.put((attempt, storable(attempt, outcome, self.worker.app.store)))
        if self._waiting:  # after the put: a claimer about to wait sees the outcome
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def stop_claiming(self) -> None:
        self._claiming = False
        self._wake.set()

    def _take_outcomes(self) -> list[tuple[Attempt, Outcome]]:
        batch: list[tuple[Attempt, Outcome]] = []
        while len(batch) < self.max_batch:
            try:
                batch.append(self.outcomes.get_nowait())
            except queue.Empty:
                break
        return batch

    def run(self) -> None:
        w = self.worker
        store, tasks = w.app.store, w.task_names
        turn = 0
        want = True  # whether a claim may find something
        pause = 0.01
        idle_until = time.monotonic() + w.idle_claim_interval
        busy_at = time.monotonic()  # the last job claimed or outcome written
        idle_poll = max(w.poll_interval, IDLE_POLL_INTERVAL)
        held: float | None = None  # since when the outcomes waiting are held
        while True:
            self._wake.clear()
            held = self.holding(held)
            if held is not None:
                self._wake.wait(HOLD_POLL)
                continue
            batch = self._take_outcomes()
            w.start_prefetched()
            free = w.inflight.free_slots() if self._claiming else 0
            room = w.prefetch.room() if self._claiming else 0
            # outcomes may make jobs runnable (a chain's next step, a fan-in's child): claim
            # in their transaction, not one poll later in a transaction of its own
            claim_now = free + room > 0 and (want or bool(batch))
            if not batch and not claim_now:
                if self.stopping and self.outcomes.empty():
                    return
                self.check_prefetched()
                capacity = free + room
                if capacity > 0 and store.changed():
                    # a claim round, but not the end of idleness: this worker's own beats
                    # (liveness, report) commit on other connections every second, so
                    # counting a change as busy kept an idle worker at the 1 ms poll
                    want = True
                    continue
                if capacity > 0 and time.monotonic() >= idle_until:
                    want = True
                    continue
                idle = time.monotonic() - busy_at > IDLE_AFTER
                self._waiting = True  # before the check: an outcome put after it wakes us
                if self.outcomes.empty():
                    self._wake.wait(
                        (idle_poll if idle else w.poll_interval) if capacity > 0 else 0.1
                    )
                self._waiting = False
                continue
            queues = w.queues[turn % len(w.queues) :] + w.queues[: turn % len(w.queues)]
            turn += 1
            try:
                if batch:
                    hit("before_finish")
                applied, claimed = store.finish_and_claim(
                    [mark_outcome(w.app, a.job.task, with_batch(a, o)) for a, o in batch],
                    queues,
                    tasks,
                    free + room if claim_now else 0,
                    w.lease,
                    w.id,
                    limited=free,  # a limited job is claimed only for a free slot
                )
                pause = 0.01
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)
                for item in batch:  # not written: put back, in order, for the next try
                    self.outcomes.put(item)
                time.sleep(pause)  # not self.sleep: it would not wait once stopping
                pause = min(pause * 2, 1.0)
                continue
            if claimed or batch:
                busy_at = time.monotonic()
            if claimed:
                hit("after_claim")
                refused = w.prefetch.put(claimed)
                if refused:  # the worker is stopping: these never start
                    w.give_back(refused)
                w.start_prefetched()
            if claim_now:
                want = len(claimed) >= free + room
                idle_until = time.monotonic() + w.idle_claim_interval
            log_events = events.enabled()
            stats = w.stats
            for (attempt, outcome), ok in zip(batch, applied, strict=True):
                w.inflight.settle(attempt)
                stats.record(attempt, outcome, ok)
                # successes log at INFO; retries, failures and stale outcomes at WARNING+
                if log_events or not ok or outcome.kind != "succeeded":
                    w.report(attempt, outcome, ok)
            if log_events and batch:
                events.flush()  # this batch's lines in one write, right after its commit

    def holding(self, since: float | None) -> float | None:
        """Whether to hold the outcomes waiting a little longer instead of recording them
        now: the moment holding began (``since``, monotonic seconds, or now if it begins),
        or None to record them now.

        Held only while the worker has a backlog in hand, so that no slot waits for the
        claim that holding puts off: at least two jobs per slot still prefetched (every
        slot has its next job, and the next after it, for the claim's round trip), fewer
        outcomes waiting than half the prefetch's depth (at least one per slot), and for
        at most :data:`HOLD_WAIT` seconds. Never while stopping or not claiming, nor with
        nothing waiting. The jobs behind the outcomes stay leased (heartbeated) until
        they commit, as while any commit is under way."""
        w = self.worker
        waiting = self.outcomes.qsize()
        if waiting == 0 or not self._claiming or self.stopping:
            return None
        slots = w.inflight.slots
        if waiting >= max(slots, w.prefetch.depth // 2) or len(w.prefetch) < 2 * slots:
            return None
        now = time.monotonic()
        if since is None:
            return now
        return since if now - since < HOLD_WAIT else None

    def check_prefetched(self) -> None:
        """Give back prefetched jobs whose queue was paused and drop those whose lease is
        gone, among the ones that waited longer than ``check_after`` (at most every
        ``check_after`` seconds; jobs of short runs never wait that long); give back too
        those the mean run time now says would wait past the 50 ms rule
        (``Prefetch.take_excess``)."""
        now = time.monotonic()
        if now - self._checked < self.check_after:
            return
        self._checked = now
        w = self.worker
        waited = w.prefetch.older_than(self.check_after)
        if not waited:
            return
        store = w.app.store
        paused = store.paused_among(sorted({job.queue for job in waited}))
        lost = set(store.extend_leases([(j.id, j.lease_token) for j in waited], w.lease))
        stale = {
            (j.id, j.lease_token)
            for j in waited
            if j.queue in paused or (j.id, j.lease_token) in lost
        }
        taken = w.prefetch.remove(lambda job: (job.id, job.lease_token) not in stale)
        w.give_back([job for job in taken if (job.id, job.lease_token) not in lost])
        # claimed while runs were short, they would now wait past the 50 ms rule: back to
        # the queue for an idle worker (the prefetch's depth is no hoard of long jobs)
        w.give_back(w.prefetch.take_excess(self.check_after))


def held_leases(
    prefetch: Prefetch, inflight: InFlight
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(job id, lease token) of every job the worker holds: those claimed ahead, then those
    in its slots, for the heartbeat to extend. The prefetch is read first: a job only ever
    moves from it to the slots, so one that starts between the two reads is in the second
    (and may be in both; extending a lease twice is harmless). Read the other way round,
    it was in neither, and that beat left its lease alone."""
    ahead = prefetch.leases()
    return ahead, inflight.leases()


class Heartbeat(Service):
    """Extends the leases of running jobs every ``heartbeat_interval`` (lease/3) and marks
    the worker alive. A lease that could not be extended was taken over: the task's
    context reports ``lease_lost`` and a ``lease_lost`` event is logged."""

    name = "heartbeat"

    def __init__(self, worker: WorkerHost) -> None:
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
                store_waiting(self.name, exc)
                interval = min(1.0, w.heartbeat_interval)

    def beat(self) -> None:
        w = self.worker
        hit("heartbeat")
        w.app.store.verify()
        ahead, leases = held_leases(w.prefetch, w.inflight)
        lost = set(w.app.store.extend_leases(leases + ahead, w.lease))
        if ahead and lost:
            dropped = w.prefetch.remove(lambda job: (job.id, job.lease_token) not in lost)
            for job in dropped:  # a cancel may have left it a limit hold; no body runs
                w.inflight.unhold(job.id, job.lease_token)
        # stopped bodies of cancelled or expired jobs keep their limit slots until they end
        w.app.store.extend_job_holds(w.inflight.holding(), w.lease)
        gone: list[Attempt] = []
        for job_id, token in sorted(lost):
            # by (id, token): a job replayed while an earlier body of it still runs here
            # has two attempts (or one and a prefetched claim); only the one whose token
            # failed to extend has lost its lease
            with w.inflight.lock:
                attempt = w.inflight.attempts.get((job_id, token))
                if attempt is not None and not attempt.settled:
                    gone.append(attempt)
        # a lease also goes with a cancel or an expiry: then the body is told so (the
        # cancel watch may not have seen it yet), not that its lease was lost
        why = w.app.store.lost_among([a.key for a in gone]) if gone else {}
        for attempt in gone:
            attempt.ctx.mark_lease_lost()
            state = why.get(attempt.key)
            if state in ("cancelled", "expired"):
                stop(w, attempt, state)
                continue
            events.emit(
                events.LEASE_LOST,
                logging.WARNING,
                id=attempt.job.id,
                queue=attempt.job.queue,
                task=attempt.job.task,
                attempt=attempt.job.attempt,
            )
            # the job was reaped or rescued and may run elsewhere already: stop this body
            # too, so a task's concurrency holds (its outcome drops, as fencing would)
            stop(w, attempt, "lease_lost")
        w.app.store.report_worker(w.id, w.self_report())  # what the worker list shows
        # the slots held by bodies that would not stop, the event loop's block, and
        # (SQLite) the clock's mark
        now = time.monotonic()
        blocked = w.loop_blocked_for(now)
        blocked = round(blocked, 3) if blocked >= w.loop_block_threshold else 0.0
        w.app.store.touch_worker(w.id, w.inflight.wedged(now), blocked)


class Reaper(Service):
    """Returns expired leases to the queue (or fails them when no attempts are left),
    at start and every ``reap_interval`` seconds."""

    name = "reaper"

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:
        while not self.sleep(self.worker.reap_interval):
            try:
                self.reap_once()
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)

    def reap_once(self) -> None:
        store = self.worker.app.store
        if not store.lead("reaper", stale_after=max(3 * self.worker.reap_interval, 1.0)):
            return
        summary = store.reap(fail_tasks(self.worker.app))
        self.worker.stats.rescued += summary.recovered
        if summary.recovered or summary.failed:
            events.emit(
                events.LEASES_RECOVERED,
                logging.WARNING,
                recovered=summary.recovered,
                failed=summary.failed,
                ids=list(summary.job_ids[:50]),
            )


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


def with_batch(attempt: Attempt, outcome: Outcome) -> Outcome:
    """The outcome, carrying its job's batch id so the store closes the batch in the same
    transaction (batches: docs/features/batches.md). Plain jobs pass through unchanged."""
    batch_id = attempt.job.batch_id
    if batch_id is None or outcome.batch_id == batch_id:
        return outcome
    return dataclasses.replace(outcome, batch_id=batch_id)


def storable(attempt: Attempt, outcome: Outcome, store: Store) -> Outcome:
    """The outcome, or a failure of its one job when a value in it cannot be stored in
    ``store`` (a ``max_snoozes`` past :data:`durq.checks.INT32_MAX`, a delay past
    :data:`durq.checks.MAX_WAIT`, NaN or negative, a stored result that is not UTF-8 text,
    or on PostgreSQL one holding a NUL character): committed with other jobs' outcomes in
    one transaction, it would make the database refuse them all (and the claimer stop, the
    other jobs run again). The task options are checked at definition; this is the guard
    for what gets past them (a task's attribute changed after it, a codec whose ``encode``
    returns a lone surrogate or a NUL: SQLite's batch of successes would store a surrogate
    as bytes no read can decode, PostgreSQL refuses the NUL)."""
    snoozes, delay, result = outcome.max_snoozes, outcome.delay, outcome.result
    problem = None
    if isinstance(snoozes, bool) or not isinstance(snoozes, int) or not 0 <= snoozes <= INT32_MAX:
        problem = f"max_snoozes {snoozes!r} is not an int from 0 to {INT32_MAX}"
    elif (
        isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= MAX_WAIT
    ):
        problem = f"a delay of {delay!r} s is not from 0 to {MAX_WAIT:g} s"
    elif result is not None and not result.isascii():  # (isascii: a flag, no scan)
        problem = unencodable(result)
    if problem is None:  # NUL is ASCII: one scan of the result, on PostgreSQL only
        problem = nul_problem("its stored result", result, store.holds_nul)
    if problem is None:
        return outcome
    message = f"the attempt's outcome ({outcome.kind}) cannot be stored: {problem}"
    job = attempt.job
    error = AttemptError(job.attempt, store.now(), "UnstorableOutcome", message, "", "permanent")
    return dataclasses.replace(
        outcome, kind="failed", result=None, error=error, delay=0.0, max_snoozes=0
    )


def unencodable(text: str) -> str | None:
    """Why ``text`` (a stored result) cannot go into a database as UTF-8, or None."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return (
            f"its stored result is not UTF-8 text ({exc.reason} at character {exc.start}); "
            "the app's codec must return text"
        )
    return None
