"""``durq status`` after a ``kill -9`` of a worker on its host (issue ux-polish, item 4):
the worker is no longer counted live as soon as its process is gone, not a lease later,
and its jobs show as stranded (no live worker runs them). A real worker process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import durq
from tests.support.procs import ROOT, wait_for, workers


def status_json(url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "durq", "status", "--db", url, "--json"],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    snap: dict[str, object] = json.loads(done.stdout)
    return snap


def test_a_killed_worker_is_not_live_once_its_process_is_gone(url: str, tmp_path: Path) -> None:
    app = durq.Durq(url)
    try:
        spec = {
            "app": "tests.apps.basic:dq",
            "url": url,
            "log": tmp_path / "worker.log",
            "args": ["--queues", "default", "--lease", "60"],  # a lease far past the test
        }
        with workers(spec) as (w,):
            host = socket.gethostname()
            # live, and its liveness beat stamped its process
            wait_for(lambda: any(pid == w.pid for _, pid, _ in app.store.local_workers(host)),
                     60, what="the worker's first liveness beat")  # fmt: skip
            assert [x["pid"] for x in app.status()["workers"]] == [w.pid]
            w.kill()  # SIGKILL, and reaped
            assert app.status()["workers"] == []  # at once: no wait for its lease
            app.enqueue("sleepy", {"ms": 1})  # no live worker runs it now: stranded
            snap = status_json(url)
            assert snap["workers"] == []
            assert snap["stranded"] == [{"queue": "default", "task": "sleepy", "jobs": 1}]
            assert app.store.status_data().workers  # its row is still there (lease 60 s)
    finally:
        app.close()
