"""A pgqueuer consumer child: ``python -m bench.pgqueuer_proc --url URL --mode drain|serve``.

One ``QueueManager`` on one psycopg ``AsyncConnection`` (autocommit, as pgqueuer
requires), with every ``run()`` option at its default except ``mode``.

* ``drain``: time ``run(mode=drain)`` over the queued ``noop`` jobs. The end is the latest
  ``successful`` row of ``pgqueuer_log`` (its ``created``: the server's ``now()`` in the
  transaction that deleted the finished jobs from the queue); the time ``run`` returned
  is there too.
* ``serve``: print ``ready`` and run the ``stamp`` entrypoint, which prints
  ``{"job": id, "started": time.time()}`` when it starts; stop on a ``stop`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import traceback
from typing import Any

import psycopg
from pgqueuer import Job, PsycopgDriver, Queries, QueueManager
from pgqueuer.domain.types import QueueExecutionMode

from bench.common import emit, read_status_kb, watch_stdin

COUNTS = """
SELECT (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'),
       (SELECT count(*) FROM pgqueuer)
"""
LAST_SUCCESS = """
SELECT extract(epoch FROM max(created))::float8 FROM pgqueuer_log WHERE status = 'successful'
"""


async def drain(url: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            return None

        started = time.time()
        await qm.run(mode=QueueExecutionMode.drain)
        returned = time.time()
    with psycopg.connect(url) as sync:
        succeeded, pending = sync.execute(COUNTS).fetchone() or (0, 0)
        last = (sync.execute(LAST_SUCCESS).fetchone() or (None,))[0]
    return {
        "event": "drained",
        "started": started,
        "returned": returned,
        "last_finish": float(last) if last is not None else returned,
        "succeeded": int(succeeded),
        "pending": int(pending),
        "rss_kb": read_status_kb(os.getpid(), "VmRSS"),
    }


async def serve(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("stamp")
        async def stamp(job: Job) -> None:
            emit({"job": int(job.id), "started": time.time()})

        loop = asyncio.get_running_loop()
        watch_stdin(lambda: loop.call_soon_threadsafe(qm.shutdown.set))
        emit({"event": "ready", "pid": os.getpid()})
        await qm.run()
    emit({"event": "stopped"})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pgqueuer_proc")
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", choices=("drain", "serve"), default="drain")
    args = parser.parse_args()
    try:
        if args.mode == "drain":
            emit(asyncio.run(drain(args.url)))
        else:
            asyncio.run(serve(args.url))
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
