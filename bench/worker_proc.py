"""A durq worker child: ``python -m bench.worker_proc --url URL --concurrency N --mode M``.

Modes:

* ``drain``: run the worker until nothing is queued or running (``stop_when_idle``), then
  print one JSON line: the start time (just before ``Worker.run``), the time ``run``
  returned, and the latest ``finished_at`` among the succeeded jobs (when the queue became
  empty). Interpreter start-up and imports are excluded.
* ``serve``: print ``{"event": "ready", ...}`` and serve until the parent writes ``stop``
  (or closes stdin), then print ``{"event": "stopped", ...}``.

``--profile FILE`` profiles every thread with cProfile and writes the merged stats there.
``--callgrind`` (drain, the child runs under ``valgrind --tool=callgrind``): zero the
counters just before ``Worker.run`` and dump them when it returns (``callgrind_control``),
so the dump counts the drain alone (bench/workflows.py).
``--go`` (drain): print ``{"event": "ready"}`` once the store is open, then wait for a
``go`` line on stdin before starting the clock, so that several worker processes can start
together after their imports.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any

from bench.common import emit, read_status_kb, watch_stdin
from bench.durq_app import URL_ENV, make_app


class AllThreads:
    """cProfile for every thread: each new thread enables its own profiler on its first
    event; :meth:`dump` merges them."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self.lock = threading.Lock()
        self.main = cProfile.Profile()

    def _hook(self, _frame: FrameType, _event: str, _arg: Any) -> None:
        prof = cProfile.Profile()
        with self.lock:
            self.profiles.append(prof)
        prof.enable()

    def start(self) -> None:
        threading.setprofile(self._hook)
        self.main.enable()

    def dump(self, path: str) -> None:
        self.main.disable()
        threading.setprofile(None)
        stats = pstats.Stats(self.main)
        with self.lock:
            for prof in self.profiles:
                prof.disable()
                stats.add(prof)
        stats.dump_stats(path)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_proc")
    parser.add_argument("--url", default=os.environ.get(URL_ENV))
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--mode", choices=("drain", "serve"), default="drain")
    parser.add_argument("--expect", type=int, default=0, help="drain: jobs expected to succeed")
    parser.add_argument("--profile", default=None)
    parser.add_argument(
        "--pool",
        default=None,
        choices=("threads", "processes"),
        help="drain with bench.pool_app (a module-level app) in this pool (bench/pools.py)",
    )
    parser.add_argument("--go", action="store_true", help="drain: start on a `go` line")
    parser.add_argument(
        "--callgrind", action="store_true", help="drain: count only Worker.run (callgrind)"
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="the worker's event level, as `durq worker --log-level` (JSON lines on stderr)",
    )
    args = parser.parse_args()
    import logging

    from durq.observability import logs

    logs.configure("json", getattr(logging, args.log_level.upper()))
    if not args.url:
        parser.error(f"give --url or set {URL_ENV}")
    try:
        if args.mode == "drain":
            drain(
                args.url,
                args.concurrency,
                args.expect,
                args.profile,
                args.go,
                args.pool,
                args.callgrind,
            )
        else:
            serve(args.url, args.concurrency)
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        raise SystemExit(1) from exc


def drain(
    url: str,
    concurrency: int,
    expect: int,
    profile: str | None,
    go: bool,
    pool: str | None,
    counted: bool = False,
) -> None:
    if pool is None:
        app: Any = make_app(url)
        worker = app.dq.worker(concurrency=concurrency, lease=30)
    else:
        os.environ[URL_ENV] = url
        from bench import pool_app as app

        worker = app.dq.worker(concurrency=concurrency, lease=30, pool=pool)
    _ = app.dq.store  # open (and migrate) before the clock starts
    if go:
        emit({"event": "ready", "pid": os.getpid()})
        if not wait_for_go():
            app.dq.close()
            return
    claimer_cpu = time_claimer()
    profiler = AllThreads() if profile else None
    if profiler is not None:
        profiler.start()
    if counted:
        callgrind("-z")  # zero: imports, the store's opening and the worker's set-up left out
    started = time.time()
    cpu0 = time.process_time()
    code = worker.run(install_signals=False, stop_when_idle=True)
    returned = time.time()
    if counted:
        callgrind("-d", "drain")  # dump: the first dump file holds the drain alone
    cpu = time.process_time() - cpu0
    if profiler is not None and profile is not None:
        profiler.dump(profile)
    done = app.dq.jobs(state="succeeded", limit=max(expect, 1) + 100)
    mine = [j for j in done if j.finished_at is not None and j.finished_at >= started]
    ours = [j.finished_at for j in mine]
    last_finish = max(ours, default=returned)
    first_start = min((j.started_at for j in mine if j.started_at), default=started)
    pending = len(app.dq.jobs(state="queued", limit=10)) + len(
        app.dq.jobs(state="running", limit=10)
    )
    emit(
        {
            "event": "drained",
            "exit_code": code,
            "started": started,
            "returned": returned,
            "last_finish": last_finish,
            "first_start": first_start,
            "succeeded": len(ours),
            "pending": pending,
            "rss_kb": read_status_kb(os.getpid(), "VmRSS"),
            "cpu_seconds": cpu,
            "claimer_cpu_seconds": sum(claimer_cpu),
        }
    )
    app.dq.close()


def time_claimer() -> list[float]:
    """Wrap the claimer's loop (bench only) so that it adds the CPU seconds of its own
    thread (``time.thread_time``) to the list returned: the thread every job's claim and
    outcome go through, which bounds the drain."""
    from durq.worker import services

    spent: list[float] = []
    run = services.Claimer.run

    def timed(self: services.Claimer) -> None:
        start = time.thread_time()
        try:
            run(self)
        finally:
            spent.append(time.thread_time() - start)

    services.Claimer.run = timed  # type: ignore[method-assign]
    return spent


def callgrind(*command: str) -> None:
    """Send a command to the callgrind this process runs under; returns once it is done."""
    import subprocess

    subprocess.run(
        ["callgrind_control", *command, str(os.getpid())], check=True, capture_output=True
    )


def wait_for_go() -> bool:
    """Block until the parent writes ``go`` (True) or ``stop`` / closes stdin (False)."""
    for line in sys.stdin:
        command = line.strip()
        if command == "go":
            return True
        if command == "stop":
            return False
    return False


def serve(url: str, concurrency: int) -> None:
    app = make_app(url)
    _ = app.dq.store
    worker = app.dq.worker(concurrency=concurrency, lease=30)
    watch_stdin(worker.request_stop)
    emit({"event": "ready", "pid": os.getpid()})
    code = worker.run(install_signals=False, stop_when_idle=False)
    emit({"event": "stopped", "exit_code": code})
    app.dq.close()


if __name__ == "__main__":
    main()
