"""A persist-queue consumer child: ``python -m bench.pq_proc --path DIR --expect N``.

Opens ``SQLiteAckQueue(DIR)`` with its defaults (WAL, ``auto_commit=True``: every put,
get and ack is its own committed transaction; ``synchronous`` left at SQLite's default),
then takes N items with ``get()`` + ``ack()`` and prints the elapsed time. Opening the
queue is not timed.
"""

from __future__ import annotations

import argparse
import os
import time
import traceback

from persistqueue import SQLiteAckQueue

from bench.common import emit, read_status_kb


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pq_proc")
    parser.add_argument("--path", required=True)
    parser.add_argument("--expect", type=int, required=True)
    args = parser.parse_args()
    try:
        q = SQLiteAckQueue(args.path)
        started = time.time()
        for _ in range(args.expect):
            item = q.get(block=True, timeout=30, raw=True)
            q.ack(item)
        ended = time.time()
        acked = q.acked_count()
        left = q.size
        q.close()
        emit(
            {
                "event": "drained",
                "started": started,
                "last_finish": ended,
                "succeeded": acked,
                "pending": left,
                "rss_kb": read_status_kb(os.getpid(), "VmRSS"),
            }
        )
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
