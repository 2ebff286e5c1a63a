"""``/metrics`` of the dashboard: Prometheus figures read from the database at each scrape.

Because they come from the database, every scrape gives the same answer whichever process
serves it, and counters of every worker are summed (case 30: not one process's view).

- ``durq_jobs{queue,state}``: jobs by queue and state now (gauge).
- ``durq_oldest_queued_age_seconds{queue}``: age of the oldest ready job (gauge).
- ``durq_workers_alive``: live workers (gauge; :func:`durq.observability.processes.live`).
- ``durq_jobs_in_hand{queue}``: attempts running now, from the ``running`` state (gauge).
- ``durq_jobs_enqueued_total``: jobs ever inserted (the id sequence: never decreases).
- ``durq_worker_attempts_total{worker,outcome}``: each live worker's attempts since it
  started (``succeeded``, ``failed``); a restarted worker is a new series, as Prometheus
  expects of a counter reset.
- ``durq_recent_wait_seconds{queue}`` and ``durq_recent_run_seconds{queue}``: the
  distribution of the jobs that succeeded or failed in the last :data:`RECENT` seconds
  (at most :data:`RECENT_JOBS` per queue and state, the newest), as gauge histograms (a
  window, not a counter: it can go down): wait from becoming runnable to the last attempt's
  start, run from that start to the end. Each worker's own ``--metrics-port`` has the
  counting histograms (``durq_wait_seconds``, ``durq_attempt_seconds``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from durq.observability import views
from durq.observability.status import STATES
from durq.worker.metrics import WAIT_BUCKETS

#: Seconds of finished jobs the recent histograms describe, and the most jobs per queue and
#: state they read (one range scan of the finished index each, newest first).
RECENT = 300.0
RECENT_JOBS = 10_000


class StoreCollector(Collector):
    """Collects the figures above from ``app`` (a :class:`durq.Durq`) at each scrape."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        snap = self.app.status()
        jobs = GaugeMetricFamily("durq_jobs", "Jobs by queue and state.", labels=["queue", "state"])
        oldest = GaugeMetricFamily(
            "durq_oldest_queued_age_seconds",
            "Age of the oldest ready job per queue.",
            labels=["queue"],
        )
        for name, q in snap["queues"].items():
            for state in STATES:
                jobs.add_metric([name, state], q["counts"].get(state, 0))
            if q["oldest_queued_age"] is not None:
                oldest.add_metric([name], q["oldest_queued_age"])
        yield jobs
        yield oldest
        live = views.workers(self.app.store)
        yield GaugeMetricFamily("durq_workers_alive", "Live workers.", value=len(live))
        attempts = CounterMetricFamily(
            "durq_worker_attempts",
            "Attempts of each live worker since it started, by outcome.",
            labels=["worker", "outcome"],
        )
        for w in live:
            attempts.add_metric([w["id"], "succeeded"], w["done"])
            attempts.add_metric([w["id"], "failed"], w["failed"])
        yield attempts
        yield CounterMetricFamily(
            "durq_jobs_enqueued", "Jobs ever inserted.", value=self.app.store.enqueued_total()
        )
        yield from recent_histograms(self.app.store, list(snap["queues"]), snap["now"])


def _buckets(values: list[float]) -> list[tuple[str, float]]:
    counts = [float(sum(1 for v in values if v <= le)) for le in WAIT_BUCKETS]
    return [
        *zip((repr(float(b)) for b in WAIT_BUCKETS), counts, strict=True),
        ("+Inf", float(len(values))),
    ]


def recent_histograms(store: Any, queues: list[str], now: float) -> Iterator[Metric]:
    """The wait and run gauge histograms of the jobs finished in the last :data:`RECENT` s."""
    wait = GaugeHistogramMetricFamily(
        "durq_recent_wait_seconds",
        f"Jobs finished in the last {RECENT:.0f} s: runnable to the last attempt's start.",
        labels=["queue"],
    )
    run = GaugeHistogramMetricFamily(
        "durq_recent_run_seconds",
        f"Jobs finished in the last {RECENT:.0f} s: the last attempt's start to its end.",
        labels=["queue"],
    )
    by_queue: dict[str, tuple[list[float], list[float]]] = {q: ([], []) for q in queues}
    for queue, waited, ran in store.finished_timings(now - RECENT, queues, RECENT_JOBS):
        by_queue[queue][0].append(waited)
        by_queue[queue][1].append(ran)
    for queue, (waits, runs) in by_queue.items():
        wait.add_metric([queue], _buckets(waits), sum(waits))
        run.add_metric([queue], _buckets(runs), sum(runs))
    yield wait
    yield run


def registry_for(app: Any) -> CollectorRegistry:
    """A registry holding only :class:`StoreCollector` (no process metrics of this server)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app))
    return registry
