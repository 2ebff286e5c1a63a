"""A worker on a thread of the test process, stopped when the block ends (even on failure)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import durq


@contextmanager
def running(app: durq.Durq, **options: Any) -> Iterator[durq.Worker]:
    """Run ``app.worker(**options)`` on a daemon thread for the block; ``lease`` defaults to
    10 s (a heartbeat every ~3.3 s). Asks the worker to stop on exit and fails the test if it
    has not stopped within 30 s."""
    options.setdefault("lease", 10.0)
    with running_worker(app.worker(**options)) as w:
        yield w


@contextmanager
def running_worker(worker: durq.Worker) -> Iterator[durq.Worker]:
    """Run an already built ``worker`` on a daemon thread for the block; asks it to stop on
    exit and fails the test if it has not stopped within 30 s."""
    t = threading.Thread(target=lambda: worker.run(install_signals=False), daemon=True)
    t.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        t.join(30)
        assert not t.is_alive(), "the worker did not stop"
