from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq


@pytest.fixture
def drain() -> Iterator[Callable[..., durq.Worker]]:
    """Run an in-process worker until no job of its queues is pending (or ``timeout``)."""
    started: list[tuple[durq.Worker, threading.Thread]] = []

    def _drain(app: durq.Durq, timeout: float = 20.0, **options: Any) -> durq.Worker:
        options.setdefault("lease", 5.0)
        w = app.worker(**options)
        t = threading.Thread(
            target=lambda: w.run(install_signals=False, stop_when_idle=True), daemon=True
        )
        started.append((w, t))
        t.start()
        t.join(timeout)
        assert not t.is_alive(), f"worker did not drain within {timeout} s"
        return w

    yield _drain
    for w, t in started:
        w.request_stop()
        t.join(10)
