"""WorkerHost: what the worker's services (claimer, heartbeat, reaper, timeouts, leader
duties) see of the :class:`durq.worker.Worker` that runs them.

A structural type, so that the services are typed without importing ``worker.py`` (which
imports them): every import in ``durq/worker/`` points from the supervisor down to its parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from durq.model import Claimed, Outcome, WorkerReport
    from durq.registry import Registry
    from durq.worker.executor import Executor
    from durq.worker.prefetch import Prefetch
    from durq.worker.state import Attempt, InFlight
    from durq.worker.stats import WorkerStats


class OutcomeSink(Protocol):
    """The claimer as the other services use it: hand it an outcome, or wake it."""

    def submit(self, attempt: Attempt, outcome: Outcome) -> None: ...

    def wake(self) -> None: ...


class WorkerHost(Protocol):
    """The worker's settings and parts its services use.

    Attributes:
        app: the app whose tasks run here.
        id: the worker's id (as registered in the store).
        lease: seconds of each claim's lease.
        heartbeat_interval, poll_interval, idle_claim_interval, reap_interval: seconds.
        loop_block_threshold: seconds without a callback after which the event loop of
            ``async def`` tasks is reported blocked.
        queues, task_names: what the worker claims.
        inflight: the attempts in hand and the free slots.
        prefetch: the jobs claimed ahead of the free slots.
        executor: turns attempts into outcomes.
        claimer: the one writer of outcomes and claims.
        stats: the worker's counters since start (bumped by the claimer).
    """

    app: Registry
    id: str
    lease: float
    heartbeat_interval: float
    poll_interval: float
    idle_claim_interval: float
    reap_interval: float
    loop_block_threshold: float
    queues: list[str]
    task_names: list[str]
    inflight: InFlight
    prefetch: Prefetch
    executor: Executor
    stats: WorkerStats

    @property
    def claimer(self) -> OutcomeSink: ...

    def dispatch(self, job: Claimed) -> None: ...

    def start_prefetched(self) -> None: ...

    def give_back(self, jobs: list[Claimed]) -> int: ...

    def report(self, attempt: Attempt, outcome: Outcome, applied: bool) -> None: ...

    def self_report(self) -> WorkerReport: ...

    def crashed(self, service: str, exc: BaseException) -> None: ...

    def interrupt(self, attempt: Attempt, reason: str) -> bool: ...

    def loop_blocked_for(self, now: float) -> float: ...
