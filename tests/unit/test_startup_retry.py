"""A worker's start-up steps after its first store call wait out a cut session or a busy
database (``durq.worker.service.waiting_out``), as its loops do, instead of exiting."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from durq.errors import ConfigError, StoreBusy, StoreUnavailable
from durq.worker.service import waiting_out


def flaky(failures: list[Exception]) -> tuple[list[int], Callable[[], None]]:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if failures:
            raise failures.pop(0)

    return calls, step


def test_a_cut_session_and_a_busy_moment_are_run_again_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls, step = flaky(
        [StoreUnavailable("terminating connection due to administrator command"), StoreBusy("x")]
    )
    with caplog.at_level(logging.WARNING, logger="durq.events"):
        waiting_out(step, "start", threading.Event())
    assert len(calls) == 3
    assert sum("store_busy" in r.getMessage() for r in caplog.records) == 2


def test_any_other_error_is_raised_at_once() -> None:
    calls, step = flaky([ConfigError("bad")])
    with pytest.raises(ConfigError):
        waiting_out(step, "start", threading.Event())
    assert len(calls) == 1


def test_the_last_error_is_raised_past_the_limit_or_on_a_stop() -> None:
    calls, step = flaky([StoreUnavailable("down")] * 100)
    with pytest.raises(StoreUnavailable):
        waiting_out(step, "start", threading.Event(), limit=0.0)
    assert len(calls) == 1
    stop = threading.Event()
    stop.set()
    with pytest.raises(StoreUnavailable):
        waiting_out(step, "start", stop)
    assert len(calls) == 2
