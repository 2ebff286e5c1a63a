"""A running job cancelled and replayed at once, its replay claimed by *another* worker:
the old body is stopped by the first worker's cancel watch within moments, not left to
its heartbeat (docs/features/replay.md, "A replay of a job whose body still runs").

Two real ``Worker`` s run in threads on one database, each on its own ``Durq`` (its own
store, as two processes would have), each with one slot and no prefetch: the worker that
runs the first body has no room for the replay, so the other one claims it. The first body
waits for a signal in short ``time.sleep`` calls (an interruption lands between them) and
records, in its ``finally``, when it ended and why. The lease is 120 s, so the heartbeat
(every lease/3 = 40 s) is not what stops it within the 10 s the test waits.

Before this, the cancel watch read only the job's state: when the other worker had claimed
the replay before the watch looked (the row ``running`` again, under a new token), the old
body ran on until the heartbeat. The watch reads at a random point of its 0.1 s tick, so a
single round would see the cancel first now and then; several rounds make that chance
negligible.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import durq
from tests.integration.test_replay_attacks import running, token_of
from tests.support.procs import wait_for

LEASE = 120.0  # the heartbeat (lease/3) cannot be what stops the old body
STOPPED_WITHIN = 10.0  # seconds the old body has to be gone after the replay
ROUNDS = 5


@dataclass
class End:
    job_id: int
    token: int
    first: bool  # the job's first body (the one that waits)
    at: float  # monotonic
    stopped: str | None  # ctx.interrupted


class Bodies:
    """Each job's first body waits until :attr:`release` (or a stop); later ones return."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started: dict[int, int] = {}  # job id -> lease token of its first body
        self.ends: list[End] = []

    def register(self, app: durq.Durq) -> Any:
        def waits() -> str:
            ctx = durq.context()
            with self.lock:
                first = ctx.job_id not in self.started
                if first:
                    self.started[ctx.job_id] = ctx.lease_token
            try:
                while first and not self.release.is_set():
                    time.sleep(0.02)  # an interruption lands between these calls
                return "done"
            finally:
                end = End(ctx.job_id, ctx.lease_token, first, time.monotonic(), ctx.interrupted)
                with self.lock:
                    self.ends.append(end)

        return app.task(max_attempts=3)(waits)

    def first_end(self, job_id: int) -> End | None:
        with self.lock:
            return next((e for e in self.ends if e.job_id == job_id and e.first), None)


def test_the_old_body_stops_when_another_worker_claims_the_replay(
    make_any: Callable[..., durq.Durq],
) -> None:
    bodies = Bodies()
    one, two, operator = make_any(), make_any(), make_any()
    task = bodies.register(one)
    bodies.register(two)
    options = {"concurrency": 1, "prefetch": 0, "lease": LEASE}
    reasons: list[str | None] = []
    with running(one, **options), running(two, **options):
        try:
            for _ in range(ROUNDS):
                job = task.enqueue()
                wait_for(lambda j=job: j.id in bodies.started, 30, 0.005, "the first body")
                first = bodies.started[job.id]
                operator.cancel(job.id)
                operator.retry(job.id)  # at once: the old body still runs
                replayed = time.monotonic()
                # claimed again under a new token (by the other worker, whose slot is free)
                wait_for(
                    lambda j=job, first=first: (
                        token_of(operator, j.id) not in (None, first)
                        or operator.get(j.id).state == "succeeded"
                    ),
                    30,
                    0.002,
                    "the replay to be claimed",
                )
                wait_for(
                    lambda j=job: bodies.first_end(j.id) is not None,
                    STOPPED_WITHIN,
                    0.01,
                    f"the old body of job {job.id} to stop (its heartbeat is {LEASE / 3} s away)",
                )
                end = bodies.first_end(job.id)
                assert end is not None
                assert end.at - replayed < STOPPED_WITHIN
                reasons.append(end.stopped)
                wait_for(lambda j=job: operator.get(j.id).state == "succeeded", 30, 0.01)
                final = operator.get(job.id)
                assert final.attempts == 1  # the replay ran to its end, once
                kinds = [e.kind.split(":")[0] for e in final.errors]
                assert kinds == ["cancelled", "replayed"], kinds
        finally:
            bodies.release.set()  # no body outlives the workers
    print(f"\nthe old bodies were stopped as: {reasons}")
    assert set(reasons) <= {"cancelled", "lease_lost"}, reasons
