"""The measurements. Each case runs in a fresh temporary directory and returns a dict of
figures; a case that fails raises, and the runner records the error and goes on."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    BenchError,
    Child,
    case_dir,
    median,
    paired_ratios,
    percentile,
    read_status_kb,
    sqlite_url,
)
from bench.durq_app import App, make_app

Figures = dict[str, Any]


@dataclass(frozen=True)
class Sizes:
    """How much work each case does (the defaults are the full run)."""

    enqueue_one: int = 5_000
    enqueue_many: int = 100_000
    chunk: int = 10_000
    drain: int = 10_000
    concurrencies: tuple[int, ...] = (1, 4, 10, 64)
    info_concurrencies: tuple[int, ...] = (1, 4)  # drains again at the default `info` level
    floor_jobs: int = 5_000
    latency_samples: int = 200
    latency_gap: float = 0.020
    memory_jobs: int = 100_000
    history_small: int = 10_000
    history_large: int = 200_000
    history_drain: int = 10_000
    history_concurrency: int = 10
    history_repeats: int = 3
    peer_jobs: int = 10_000
    # PostgreSQL section
    pg_enqueue_one: int = 2_000
    pg_enqueue_many: int = 100_000
    pg_drain: int = 10_000
    pg_workers: int = 4
    pg_concurrencies: tuple[int, ...] = (16, 8)
    pg_single_concurrency: int = 16
    pg_single_concurrencies: tuple[int, ...] = (10, 16, 64)  # 1 process, vs pgqueuer
    pg_floor_jobs: int = 2_000
    pg_peer_jobs: int = 10_000
    pg_procrastinate_jobs: int = 2_000
    pg_procrastinate_concurrencies: tuple[int, ...] = (1, 4)
    # dashboard and events (bench/dashboard_cases.py)
    dashboard_rows: int = 1_000_000
    dashboard_repeats: int = 21
    log_drain: int = 20_000
    log_concurrency: int = 4
    # process pool (bench/pools.py)
    cpu_jobs: int = 200
    pool_rounds: int = 3
    # issue 15's rows (bench/workflows.py): interleaved rounds; jobs counted under callgrind
    workflow_rounds: int = 3
    workflow_counted: int = 1_000

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FULL = Sizes()
QUICK = Sizes(
    enqueue_one=1_000,
    enqueue_many=20_000,
    chunk=10_000,
    drain=2_000,
    latency_samples=50,
    memory_jobs=20_000,
    history_small=2_000,
    history_large=40_000,
    history_drain=2_000,
    history_repeats=1,
    peer_jobs=2_000,
    concurrencies=(1, 4, 10, 64),
    info_concurrencies=(4,),
    floor_jobs=1_000,
    pg_floor_jobs=500,
    pg_single_concurrencies=(10, 64),
    pg_enqueue_one=500,
    pg_enqueue_many=20_000,
    pg_drain=2_000,
    pg_concurrencies=(16,),
    pg_peer_jobs=2_000,
    pg_procrastinate_jobs=500,
    dashboard_rows=50_000,
    dashboard_repeats=11,
    log_drain=5_000,
    cpu_jobs=60,
    pool_rounds=1,
    workflow_rounds=1,
    workflow_counted=300,
)


def fill(app: App, n: int, chunk: int) -> list[int]:
    """Enqueue ``n`` no-op jobs with ``enqueue_many`` in chunks; returns the last id of each chunk."""
    last: list[int] = []
    left = n
    while left > 0:
        size = min(chunk, left)
        jobs = app.noop.enqueue_many([{}] * size)
        last.append(jobs[-1].id)
        left -= size
    return last


def drain_child(
    directory: Path,
    url: str,
    concurrency: int,
    expect: int,
    tag: str,
    profile: Path | None = None,
    log_level: str = "warning",
) -> Figures:
    args = [
        "--log-level",
        log_level,
        "--url",
        url,
        "--concurrency",
        str(concurrency),
        "--mode",
        "drain",
        "--expect",
        str(expect),
    ]
    if profile is not None:
        args += ["--profile", str(profile)]
    with Child("bench.worker_proc", args, directory / f"{tag}.stderr") as child:
        out = child.read(timeout=60 + expect / 200)
    if out.get("exit_code") != 0:
        raise BenchError(f"worker exited with {out.get('exit_code')}")
    if out["succeeded"] != expect or out["pending"]:
        raise BenchError(f"worker ran {out['succeeded']} of {expect} jobs, {out['pending']} left")
    busy = out["last_finish"] - out["started"]
    return {
        "rate": expect / busy,
        "seconds": busy,
        "wall_rate": expect / (out["returned"] - out["started"]),
        "worker_rss_mb": out["rss_kb"] * 1024 / 1e6,
        "cpu_us_per_job": 1e6 * out.get("cpu_seconds", 0.0) / max(expect, 1),
        "claimer_cpu_us_per_job": 1e6 * out.get("claimer_cpu_seconds", 0.0) / max(expect, 1),
    }


# -- durq ---------------------------------------------------------------------------------


def durq_enqueue_one(base: str, n: int, synchronous: str | None) -> Figures:
    """``n`` calls of ``noop.enqueue()``: one committed transaction each. Then the paired
    figure: durq and the raw one-row INSERT commit (bench/floor.py, a second file beside
    it) alternate in blocks of 50 in this process, ``n`` of each per round, 5 rounds;
    ``paired_ratio`` is the median of the rounds' durq ÷ floor (a change in the machine's
    load or the disk's fsync time hits both sides alike, which separate runs do not)."""
    import sqlite3

    from bench.floor import INSERT

    with case_dir(base, "enqueue-one") as d:
        app = make_app(sqlite_url(d / "jobs.db", synchronous))
        floor_app = make_app(sqlite_url(d / "floor.db", synchronous))
        floor_app.dq.store.migrate()
        floor_app.dq.close()
        conn = sqlite3.connect(d / "floor.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {(synchronous or 'full').upper()}")
            _ = app.dq.store
            start = time.perf_counter()
            for _ in range(n):
                app.noop.enqueue()
            elapsed = time.perf_counter() - start

            def raw_insert() -> None:
                now = time.time()
                conn.execute(INSERT, (now, now))

            ratios = paired_ratios(app.noop.enqueue, raw_insert, n)
        finally:
            conn.close()
            app.dq.close()
    return {
        "rate": n / elapsed,
        "seconds": elapsed,
        "jobs": n,
        "paired_ratio": median(ratios),
        "paired_ratios": ratios,
    }


def durq_enqueue_many(base: str, n: int, chunk: int) -> Figures:
    """``n`` jobs through ``noop.enqueue_many`` in chunks of ``chunk`` (one transaction each)."""
    with case_dir(base, "enqueue-many") as d:
        app = make_app(sqlite_url(d / "jobs.db"))
        try:
            _ = app.dq.store
            start = time.perf_counter()
            fill(app, n, chunk)
            elapsed = time.perf_counter() - start
        finally:
            app.dq.close()
    return {"rate": n / elapsed, "seconds": elapsed, "jobs": n, "chunk": chunk}


def durq_drain(
    base: str,
    n: int,
    chunk: int,
    concurrency: int,
    synchronous: str | None,
    log_level: str = "warning",
) -> Figures:
    """Enqueue ``n`` no-op jobs, then time one worker process (events at ``log_level``,
    JSON lines to a file, as ``durq worker`` writes them to stderr) until the queue is
    empty."""
    with case_dir(base, f"drain-c{concurrency}") as d:
        url = sqlite_url(d / "jobs.db", synchronous)
        app = make_app(url)
        try:
            fill(app, n, chunk)
        finally:
            app.dq.close()
        figures = drain_child(d, url, concurrency, n, "worker", log_level=log_level)
    figures.update(jobs=n, concurrency=concurrency, log_level=log_level)
    return figures


def durq_pickup(base: str, samples: int, gap: float) -> Figures:
    """Idle worker; the parent enqueues one ``stamp`` job every ``gap`` seconds; latency is
    the job's start time minus the moment ``enqueue()`` returned (committed)."""
    with case_dir(base, "pickup") as d:
        return pickup_on(sqlite_url(d / "jobs.db"), d, samples, gap)


def pickup_on(url: str, directory: Path, samples: int, gap: float) -> Figures:
    """The idle pickup measurement on any durq URL (the worker's log goes to ``directory``)."""
    app = make_app(url)
    try:
        _ = app.dq.store
        with Child(
            "bench.worker_proc", ["--url", url, "--mode", "serve"], directory / "worker.stderr"
        ) as child:
            child.read(timeout=60)
            app.stamp.enqueue().wait(timeout=30)  # the worker is up and warm
            time.sleep(0.3)  # and idle again
            sent: list[tuple[Any, float]] = []
            for _ in range(samples):
                job = app.stamp.enqueue()
                sent.append((job, time.time()))
                time.sleep(gap)
            latencies = [
                (float(job.wait(timeout=30)) - committed) * 1000 for job, committed in sent
            ]
    finally:
        app.dq.close()
    return latency_figures(latencies, gap)


def latency_figures(latencies: list[float], gap: float) -> Figures:
    return {
        "median_ms": median(latencies),
        "p99_ms": percentile(latencies, 99),
        "min_ms": min(latencies),
        "max_ms": max(latencies),
        "samples": len(latencies),
        "gap_ms": gap * 1000,
    }


def durq_memory(base: str, n: int, chunk: int) -> Figures:
    """A serving worker (concurrency 10) runs ``n`` no-op jobs, enqueued in chunks while it
    runs (the next chunk once the previous one is done); then its VmRSS is read."""
    with case_dir(base, "memory") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            _ = app.dq.store
            with Child(
                "bench.worker_proc", ["--url", url, "--mode", "serve"], d / "worker.stderr"
            ) as child:
                child.read(timeout=60)
                app.noop.enqueue().wait(timeout=30)
                baseline = read_status_kb(child.pid, "VmRSS")
                start = time.perf_counter()
                left = n
                while left > 0:
                    size = min(chunk, left)
                    last = app.noop.enqueue_many([{}] * size)[-1]
                    left -= size
                    _wait_idle(app, last.id, timeout=60 + size / 100)
                elapsed = time.perf_counter() - start
                rss = read_status_kb(child.pid, "VmRSS")
                hwm = read_status_kb(child.pid, "VmHWM")
        finally:
            app.dq.close()
    return {
        "rss_mb": rss * 1024 / 1e6,
        "peak_mb": hwm * 1024 / 1e6,
        "baseline_mb": baseline * 1024 / 1e6,
        "jobs": n,
        "rate": n / elapsed,
    }


def _wait_idle(app: App, last_id: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = str(app.dq.get(last_id).state)
        finished = state not in ("queued", "running", "scheduled")
        if finished and not any(app.dq.jobs(state=s, limit=1) for s in ("queued", "running")):
            return
        time.sleep(0.02)
    raise BenchError(f"jobs up to {last_id} not done within {timeout:.0f}s")


def durq_history(base: str, sizes: Sizes) -> Figures:
    """Drain ``sizes.history_drain`` jobs (FULL, concurrency ``sizes.history_concurrency``)
    on two databases whose jobs table already holds ``history_small`` and ``history_large``
    succeeded rows. The rows are made through durq (``enqueue_many``, then a worker at
    concurrency 64 with ``synchronous=normal`` to build them quickly). The drains alternate
    between the two databases, ``history_repeats`` times each, so that drift in the
    machine's load hits both alike; the best of each is reported."""
    with case_dir(base, "history") as d:
        dbs: dict[str, Path] = {}
        prep: dict[str, float] = {}
        for label, rows in (("small", sizes.history_small), ("large", sizes.history_large)):
            path = d / f"{label}.db"
            fast = sqlite_url(path, "normal")
            app = make_app(fast)
            try:
                fill(app, rows, sizes.chunk)
            finally:
                app.dq.close()
            start = time.perf_counter()
            drain_child(d, fast, 64, rows, f"prep-{label}")
            prep[label] = time.perf_counter() - start
            dbs[label] = path
        rates: dict[str, list[float]] = {"small": [], "large": []}
        for i in range(sizes.history_repeats):
            for label, path in dbs.items():
                url = sqlite_url(path)
                app = make_app(url)
                try:
                    fill(app, sizes.history_drain, sizes.chunk)
                finally:
                    app.dq.close()
                got = drain_child(
                    d, url, sizes.history_concurrency, sizes.history_drain, f"{label}-{i}"
                )
                rates[label].append(float(got["rate"]))
    return {
        "small_rate": max(rates["small"]),
        "large_rate": max(rates["large"]),
        "small_rates": rates["small"],
        "large_rates": rates["large"],
        "small_rows": sizes.history_small,
        "large_rows": sizes.history_large,
        "jobs": sizes.history_drain,
        "concurrency": sizes.history_concurrency,
        "prep_seconds": prep,
    }


def durq_profile(base: str, n: int, chunk: int, concurrency: int, out: Path) -> Figures:
    """The drain case with every thread of the worker under cProfile (stats to ``out``)."""
    with case_dir(base, "profile") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            fill(app, n, chunk)
        finally:
            app.dq.close()
        return drain_child(d, url, concurrency, n, "worker", profile=out)


# -- peers --------------------------------------------------------------------------------


def huey_enqueue_drain(base: str, n: int) -> Figures:
    """``SqliteHuey``: enqueue ``n`` no-op tasks (one commit each), then one consumer
    process (1 thread worker) runs them all; timed from ``consumer.start()`` to the last
    task's execution."""
    from bench.huey_app import make_huey

    with case_dir(base, "huey") as d:
        db = str(d / "huey.db")
        app = make_huey(db)
        try:
            _ = app.huey.storage.conn
            start = time.perf_counter()
            for _ in range(n):
                app.noop()
            elapsed = time.perf_counter() - start
        finally:
            app.huey.storage.close()
        args = ["--db", db, "--mode", "drain", "--expect", str(n)]
        with Child("bench.huey_proc", args, d / "consumer.stderr") as child:
            out = child.read(timeout=120 + n / 100)
    if out["succeeded"] != n or not out["complete"]:
        raise BenchError(f"huey ran {out['succeeded']} of {n} tasks")
    busy = out["last_finish"] - out["started"]
    return {
        "enqueue_rate": n / elapsed,
        "drain_rate": n / busy,
        "drain_seconds": busy,
        "jobs": n,
        "consumer_rss_mb": out["rss_kb"] * 1024 / 1e6,
    }


def huey_pickup(base: str, samples: int, gap: float) -> Figures:
    """``SqliteHuey`` idle pickup latency, measured like durq's (default consumer polling)."""
    from bench.huey_app import make_huey

    with case_dir(base, "huey-pickup") as d:
        db = str(d / "huey.db")
        app = make_huey(db)
        try:
            with Child(
                "bench.huey_proc", ["--db", db, "--mode", "serve"], d / "consumer.stderr"
            ) as child:
                child.read(timeout=60)
                app.stamp().get(blocking=True, timeout=30)
                time.sleep(0.3)
                sent: list[tuple[Any, float]] = []
                for _ in range(samples):
                    handle = app.stamp()
                    sent.append((handle, time.time()))
                    time.sleep(gap)
                latencies = []
                for handle, committed in sent:
                    started = handle.get(blocking=True, timeout=60)
                    if started is None:
                        raise BenchError("huey result missing")
                    latencies.append((float(started) - committed) * 1000)
        finally:
            app.huey.storage.close()
    return latency_figures(latencies, gap)


def pq_put_get(base: str, n: int) -> Figures:
    """persist-queue ``SQLiteAckQueue``: ``put()`` ``n`` items one at a time (each its own
    commit), then another process does ``get()`` + ``ack()`` for all of them."""
    from persistqueue import SQLiteAckQueue

    with case_dir(base, "pq") as d:
        path = str(d / "queue")
        q = SQLiteAckQueue(path)
        try:
            start = time.perf_counter()
            for _ in range(n):
                q.put({})
            elapsed = time.perf_counter() - start
        finally:
            q.close()
        args = ["--path", path, "--expect", str(n)]
        with Child("bench.pq_proc", args, d / "consumer.stderr") as child:
            out = child.read(timeout=120 + n / 100)
    if out["succeeded"] != n or out["pending"]:
        raise BenchError(f"persist-queue acked {out['succeeded']} of {n}, {out['pending']} left")
    busy = out["last_finish"] - out["started"]
    return {
        "put_rate": n / elapsed,
        "drain_rate": n / busy,
        "drain_seconds": busy,
        "jobs": n,
        "consumer_rss_mb": out["rss_kb"] * 1024 / 1e6,
    }
