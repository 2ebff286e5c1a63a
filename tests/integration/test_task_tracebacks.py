"""A failed job's stored traceback starts at the task's own frames (issue ux-polish,
item 1): the worker's executor, interrupt guard and pool child are left out, as Celery,
RQ and Sidekiq show the job's frames; a chained exception keeps both of its parts. Both
pools, both backends; read back with ``dq.get`` and with ``durq jobs show``.

Tasks: tests/apps/tracebacks.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from tests.apps import tracebacks
from tests.support.procs import ROOT

APP_FILE = str(Path(tracebacks.__file__).resolve())


def frames(text: str) -> list[str]:
    """The ``File "…", line N, in name`` lines of a formatted traceback, in order."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith('File "')]


def show(url: str, job_id: int) -> str:
    """What ``durq jobs show ID`` prints (a real subprocess, as a user runs it)."""
    done = subprocess.run(
        [sys.executable, "-m", "durq", "jobs", "show", str(job_id), "--db", url],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def app(url: str) -> durq.Durq:
    tracebacks.dq.url = url
    tracebacks.dq.close()
    return tracebacks.dq


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_the_stored_traceback_starts_at_the_task(app: durq.Durq, url: str, pool: str) -> None:
    plain = tracebacks.in_helper.enqueue(text="x1").id
    chained = tracebacks.chained.enqueue(text="x2").id
    ids = [plain, chained]
    if pool == "threads":  # async def bodies run on the worker's loop in either pool
        ids.append(tracebacks.in_helper_async.enqueue(text="x3").id)
    app.worker(queues=["tb"], concurrency=2, pool=pool, lease=5, prune_interval=None).run(
        install_signals=False, stop_when_idle=True
    )
    for job_id in ids:
        job = app.get(job_id)
        assert job.state == "failed"
        tb = job.errors[-1].traceback
        assert tb.startswith("Traceback (most recent call last):\n"), tb
        first = frames(tb)[0]
        assert first.startswith(f'File "{APP_FILE}"'), tb
        assert "/durq/" not in tb.replace(APP_FILE, ""), tb  # none of the worker's frames
        assert f"in {job.task}" in first and "in parse" in frames(tb)[1], tb
        assert (
            tb.rstrip()
            .splitlines()[-1]
            .startswith("ValueError" if job_id != chained else "LookupError")
        )

    tb = app.get(chained).errors[-1].traceback
    cause, _, effect = tb.partition(
        "\nThe above exception was the direct cause of the following exception:\n"
    )
    assert effect, tb  # both parts, each starting at the task
    assert "ValueError: not a number: 'x2'" in cause
    assert "LookupError: no record for 'x2'" in effect
    assert frames(cause)[0].startswith(f'File "{APP_FILE}"')
    assert frames(effect)[0].startswith(f'File "{APP_FILE}"'), effect
    assert len(frames(effect)) == 1  # the raise in the task; the executor's frames gone

    out = show(url, plain)  # the CLI prints the stored traceback, indented
    shown = out[out.index("Traceback (most recent call last):") :]
    assert frames(shown)[0].startswith(f'File "{APP_FILE}"'), out
    assert "ValueError: not a number: 'x1'" in shown
    out = show(url, chained)
    assert "The above exception was the direct cause" in out
    assert out.count("Traceback (most recent call last):") == 2
    assert "executor.py" not in out and "interrupt.py" not in out and "child.py" not in out
