"""litequeue, measured in the same run: ``LiteQueue(path)`` with its defaults (WAL,
``synchronous=NORMAL`` set by litequeue itself, autocommit: each put, pop and done is its
own transaction). It has no worker that runs tasks, so the drain is ``pop()`` + ``done()``
in a loop, in the process that enqueued (after closing and reopening the queue)."""

from __future__ import annotations

import time
from typing import Any

from bench.common import BenchError, case_dir


def litequeue_put_pop(base: str, n: int) -> dict[str, Any]:
    """``put()`` ``n`` messages one at a time, then ``pop()`` + ``done()`` each of them."""
    from litequeue import LiteQueue

    with case_dir(base, "litequeue") as d:
        path = str(d / "queue.db")
        q = LiteQueue(path)
        start = time.perf_counter()
        for _ in range(n):
            q.put("{}")
        put = n / (time.perf_counter() - start)
        q.close()
        q = LiteQueue(path)
        start = time.perf_counter()
        done = 0
        while (message := q.pop()) is not None:
            q.done(message.message_id)
            done += 1
        drain = done / (time.perf_counter() - start)
        q.close()
    if done != n:
        raise BenchError(f"litequeue popped {done} of {n}")
    return {"put_rate": put, "drain_rate": drain, "jobs": n}
