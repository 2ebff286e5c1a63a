"""The worker's prefetch: jobs claimed ahead of its free slots, waiting to start.

A slot that frees takes its next job from here at once (on the runner thread, with no
commit in between), while the claimer commits the finished job's outcome together with
the claim that refills the buffer: one commit per batch, and a slot never waits for it.

Prefetched jobs are claimed like any other (state ``running``, leased, attempt counted), so
the heartbeat extends their leases and a crash repeats them (after the lease) like the jobs
in hand. At shutdown, on a pause of their queue, or when they sat too long, they are given
back without spending an attempt (``Store.give_back``).

Every claimed job starts from here, so this is also where a job waits whose earlier body
still runs in this worker: a job cancelled while its body was in a blocking call and
replayed at once (docs/features/replay.md) is claimed again under a new token, but its
new attempt starts only once the old body has returned. It waits like a prefetched job
(leased, heartbeated, given back at shutdown) without holding up the jobs behind it.

How deep the buffer goes: at most ``depth`` jobs (the worker's ``prefetch``, default
:func:`default_depth`), and no more than the slots would start within
``max_wait`` seconds at the recent mean run time, and nothing before the first job has
returned (the run time is unknown then). Long jobs therefore prefetch nothing and leave the
queue to idle workers (Celery's documented trap with long tasks), while no-op jobs keep the
full depth; and a worker restarted after a poison job killed it claims only what its slots
run until a job has come back. Jobs claimed while the mean was short that the mean now
says would wait past ``max_wait`` (short jobs gave way to long ones) go back to the queue
once they have waited 0.25 s (:meth:`Prefetch.take_excess`), for an idle worker to take.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Container

from durq.model import Claimed

#: Seconds a prefetched job may be expected to wait for a slot (see the module docstring).
MAX_WAIT = 0.05
#: Weight of the newest run time in the running mean (an exponentially weighted mean).
SMOOTHING = 0.1


#: The least default depth (see :func:`default_depth`).
MIN_DEPTH = 64
#: Jobs per slot of the default depth (see :func:`default_depth`).
PER_SLOT = 8


def default_depth(concurrency: int, per_slot: int = PER_SLOT) -> int:
    """The default prefetch: ``per_slot`` (:data:`PER_SLOT`, 8) jobs per slot, at least
    :data:`MIN_DEPTH` (64), so that one slot holds enough no-op jobs to keep running
    through the claimer's transaction (a FULL commit plus the claim, 1-3 ms on the 2-core
    test machine, while a no-op job costs 60-100 us of durq's own work). Measured there on
    an idle machine, 10,000 no-ops on one slot, FULL: depth 16 5,800-6,400 jobs/s (the slot
    idle 46 % of the time, waiting for the next claim), 32 6,600-7,200, 64 6,600-7,900, 128
    7,500-8,700. Eight per slot (it was two): with many slots the claimer's statements
    carry more jobs each (PostgreSQL, 4 processes x 16 slots: from ~36 to ~60 jobs per
    commit, see docs/features/performance.md), and each statement costs the same whatever it
    carries. The time bound (:data:`MAX_WAIT`) keeps what a crash repeats to about 50 ms of
    the slots' work however deep the buffer."""
    return max(per_slot * concurrency, MIN_DEPTH)


class Prefetch:
    """The jobs claimed ahead, in claim order, and how many more to claim.

    Args:
        depth: most jobs held (0 turns prefetch off).
        slots: the worker's concurrency (for the expected wait).
        max_wait: seconds, see :data:`MAX_WAIT`.
    """

    def __init__(self, depth: int, slots: int, max_wait: float = MAX_WAIT) -> None:
        self.depth = depth
        self.slots = slots
        self.max_wait = max_wait
        self.lock = threading.Lock()
        self._jobs: collections.deque[tuple[Claimed, float]] = collections.deque()
        # claimed jobs whose earlier body still runs here (a replay of a cancelled job):
        # they start once it returned (almost always empty)
        self._waiting: list[tuple[Claimed, float]] = []
        self._mean_run: float | None = None  # seconds; None until the first job returns
        self.closed = False

    def __len__(self) -> int:
        return len(self._jobs) + len(self._waiting)

    def room(self) -> int:
        """How many more jobs the claimer may claim ahead now."""
        if self.closed or self.depth <= 0 or self._mean_run is None:
            return 0
        depth = self.depth
        if self._mean_run > 0:
            depth = min(depth, int(self.max_wait * self.slots / self._mean_run))
        return max(0, depth - len(self))

    def ran(self, seconds: float) -> None:
        """Note a job's run time (seconds), for :meth:`room`."""
        if self._mean_run is None:
            self._mean_run = seconds
        else:
            self._mean_run += SMOOTHING * (seconds - self._mean_run)

    def put(self, jobs: list[Claimed]) -> list[Claimed]:
        """Hold ``jobs`` until a slot frees; after :meth:`close` they are refused and
        returned (the caller gives them back)."""
        now = time.monotonic()
        with self.lock:
            if self.closed:
                return list(jobs)
            self._jobs.extend((job, now) for job in jobs)
        return []

    def start(
        self,
        free: Callable[[], int],
        run: Callable[[Claimed], None],
        running: Container[int] = frozenset(),
    ) -> list[Claimed]:
        """Start prefetched jobs while ``free()`` reports a free slot: ``run(job)`` takes the
        slot (it adds the attempt) under this lock, so two callers never overfill the slots.

        A job whose id is in ``running`` (the job ids whose bodies run in this worker: an
        earlier attempt of the same job) does not start: it waits, and the next job is
        tried. Waiting jobs whose id has left ``running`` go first at the next call (the
        caller calls again once a body returned, after taking it out of ``running``).

        Returns:
            The jobs that began to wait in this call (their earlier attempt's lease is
            gone: a new claim revoked its token; the caller stops that body).
        """
        parked: list[Claimed] = []
        with self.lock:
            if self._waiting and not self.closed:
                self._unpark(running)
            while self._jobs and not self.closed and free() > 0:
                entry = self._jobs.popleft()
                job = entry[0]
                if job.id in running:  # one dict lookup: the hot path pays nothing more
                    self._waiting.append(entry)
                    parked.append(job)
                    continue
                run(job)
        return parked

    def _unpark(self, running: Container[int]) -> None:
        """Put the waiting jobs whose earlier body has returned back in front, in order
        (under :attr:`lock`)."""
        ready = [e for e in self._waiting if e[0].id not in running]
        if ready:
            self._waiting = [e for e in self._waiting if e[0].id in running]
            self._jobs.extendleft(reversed(ready))

    def take_excess(self, older_than: float) -> list[Claimed]:
        """Take out (and return, newest first) the jobs held beyond what the slots would
        start within ``max_wait`` at the mean run time *now*, among those that have waited
        longer than ``older_than`` seconds. They were claimed while the mean was shorter
        (short jobs gave way to longer ones); the caller gives them back, so that an idle
        worker runs them instead of this one holding them (up to ``depth`` of them) until
        its slots get there. Jobs waiting for an earlier body are left alone."""
        with self.lock:
            mean = self._mean_run
            if self.closed or mean is None or mean <= 0:
                return []
            over = len(self._jobs) - min(self.depth, int(self.max_wait * self.slots / mean))
            if over <= 0:
                return []
            edge = time.monotonic() - older_than
            taken = [e for e in reversed(self._jobs) if e[1] < edge][:over]
            if taken:
                out = {id(e) for e in taken}
                self._jobs = collections.deque(e for e in self._jobs if id(e) not in out)
            return [job for job, _ in taken]

    def leases(self) -> list[tuple[int, int]]:
        """(job id, token) of every prefetched (or waiting) job: the heartbeat keeps them
        alive."""
        with self.lock:
            return [(job.id, job.lease_token) for job, _ in self._held()]

    def older_than(self, seconds: float) -> list[Claimed]:
        """The jobs that have waited longer than ``seconds``."""
        edge = time.monotonic() - seconds
        with self.lock:
            return [job for job, at in self._held() if at < edge]

    def remove(self, keep: Callable[[Claimed], bool]) -> list[Claimed]:
        """Take out (and return) the jobs for which ``keep`` is false."""
        with self.lock:
            gone = [job for job, _ in self._held() if not keep(job)]
            if gone:
                out = {id(job) for job in gone}
                self._jobs = collections.deque(e for e in self._jobs if id(e[0]) not in out)
                self._waiting = [e for e in self._waiting if id(e[0]) not in out]
            return gone

    def _held(self) -> list[tuple[Claimed, float]]:
        """Every job held, waiting ones last (under :attr:`lock`)."""
        return [*self._jobs, *self._waiting] if self._waiting else list(self._jobs)

    def stop_starting(self) -> None:
        """From now on start nothing and claim nothing ahead (a stop was requested); the
        jobs held stay for :meth:`close` to return."""
        with self.lock:
            self.closed = True

    def close(self) -> list[Claimed]:
        """Stop starting and claiming ahead; return every job still held (to give back)."""
        with self.lock:
            self.closed = True
            held = [job for job, _ in self._held()]
            self._jobs.clear()
            self._waiting = []
            return held
