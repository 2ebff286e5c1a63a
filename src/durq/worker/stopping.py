"""The worker's loops that stop running bodies: timeouts, cancels, and the loop watch.

:class:`Timeouts` interrupts a body at its deadline (through ``Worker.interrupt``), raises
again into a ``def`` body every :data:`durq.worker.interrupt.RAISE_EVERY` seconds until it
is gone, reports a body that will not stop (``job_wedged``; it shows as ``wedged`` in
``durq status``) and the event loop of ``async def`` tasks when it is blocked. The
outcome of a stopped attempt is written by the runner once the body has returned, so its
slot and its (heartbeated) lease stay held until then.

:class:`Cancels` finds the attempts in hand whose lease another process ended (a cancel,
a deadline, a rescue, a replay claimed by another worker) and stops their bodies: on
PostgreSQL on the NOTIFY of a cancel, an expiry, a rescue or a replay (and once a second),
on SQLite when the database's data version moved, with one read of the (job id, token)
pairs in hand each time. A cancelled or expired limited job keeps its slot as a limit hold
(made by the store with the cancel) until its body is gone: the heartbeat extends it
meanwhile, and this service deletes it at its next tick after the body returned.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from durq.observability import events
from durq.worker.interrupt import RAISE_EVERY
from durq.worker.service import Service, passing, store_waiting
from durq.worker.state import ENDED_ELSEWHERE, WEDGED_AFTER, Attempt

if TYPE_CHECKING:
    from durq.model import Claimed
    from durq.worker.host import WorkerHost


def _fields(attempt: Attempt) -> dict[str, object]:
    job = attempt.job
    return {"id": job.id, "queue": job.queue, "task": job.task, "attempt": job.attempt}


def stop(worker: WorkerHost, attempt: Attempt, reason: str) -> None:
    """Interrupt ``attempt`` for ``reason`` and log it (once per attempt and reason)."""
    before = attempt.interrupted
    if worker.interrupt(attempt, reason) and before != attempt.interrupted:
        limit = {"timeout": attempt.timeout} if reason == "timeout" else {}
        events.emit(
            events.JOB_INTERRUPTED,
            logging.WARNING,
            **_fields(attempt),
            reason=reason,
            worker_id=worker.id,
            **limit,
        )


#: Seconds a shutdown waits for the bodies it interrupted past the grace to return.
STOP_WAIT = 1.0


def stop_given_back(worker: WorkerHost, attempts: list[Attempt], wait: float) -> None:
    """At shutdown past the grace: interrupt the ``def`` bodies still running (their jobs
    are given back; ``lease_lost``, so a ``finally`` runs) and wait up to ``wait`` seconds
    for them to return. A body left inside the store as it closes would race the close
    (closing a SQLite connection another thread uses can crash the process)."""
    threads = [a for a in attempts if not a.is_async and not a.in_pool]
    for attempt in threads:
        worker.interrupt(attempt, "lease_lost")
    deadline = time.monotonic() + wait
    while any(not a.returned for a in threads) and time.monotonic() < deadline:
        time.sleep(0.01)


def stop_superseded(worker: WorkerHost, job: Claimed) -> None:
    """``job`` was claimed again (a new token) while the body of an earlier attempt of it
    still runs here, and waits for that body. The earlier attempt's lease is gone: its
    token was revoked (by a cancel, an expiry or a reap) before the new claim, even when
    the cancel watch has not read it yet (it reads at its next tick, and would stop the
    body too: its token is no longer the job's). Stop that body
    (``lease_lost``: its outcome drops; a limit hold the cancel left is released once it
    has returned), so that the new attempt starts."""
    old = worker.inflight.body_of(job.id)
    if old is None or old.key == (job.id, job.lease_token) or old.interrupted in ENDED_ELSEWHERE:
        return
    old.ctx.mark_lease_lost()
    stop(worker, old, "lease_lost")


class Timeouts(Service):
    """Interrupts bodies at their deadline, again until they stop; reports the ones that
    will not stop and a blocked event loop. Ticks every :attr:`tick` seconds (in memory)."""

    name = "timeouts"
    tick = 0.05

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker
        self._wedged: set[int] = set()  # id() of attempts reported wedged
        self._blocked_since: float | None = None  # the loop was reported blocked

    def run(self) -> None:
        while not self.sleep(self.tick):
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        w = self.worker
        for attempt in w.inflight.overdue(now):
            stop(w, attempt, "timeout")
        stopping = w.inflight.stopping()
        for attempt in stopping:
            if attempt.interrupted is None:
                continue
            if not attempt.is_async and now - attempt.raised_at >= RAISE_EVERY:
                w.interrupt(attempt, attempt.interrupted)  # asked again until it is gone
            since = attempt.interrupted_at or now
            if now - since >= WEDGED_AFTER and id(attempt) not in self._wedged:
                self._wedged.add(id(attempt))
                events.emit(
                    events.JOB_WEDGED,
                    logging.ERROR,
                    **_fields(attempt),
                    reason=attempt.interrupted,
                    seconds=round(now - since, 3),
                    worker_id=w.id,
                    hint="a blocking C call (sleep, socket, lock) does not see the "
                    "interruption until it returns; its slot stays taken until then",
                )
                self.publish(now)
        self._wedged &= {id(a) for a in stopping}
        self.watch_loop(now)

    def watch_loop(self, now: float) -> None:
        """Report the event loop of ``async def`` tasks blocked past the threshold, and
        when it runs again."""
        w = self.worker
        blocked = w.loop_blocked_for(now)
        if blocked >= w.loop_block_threshold and self._blocked_since is None:
            self._blocked_since = now - blocked
            events.emit(
                events.LOOP_BLOCKED,
                logging.ERROR,
                worker_id=w.id,
                seconds=round(blocked, 3),
                threshold=w.loop_block_threshold,
                hint="an async def task runs blocking code (time.sleep, a sync client) on "
                "the event loop; no other async job runs meanwhile",
            )
            self.publish(now)
        elif blocked == 0.0 and self._blocked_since is not None:
            events.emit(
                events.LOOP_UNBLOCKED,
                logging.WARNING,
                worker_id=w.id,
                seconds=round(now - self._blocked_since, 3),
            )
            self._blocked_since = None
            self.publish(now)

    def publish(self, now: float) -> None:
        """Write the wedged slots and the loop's block to the worker's row at once (the
        heartbeat writes them too, but only every lease/3), for ``durq status``."""
        w = self.worker
        blocked = w.loop_blocked_for(now)
        blocked = round(blocked, 3) if blocked >= w.loop_block_threshold else 0.0
        try:
            w.app.store.touch_worker(w.id, w.inflight.wedged(now), blocked)
        except Exception as exc:
            if not passing(exc):
                raise
            store_waiting(self.name, exc)

    @property
    def loop_blocked(self) -> bool:
        """Whether the event loop is blocked now (as last reported)."""
        return self._blocked_since is not None


class Cancels(Service):
    """Stops the bodies of jobs in hand that were cancelled, expired, rescued or replayed
    elsewhere, within about :attr:`tick` seconds of the signal (a NOTIFY; a data-version
    change)."""

    name = "cancels"
    tick = 0.1

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:
        while not self.sleep(self.tick):
            try:
                self.release()
                self.check()
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)
        try:
            self.release()  # bodies that returned during the shutdown
        except Exception as exc:  # noqa: BLE001 - the holds lapse with their leases
            store_waiting(self.name, exc)

    def release(self) -> None:
        """Free the limit slots that cancelled or expired jobs kept while their bodies ran
        (``Store.release_job_holds``), now that those bodies are gone. On a store error
        they are kept for the next tick (and lapse with their leases if the worker dies)."""
        inflight = self.worker.inflight
        gone = inflight.take_unheld()
        if not gone:
            return
        try:
            self.worker.app.store.release_job_holds(gone)
        except BaseException:
            for job_id, token in gone:
                inflight.unhold(job_id, token)
            raise

    def check(self) -> None:
        """When the store signals a change, read which attempts in hand lost their lease
        (``Store.lost_among``, by (job id, token)) and stop their bodies: ``cancelled`` or
        ``expired`` as the job now is, else ``lease_lost`` (the job was requeued by a
        rescue or a reap, or replayed, and maybe claimed again elsewhere already)."""
        w = self.worker
        store = w.app.store
        if not store.cancel_signalled():
            return
        running = {a.key: a for a in w.inflight.running()}
        if not running:
            return
        for key, why in store.lost_among(sorted(running)).items():
            attempt = running[key]
            if attempt.returned:  # its outcome went in meanwhile: nothing to stop
                continue
            attempt.ctx.mark_lease_lost()  # its lease went with the cancel, or elsewhere
            stop(w, attempt, why if why in ("cancelled", "expired") else "lease_lost")
