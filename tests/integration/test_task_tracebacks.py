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


#: What an attempt keeps of its message and of its traceback (durq.model.jobs.MAX_ERROR_TEXT,
#: the figure docs/features/retries.md gives).
MAX_ERROR_TEXT = 64 * 1024


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_a_huge_error_is_stored_cut_to_its_start_and_end(
    app: durq.Durq, url: str, pool: str
) -> None:
    """A 4 MiB exception text: each attempt keeps 64 Ki characters of its message (the
    start) and of its traceback (the start and the end, the exception's line), with a note
    of the cut. Before, every attempt added 8 MiB to the row (30 MB over 5 attempts made a
    567 MB database; at 110 MB the outcome's write held SQLite's write lock past the lease
    and the job lost an attempt to its own heartbeat)."""
    job_id = tracebacks.huge.enqueue().id
    app.worker(queues=["tb"], concurrency=1, pool=pool, lease=5, prune_interval=None).run(
        install_signals=False, stop_when_idle=True
    )
    job = app.get(job_id)
    assert job.state == "failed" and job.attempts == 3
    assert [e.kind for e in job.errors] == ["transient"] * 3
    for e in job.errors:
        kept, note, rest = e.message.partition(" [... ")
        assert note and kept.startswith("STARTEEE") and tracebacks.HUGE.startswith(kept)
        assert rest == f"{len(tracebacks.HUGE) - len(kept)} characters cut ...] "
        assert len(e.message) <= MAX_ERROR_TEXT
        assert e.traceback.startswith("Traceback (most recent call last):\n")
        assert len(e.traceback) <= MAX_ERROR_TEXT and "characters cut ...]" in e.traceback
        assert e.traceback.rstrip().endswith("EEEEEND"), e.traceback[-200:]
    assert len(show(url, job_id)) < 8 * MAX_ERROR_TEXT  # what `durq jobs show` prints
