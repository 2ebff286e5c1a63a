"""``durq workers`` and the dashboard show a job shorter than a heartbeat as in hand (found
by two new-user passes: the report was written only with the heartbeat, every lease / 3 =
10 s, so a 6 s job never showed and the worker read "idle" while it ran)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import durq
from durq.observability import views


def test_a_short_job_shows_in_hand_within_seconds_and_leaves_after(
    make_any: Callable[..., durq.Durq],
) -> None:
    app = make_any()
    started, release = threading.Event(), threading.Event()

    @app.task
    def short() -> None:
        started.set()
        release.wait(30)

    worker = app.worker(lease=30.0, concurrency=2)  # a heartbeat every 10 s
    runner = threading.Thread(target=lambda: worker.run(install_signals=False), daemon=True)
    runner.start()
    try:
        job = short.enqueue()
        assert started.wait(20)

        def in_hand() -> list[int]:
            rows = views.workers(app.store)
            return [h["id"] for w in rows for h in w["in_hand"]]

        deadline = time.monotonic() + 5.0  # the body runs until released: far less than 10 s
        while job.id not in in_hand():
            assert time.monotonic() < deadline, "the running job never showed as in hand"
            time.sleep(0.1)
        [row] = views.workers(app.store)
        assert row["state"] == "busy" and row["busy"] == 1
        release.set()
        assert job.wait(10) is None
        deadline = time.monotonic() + 5.0
        while in_hand():
            assert time.monotonic() < deadline, "the finished job stayed in hand"
            time.sleep(0.1)
    finally:
        release.set()
        worker.request_stop()
        runner.join(30)
