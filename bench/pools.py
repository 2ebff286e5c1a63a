"""Issue 11's pool rows (SQLite, FULL): the process pool next to the thread pool and
Celery's prefork pool.

* ``pool_noop``: 10,000 no-op jobs drained by one worker at 4 slots, ``--pool threads``
  and ``--pool processes`` (4 children) back to back, ``rounds`` times, each on a fresh
  database; the figures are the medians and the median of the per-round ratios (target:
  processes ≥ 0.8 x threads).
* ``celery_prefork``: the same no-op, ``celery worker -P prefork -c 4``, Redis broker.
* ``pool_cpu``: CPU-bound jobs (a pure-Python loop of about 20 ms) at 2 slots, threads
  vs 2 children (target: ≥ 1.7 x threads on 2 cores).

Every rate runs from the first job's start to the last job's end (worker start-up, and
the process pool's spawning of its children, excluded). ``python -m bench --only
'pool_*,celery_*'`` runs just these.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import durq
from bench.common import BenchError, Child, case_dir, median, sqlite_url
from bench.durq_app import make_app
from bench.report import Peer, Row, Section

Figures = dict[str, Any]

#: Seconds of one CPU-bound job.
SPIN_SECONDS = 0.020


def _drain(d: Path, url: str, pool: str, concurrency: int, expect: int, tag: str) -> Figures:
    args = ["--url", url, "--concurrency", str(concurrency), "--mode", "drain"]
    args += ["--expect", str(expect), "--pool", pool, "--log-level", "warning"]
    with Child("bench.worker_proc", args, d / f"{tag}.stderr") as child:
        out = child.read(timeout=120 + expect / 100)
    if out.get("exit_code") != 0:
        raise BenchError(f"worker exited with {out.get('exit_code')}")
    if out["succeeded"] != expect or out["pending"]:
        raise BenchError(f"worker ran {out['succeeded']} of {expect} jobs, {out['pending']} left")
    busy = out["last_finish"] - out["first_start"]
    return {"rate": expect / busy, "seconds": busy, "cpu_seconds": out.get("cpu_seconds")}


def _noop_drain(base: str, pool: str, n: int, chunk: int, tag: str) -> Figures:
    with case_dir(base, tag) as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            left = n
            while left > 0:
                size = min(chunk, left)
                app.noop.enqueue_many([{}] * size)
                left -= size
        finally:
            app.dq.close()
        return _drain(d, url, pool, 4, n, tag)


def pool_noop(base: str, n: int, chunk: int, rounds: int) -> Figures:
    """Threads and processes (4 slots) on ``n`` no-op jobs, back to back, ``rounds`` times."""
    threads, processes, ratios = [], [], []
    cpu: dict[str, list[float]] = {"threads": [], "processes": []}  # worker CPU per job, us
    for i in range(rounds):
        rates = {}
        for pool in ("threads", "processes"):
            got = _noop_drain(base, pool, n, chunk, f"noop-{pool}-{i}")
            rates[pool] = got["rate"]
            if got["cpu_seconds"] is not None:
                cpu[pool].append(got["cpu_seconds"] / n * 1e6)
        t, p = rates["threads"], rates["processes"]
        threads.append(t)
        processes.append(p)
        ratios.append(p / t)
    return {
        "threads_rate": median(threads),
        "processes_rate": median(processes),
        "ratio": median(ratios),
        "ratios": ratios,
        "rounds": rounds,
        "threads_rates": threads,
        "processes_rates": processes,
        # the worker process's own CPU (the pool's parent; children not counted), us/job
        "threads_cpu_us": median(cpu["threads"]) if cpu["threads"] else None,
        "processes_parent_cpu_us": median(cpu["processes"]) if cpu["processes"] else None,
        "jobs": n,
    }


def spin_steps(seconds: float = SPIN_SECONDS) -> int:
    """The loop steps of ``bench.pool_app.spin`` that take about ``seconds`` here."""
    os.environ.setdefault("BENCH_DURQ_URL", "sqlite:///:memory:")
    from bench.pool_app import spin

    steps = 100_000
    start = time.perf_counter()
    spin.fn(steps)
    per_step = (time.perf_counter() - start) / steps
    return max(1, int(seconds / per_step))


def _spin_stub(n: int) -> int:
    return 0


def pool_cpu(base: str, n: int, rounds: int) -> Figures:
    """``n`` CPU-bound jobs of about 20 ms at 2 slots: threads, then 2 children."""
    steps = spin_steps()
    threads, processes, ratios = [], [], []
    for i in range(rounds):
        rates = {}
        for pool in ("threads", "processes"):
            with case_dir(base, f"cpu-{pool}-{i}") as d:
                url = sqlite_url(d / "jobs.db")
                dq = durq.Durq(url)
                try:  # the same task name as bench.pool_app.spin, which the worker runs
                    dq.task(name="spin")(_spin_stub).enqueue_many([{"n": steps}] * n)
                finally:
                    dq.close()
                rates[pool] = _drain(d, url, pool, 2, n, f"cpu-{pool}")["rate"]
        threads.append(rates["threads"])
        processes.append(rates["processes"])
        ratios.append(rates["processes"] / rates["threads"])
    return {
        "threads_rate": median(threads),
        "processes_rate": median(processes),
        "ratio": median(ratios),
        "ratios": ratios,
        "rounds": rounds,
        "spin_steps": steps,
        "jobs": n,
    }


def celery_prefork(base: str, n: int) -> Figures:
    """``n`` no-op Celery tasks queued on Redis, then ``celery worker -P prefork -c 4``."""
    import redis

    from bench import celery_app

    r = redis.Redis.from_url(celery_app.BROKER)
    r.flushdb()
    try:
        for _ in range(n):
            celery_app.noop.apply_async((n,))
        with case_dir(base, "celery") as d:
            log = open(d / "celery.log", "w", encoding="utf-8")  # noqa: SIM115
            argv = [sys.executable, "-m", "celery", "-A", "bench.celery_app", "worker"]
            argv += ["-P", "prefork", "-c", "4", "--loglevel", "warning", "--without-heartbeat"]
            argv += ["--without-gossip", "--without-mingle"]
            proc = subprocess.Popen(
                argv,
                cwd=str(Path(__file__).resolve().parents[1]),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 120 + n / 100
                while r.get("bench:last") is None:
                    if proc.poll() is not None:
                        raise BenchError(f"celery exited with {proc.returncode}")
                    if time.monotonic() > deadline:
                        done = int(r.get("bench:done") or 0)
                        raise BenchError(f"celery ran {done} of {n} tasks in time")
                    time.sleep(0.05)
            finally:
                _stop(proc)
                log.close()
        first = float(r.get("bench:first") or 0)
        last = float(r.get("bench:last") or 0)
    finally:
        r.flushdb()
    return {"rate": n / (last - first), "seconds": last - first, "jobs": n}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM Celery's process group (its pool children too), SIGKILL after 10 s."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group
        except (subprocess.TimeoutExpired, ProcessLookupError):
            continue
        return


def plan(base: str, n: int, chunk: int, cpu_jobs: int, rounds: int) -> list[tuple[str, Any]]:
    return [
        ("pool_noop", lambda: pool_noop(base, n, chunk, rounds)),
        ("celery_prefork", lambda: celery_prefork(base, n)),
        ("pool_cpu", lambda: pool_cpu(base, cpu_jobs, rounds)),
    ]


def section(n: int) -> Section:
    """The table (issue 11): the process pool against threads and Celery prefork."""
    celery: dict[str, tuple[str, str] | None] = {"celery": ("celery_prefork", "rate")}
    threads = ("pool_noop", "threads_rate")
    return Section(
        "pools",
        "pools (SQLite, FULL; medians of rounds run back to back; indicative on a shared machine)",
        (Peer("celery", "Celery prefork x4 (Redis)", "celery"),),
        [
            Row(f"drain {n:,} no-op, thread pool, c4", "jobs/s", threads, peers=celery),
            Row(
                f"drain {n:,} no-op, process pool x4",
                "jobs/s",
                ("pool_noop", "processes_rate"),
                "within",
                0.20,
                ref=threads,
                peers=celery,
            ),
            Row("20 ms CPU-bound jobs, thread pool, c2", "jobs/s", ("pool_cpu", "threads_rate")),
            Row("20 ms CPU-bound jobs, process pool x2", "jobs/s", ("pool_cpu", "processes_rate")),
            Row("  process pool / thread pool (CPU-bound)", "x", ("pool_cpu", "ratio"), ">=", 1.7),
        ],
        "A rate runs from the first job's start to the last one's end (start-up excluded). "
        "The Celery task pays one Redis round trip per call for its bookkeeping.",
    )
