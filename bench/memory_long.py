"""The long memory case of issue 14: one worker, prefetch on (its default), drains
1,000,000 no-op jobs enqueued in bulk beforehand; its RSS is sampled all along.

Not in the default run (it takes minutes): ``python -m bench --memory-1m`` (or
``make bench BENCH_ARGS=--memory-1m``), with ``--memory-jobs N`` for another count. The
jobs go in with ``enqueue_many`` in chunks of 10,000 (timed apart, not part of the
curve); then a serving worker (``bench.worker_proc --mode serve``, concurrency 10, every
other setting at durq's default) starts on the full queue. Every ``interval`` seconds the
parent reads the child's ``VmRSS`` from ``/proc`` and how many jobs are left (one
``count(*)`` on a read-only connection of its own). The figures: the RSS after the first
sample, at the end, the peak (``VmHWM``), the growth from the first 10 % of the jobs to
the end, and every sample (jobs done, seconds, MB).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bench.common import BenchError, Child, case_dir, read_status_kb, sqlite_url
from bench.durq_app import make_app

Figures = dict[str, Any]
MB = 1024 / 1e6  # kB of /proc to MB (10^6 bytes)


def durq_memory_long(
    base: str, n: int = 1_000_000, chunk: int = 10_000, interval: float = 2.0
) -> Figures:
    """Enqueue ``n`` no-op jobs, then drain them with one serving worker (concurrency 10),
    sampling its RSS every ``interval`` seconds. Raises BenchError when the queue stops
    shrinking for 120 s."""
    with case_dir(base, "memory-long") as d:
        path = d / "jobs.db"
        url = sqlite_url(path)
        app = make_app(url)
        try:
            start = time.perf_counter()
            left = n
            while left > 0:
                size = min(chunk, left)
                app.noop.enqueue_many([{}] * size)
                left -= size
            enqueue_seconds = time.perf_counter() - start
        finally:
            app.dq.close()
        counter = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        samples: list[tuple[int, float, float]] = []
        try:
            with Child(
                "bench.worker_proc", ["--url", url, "--mode", "serve"], d / "worker.stderr"
            ) as child:
                child.read(timeout=60)
                began = time.perf_counter()
                last_change, last_left = began, n
                while True:
                    (remaining,) = counter.execute(
                        "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"
                    ).fetchone()
                    now = time.perf_counter()
                    rss = read_status_kb(child.pid, "VmRSS") * MB
                    samples.append((n - remaining, round(now - began, 1), round(rss, 1)))
                    if remaining == 0:
                        break
                    if remaining != last_left:
                        last_change, last_left = now, remaining
                    elif now - last_change > 120:
                        raise BenchError(f"{remaining:,} jobs left and none done for 120 s")
                    time.sleep(interval)
                drain_seconds = time.perf_counter() - began
                peak = read_status_kb(child.pid, "VmHWM") * MB
        finally:
            counter.close()
    early = next((s for s in samples if s[0] >= n // 10), samples[0])
    return {
        "jobs": n,
        "enqueue_rate": n / enqueue_seconds,
        "drain_rate": n / drain_seconds,
        "first_mb": samples[0][2],
        "at_10pct_mb": early[2],
        "end_mb": samples[-1][2],
        "peak_mb": peak,
        "growth_mb": round(samples[-1][2] - early[2], 1),
        "samples": samples,
    }


def curve(figures: Figures, points: int = 12) -> list[str]:
    """The samples as a few lines of text: jobs done, seconds, RSS."""
    samples = figures["samples"]
    step = max(1, len(samples) // points)
    picked = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    lines = [f"{'jobs done':>10}  {'seconds':>8}  {'RSS MB':>7}"]
    lines += [f"{done:>10,}  {secs:>8.1f}  {mb:>7.1f}" for done, secs, mb in picked]
    lines.append(
        f"peak (VmHWM) {figures['peak_mb']:.1f} MB; growth from 10 % of the jobs to the end "
        f"{figures['growth_mb']:+.1f} MB; drain {figures['drain_rate']:,.0f} jobs/s, "
        f"enqueue {figures['enqueue_rate']:,.0f} jobs/s"
    )
    return lines
