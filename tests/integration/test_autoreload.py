"""``durq worker --autoreload``: a changed task file restarts the worker, which then runs
the new code; a signal to the supervisor stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import durq
from tests.support.procs import wait_for

TASKS = """
import durq
dq = durq.Durq({url!r})

@dq.task
def version() -> str:
    return {answer!r}
"""


def test_a_changed_file_restarts_the_worker_with_the_new_code(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'reload.db'}"
    source = tmp_path / "devtasks.py"
    source.write_text(TASKS.format(url=url, answer="v1"))
    dq = durq.Durq(url)
    dq.store.migrate()
    log = tmp_path / "supervisor.err"
    with open(log, "wb") as err, subprocess.Popen(
        [sys.executable, "-m", "durq", "worker", "devtasks:dq", "--autoreload", "--grace", "2",
         "--no-prune"],
        cwd=tmp_path, stderr=err, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ) as proc:  # fmt: skip
        try:
            assert dq.enqueue("version").wait(timeout=30) == "v1"
            time.sleep(1.1)  # a new mtime, whatever the file system's resolution
            source.write_text(TASKS.format(url=url, answer="v2"))
            wait_for(lambda: b"restarting the worker" in log.read_bytes(), timeout=30)
            assert dq.enqueue("version").wait(timeout=30) == "v2"
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    assert code == 0
    dq.close()
