"""What ``durq soak`` runs: its settings (:class:`SoakConfig`), the mix of job kinds with
the state each must end in and the runs it is planned to take (:data:`KINDS`), and the
:class:`Producer` thread that enqueues them at a steady rate into a ledger."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from durq.app import Durq
from durq.errors import ConfigError, DurqError
from durq.proving import soak_app
from durq.proving.soak_observe import OBSERVE_INTERVAL, Expect
from durq.task import EnqueueOptions

#: Seconds between producer batches (one enqueue transaction per kind group).
PRODUCE_INTERVAL = 0.25
#: Attempts of ``exhausted`` jobs (each attempt fails; the job ends failed).
EXHAUSTED_ATTEMPTS = 3
#: ``expire`` jobs are parked (no worker runs them) with a deadline this many seconds after
#: their creation: they expire. (They were scheduled 30 s ahead with this deadline; an
#: enqueue now refuses a job due only after its own deadline.)
EXPIRE_DEADLINE = 2.0


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of soak job: its share of the mix, where it goes, and what it must end as.

    Attributes:
        name: the ``kind`` (see :mod:`durq.proving.soak_app`).
        weight: relative share of the jobs produced.
        task: the routing name.
        state: the terminal state it must reach.
        runs: the runs it is planned to take when nothing is killed (an upper bound for
            runs in workers that were never signalled).
    """

    name: str
    weight: float
    task: str
    state: str
    runs: int


#: The mix. Flaky jobs fail ``fail_times`` (1 or 2) times; their planned runs are counted
#: per job (``fail_times + 1``), the figure here is the most.
KINDS: tuple[Kind, ...] = (
    Kind("fast", 60, soak_app.WORK_TASK, "succeeded", 1),
    Kind("slow", 5, soak_app.WORK_TASK, "succeeded", 1),
    Kind("flaky", 12, soak_app.WORK_TASK, "succeeded", 3),
    Kind("permanent", 5, soak_app.WORK_TASK, "failed", 1),
    Kind("exhausted", 4, soak_app.WORK_TASK, "failed", EXHAUSTED_ATTEMPTS),
    Kind("timeout", 3, soak_app.TIMEOUT_TASK, "succeeded", 2),
    Kind("atimeout", 3, soak_app.ATIMEOUT_TASK, "succeeded", 2),
    Kind("expire", 8, soak_app.WORK_TASK, "expired", 0),
)
KIND_BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """How long and how hard to soak.

    Attributes:
        url: the database URL (``sqlite:///...``, a path, or ``postgresql://...``).
        seconds: how long the producer runs (> 0); the drain comes on top.
        rate: jobs enqueued per second (> 0).
        workers: worker processes alive at any time (>= 2: worker 0 is never signalled).
        concurrency: slots per worker (>= 1).
        lease: seconds a worker's claim lasts without a heartbeat (> 0).
        kill_every: (min, max) seconds between two signals, drawn uniformly.
        retain: seconds the pruner keeps finished jobs (every finished state; >= 10, far
            more than :data:`OBSERVE_INTERVAL`).
        prune_interval: seconds between the pruner's passes (> 0).
        report_every: seconds between progress lines (> 0).
        drain: seconds to wait after the producer stops for every job to finish (> 0).
        warmup: seconds of RSS and size growth ignored at the start (None: a quarter of
            the run, at most 60).
        queue: the queue the jobs go to; it must be empty.
        seed: seeds the mix, durations and kills (None: a random seed, reported).
        producers: 0 to enqueue from a thread of the soak; N >= 1 to enqueue from N
            producer processes (:mod:`durq.proving.soak_producers`, ``rate / N`` each)
            that are killed and restarted like the workers.
    """

    url: str
    seconds: float = 600.0
    rate: float = 30.0
    workers: int = 3
    concurrency: int = 4
    lease: float = 5.0
    kill_every: tuple[float, float] = (5.0, 25.0)
    retain: float = 30.0
    prune_interval: float = 5.0
    report_every: float = 30.0
    drain: float = 120.0
    warmup: float | None = None
    queue: str = soak_app.QUEUE
    seed: int | None = None
    producers: int = 0

    def check(self) -> None:
        """Raises:
        ConfigError: a figure out of range."""
        positive = {
            "seconds": self.seconds,
            "rate": self.rate,
            "lease": self.lease,
            "prune_interval": self.prune_interval,
            "report_every": self.report_every,
            "drain": self.drain,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"{name} must be > 0, not {value}")
        if self.workers < 2:
            raise ConfigError(
                f"workers must be >= 2 (worker 0 is never killed), not {self.workers}"
            )
        if self.producers < 0:
            raise ConfigError(f"producers must be >= 0, not {self.producers}")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, not {self.concurrency}")
        low, high = self.kill_every
        if not 0 < low <= high:
            raise ConfigError(f"kill_every must be 0 < min <= max, not {self.kill_every}")
        if self.retain < 10 * OBSERVE_INTERVAL:
            raise ConfigError(
                f"retain must be >= {10 * OBSERVE_INTERVAL:g} s (the soak must see each job "
                f"finished before it is pruned), not {self.retain}"
            )
        if self.warmup is not None and self.warmup < 0:
            raise ConfigError(f"warmup must be >= 0, not {self.warmup}")

    @property
    def warmup_seconds(self) -> float:
        return self.warmup if self.warmup is not None else min(60.0, self.seconds / 4)


class Producer(threading.Thread):
    """Enqueues ``rate`` jobs per second in small batches and writes each into the ledger.

    Args:
        url: the database URL.
        config: the soak's settings.
        rng: its own random generator (seeded from the soak's seed).
        ledger: job id -> :class:`Expect`, shared with the soak (guarded by ``lock``).
        pending: ids not yet seen finished (guarded by ``lock``).
        lock: guards ``ledger`` and ``pending``.
    """

    def __init__(
        self,
        url: str,
        config: SoakConfig,
        rng: random.Random,
        ledger: dict[int, Expect],
        pending: set[int],
        lock: threading.Lock,
    ) -> None:
        super().__init__(name="durq-soak-producer", daemon=True)
        self.app = Durq(url)
        self.config = config
        self.rng = rng
        self.ledger = ledger
        self.pending = pending
        self.lock = lock
        self.stop_event = threading.Event()
        self.enqueued = 0
        self.errors: list[str] = []
        self._weights = [k.weight for k in KINDS]

    def _item(self) -> tuple[str, dict[str, Any], Expect]:
        kind = self.rng.choices(KINDS, self._weights)[0]
        payload: dict[str, Any] = {}
        runs = kind.runs
        if kind.task == soak_app.WORK_TASK:
            payload = {"kind": kind.name}
            if kind.name == "fast":
                payload["ms"] = round(self.rng.uniform(1, 10), 2)
            elif kind.name == "slow":
                payload["ms"] = round(self.rng.uniform(300, 2500), 1)
            elif kind.name == "flaky":
                payload["fail_times"] = self.rng.randint(1, 2)
                runs = payload["fail_times"] + 1
        return kind.name, payload, Expect(kind.name, kind.state, runs)

    def _options(self, kind: str) -> EnqueueOptions:
        if kind == "exhausted":
            return EnqueueOptions(queue=self.config.queue, max_attempts=EXHAUSTED_ATTEMPTS)
        if kind == "expire":
            return EnqueueOptions(queue=self.config.queue, park=True, deadline_in=EXPIRE_DEADLINE)
        return EnqueueOptions(queue=self.config.queue)

    def produce(self, n: int) -> None:
        """Enqueue ``n`` jobs: one transaction per group of kinds that share options."""
        groups: dict[tuple[str, str], list[tuple[dict[str, Any], Expect]]] = defaultdict(list)
        for _ in range(n):
            kind, payload, expect = self._item()
            task = KIND_BY_NAME[kind].task
            group = kind if kind in ("exhausted", "expire") else "default"
            groups[(task, group)].append((payload, expect))
        for (task, group), items in groups.items():
            opts = self._options(group)
            jobs = self.app.enqueue_many_with(
                task, [p for p, _ in items], opts, keys=None, task=None
            )
            with self.lock:
                for job, (_, expect) in zip(jobs, items, strict=True):
                    self.ledger[job.id] = expect
                    self.pending.add(job.id)
            self.enqueued += len(jobs)

    def run(self) -> None:
        """Enqueue what is due every :data:`PRODUCE_INTERVAL` seconds until stopped."""
        started = time.monotonic()
        while not self.stop_event.is_set():
            due = int(self.config.rate * (time.monotonic() - started)) - self.enqueued
            if due > 0:
                try:
                    self.produce(due)
                except DurqError as exc:  # e.g. a busy database: report it, go on
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop_event.wait(PRODUCE_INTERVAL)

    def stop(self) -> None:
        """Stop producing (waits up to 30 s for the thread) and close its app."""
        self.stop_event.set()
        self.join(30)
        self.app.close()
