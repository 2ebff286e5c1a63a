"""The Celery peer of the process-pool row: the same no-op task on a Redis broker, run by
``celery -A bench.celery_app worker -P prefork -c 4``.

Each call records its start time in Redis (the first one only, ``SET NX``) and counts
itself (``INCR``); the call that brings the count to the expected total records the end.
So the rate is measured like durq's: from the first job's start to the last job's end,
worker start-up excluded. The bookkeeping costs each call one Redis round trip, which the
durq no-op does not pay (its finish is recorded by the worker in the same batch commit).
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery  # type: ignore[import-untyped]

BROKER = os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/15")

app = Celery("bench_celery", broker=BROKER)
app.conf.update(
    task_ignore_result=True,
    worker_prefetch_multiplier=4,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_redis = redis.Redis.from_url(BROKER)


@app.task(name="noop")  # type: ignore[untyped-decorator]
def noop(expect: int) -> None:
    now = time.time()
    pipe = _redis.pipeline()
    pipe.set("bench:first", now, nx=True)
    pipe.incr("bench:done")
    _, done = pipe.execute()
    if done == expect:
        _redis.set("bench:last", time.time())
