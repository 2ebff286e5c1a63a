"""A procrastinate worker child: ``python -m bench.procrastinate_proc --url URL
--concurrency N``.

Opens the app (its connection pool) first, then times ``run_worker_async(wait=False)``:
the worker stops once it finds no job. The end is the latest ``succeeded`` event the
worker wrote (``procrastinate_events.at``, the server's ``now()`` in the finishing
transaction); the time ``run_worker_async`` returned is there too. Every worker option
except ``concurrency``, ``wait`` and ``install_signal_handlers`` is procrastinate's default.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import traceback
from typing import Any

import psycopg

from bench.common import emit, read_status_kb
from bench.procrastinate_app import make_procrastinate

COUNTS = """
SELECT count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status IN ('todo', 'doing'))
FROM procrastinate_jobs
"""
LAST_SUCCESS = """
SELECT extract(epoch FROM max(at))::float8 FROM procrastinate_events WHERE type = 'succeeded'
"""


async def drain(url: str, concurrency: int) -> dict[str, Any]:
    p = make_procrastinate(url)
    async with p.app.open_async():
        started = time.time()
        await p.app.run_worker_async(
            concurrency=concurrency, wait=False, install_signal_handlers=False
        )
        returned = time.time()
    with psycopg.connect(url) as conn:
        succeeded, pending = conn.execute(COUNTS).fetchone() or (0, 0)
        last = (conn.execute(LAST_SUCCESS).fetchone() or (None,))[0]
    return {
        "event": "drained",
        "started": started,
        "returned": returned,
        "last_finish": float(last) if last is not None else returned,
        "succeeded": int(succeeded),
        "pending": int(pending),
        "rss_kb": read_status_kb(os.getpid(), "VmRSS"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.procrastinate_proc")
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    try:
        emit(asyncio.run(drain(args.url, args.concurrency)))
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
