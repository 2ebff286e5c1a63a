"""``/metrics`` of the dashboard: Prometheus figures read from the database at each scrape.

Because they come from the database, every scrape gives the same answer whichever process
serves it, and counters of every worker are summed (case 30: not one process's view).

- ``durq_jobs{queue,state}``: jobs by queue and state now (gauge).
- ``durq_oldest_queued_age_seconds{queue}``: age of the oldest ready job (gauge).
- ``durq_workers_alive``: workers seen within their lease (gauge).
- ``durq_jobs_in_hand{queue}``: attempts running now, from the ``running`` state (gauge).
- ``durq_jobs_enqueued_total``: jobs ever inserted (the id sequence: never decreases).
- ``durq_worker_attempts_total{worker,outcome}``: each live worker's attempts since it
  started (``succeeded``, ``failed``); a restarted worker is a new series, as Prometheus
  expects of a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from durq.observability import views
from durq.observability.status import STATES


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


def registry_for(app: Any) -> CollectorRegistry:
    """A registry holding only :class:`StoreCollector` (no process metrics of this server)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app))
    return registry
