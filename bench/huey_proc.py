"""A huey consumer child: ``python -m bench.huey_proc --db PATH --mode drain|serve``.

The consumer runs with one worker of the (default) thread type; all other consumer
options are huey's defaults (polling from 0.1 s, backoff 1.15, up to 10 s).

* ``drain --expect N``: start the consumer, wait until N no-op tasks have executed, print
  the elapsed time, stop.
* ``serve``: print ``ready``; serve until the parent writes ``stop``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import traceback

from bench.common import emit, read_status_kb, watch_stdin
from bench.huey_app import make_huey


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.huey_proc")
    parser.add_argument("--db", required=True)
    parser.add_argument("--mode", choices=("drain", "serve"), default="drain")
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    try:
        app = make_huey(args.db)
        consumer = app.huey.create_consumer(workers=1, worker_type="thread")
        if args.mode == "drain":
            app.counter.target = args.expect
            started = time.time()
            consumer.start()
            try:
                finished = app.counter.done.wait(args.timeout)
                ended = time.time()
            finally:
                consumer.stop(graceful=True)
            emit(
                {
                    "event": "drained",
                    "started": started,
                    "last_finish": ended,
                    "succeeded": app.counter.count,
                    "complete": finished,
                    "pending": app.huey.pending_count(),
                    "rss_kb": read_status_kb(os.getpid(), "VmRSS"),
                }
            )
        else:
            stop = threading.Event()
            watch_stdin(stop.set)
            consumer.start()
            emit({"event": "ready", "pid": os.getpid()})
            try:
                stop.wait()
            finally:
                consumer.stop(graceful=True)
            emit({"event": "stopped"})
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
