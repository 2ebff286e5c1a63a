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
    w = app.worker(**options)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        yield w
    finally:
        w.request_stop()
        t.join(30)
        assert not t.is_alive(), "the worker did not stop"
