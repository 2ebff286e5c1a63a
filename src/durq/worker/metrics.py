"""``durq worker --metrics-port PORT``: this worker's own counters in Prometheus format.

Served on 127.0.0.1:PORT/metrics by ``prometheus_client`` (extra ``durq[dashboard]``) from
a registry of its own, fed by an observer on :class:`durq.worker.stats.WorkerStats`:

- ``durq_attempts_total{queue,task,outcome}``: outcome ``succeeded``, ``failed`` (for good),
  ``retried`` (failed, will run again) or ``stale`` (its lease was taken over);
- ``durq_attempt_seconds{queue,task}``: run time of each attempt (histogram);
- ``durq_wait_seconds{queue,task}``: time from the job becoming runnable (its ``run_at``:
  enqueued, due, or its backoff over) to this attempt's start, in the store's clock
  (histogram; what a queue's backlog and the prefetch cost a job);
- ``durq_jobs_in_hand``: attempts this worker holds now (gauge);
- ``durq_jobs_rescued_total``: expired leases this worker's reaper returned to the queue.

A port another process holds is reported as the ``metrics_unavailable`` event (ERROR) and
the worker runs on without it; a second call for the same worker is reported and ignored.
For figures summed over every worker, whichever process answers, scrape the dashboard's
``/metrics``, which reads them from the database (case 30).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from durq.errors import ConfigError
from durq.model import Outcome
from durq.observability import events
from durq.worker.state import Attempt

if TYPE_CHECKING:
    from durq.worker.worker import Worker

METRICS_UNAVAILABLE = "metrics_unavailable"

#: Buckets of ``durq_wait_seconds`` (seconds): a job can wait minutes or hours behind a
#: backlog, far longer than most run.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


def serve_metrics(worker: Worker, port: int, host: str = "127.0.0.1") -> Any | None:
    """Start the exporter for ``worker``; returns the HTTP server, or None when it could
    not bind (reported) or was started already (reported).

    Raises:
        ConfigError: prometheus-client is not installed.
    """
    try:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        from prometheus_client.exposition import start_http_server
    except ImportError as exc:
        raise ConfigError(
            f"--metrics-port needs prometheus-client: pip install 'durq[dashboard]' ({exc})"
        ) from exc
    if getattr(worker, "_metrics_server", None) is not None:
        events.emit(
            METRICS_UNAVAILABLE, logging.ERROR, worker_id=worker.id, port=port,
            error="the metrics exporter of this worker is already started; ignored",
        )  # fmt: skip
        return None
    registry = CollectorRegistry(auto_describe=False)
    attempts = Counter(
        "durq_attempts", "Attempts by outcome.", ["queue", "task", "outcome"], registry=registry
    )
    seconds = Histogram(
        "durq_attempt_seconds", "Run time of attempts.", ["queue", "task"], registry=registry
    )
    waited = Histogram(
        "durq_wait_seconds",
        "Time from a job becoming runnable to its attempt's start.",
        ["queue", "task"],
        buckets=WAIT_BUCKETS,
        registry=registry,
    )
    in_hand = Gauge("durq_jobs_in_hand", "Attempts held now.", registry=registry)
    in_hand.set_function(lambda: len(worker.inflight))
    rescued = Counter(
        "durq_jobs_rescued", "Leases this worker's reaper returned.", registry=registry
    )
    seen = [worker.stats.rescued]

    def observe(attempt: Attempt, outcome: Outcome, applied: bool, ran: float) -> None:
        job = attempt.job
        kind = "stale" if not applied else {"retry": "retried"}.get(outcome.kind, outcome.kind)
        attempts.labels(job.queue, job.task, kind).inc()
        seconds.labels(job.queue, job.task).observe(ran)
        if job.run_at is not None:  # started `ran` seconds ago, in the store's clock
            start = worker.app.store.now() - (time.monotonic() - attempt.started)
            waited.labels(job.queue, job.task).observe(max(0.0, start - job.run_at))
        if worker.stats.rescued != seen[0]:
            rescued.inc(worker.stats.rescued - seen[0])
            seen[0] = worker.stats.rescued

    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        events.emit(
            METRICS_UNAVAILABLE, logging.ERROR, worker_id=worker.id, port=port,
            error=f"cannot serve metrics on {host}:{port}: {exc}; the worker runs without them",
        )  # fmt: skip
        return None
    worker.stats.observers.append(observe)
    worker._metrics_server = server  # type: ignore[attr-defined]
    return server
