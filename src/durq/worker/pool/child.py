"""The child's side of the process pool: import the app, then run one job at a time.

Started by :mod:`durq.worker.pool.children` as
``python -m durq.worker.pool.child SPEC URL CLOCK_OFFSET READ_FD WRITE_FD PARENT_PID``
in a session of its own (so a timeout or cancel can signal its whole process group).

It imports the user's app the way the worker found it (``module:attr``, or
``path.py:attr`` for an app defined in the script that started the worker) and runs
each job through the same executor steps as a thread does (decode → resolve → run →
classify). It never claims, heartbeats or records an outcome: the parent does all of
that. What a task's ``ctx`` writes (progress, steps) and reads (parent results) goes to
the store, which the child opens only on the first such call, under the attempt's
lease token like any other fenced write.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from functools import partial
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, cast

from durq.classify import describe
from durq.context import JobContext
from durq.model import AttemptError, Claimed, Outcome
from durq.worker.executor import Executor
from durq.worker.pool.protocol import EXIT, PATH_ENV, Done, Failed, Ready, rss_bytes

if TYPE_CHECKING:
    from durq.registry import Registry

PR_SET_PDEATHSIG = 1


class ChildStore:
    """The store as the child's executor sees it: the app's codec and the parent's clock
    (its offset from this host's clock, measured at spawn) without opening anything;
    every other attribute opens the app's store on first use and comes from it."""

    def __init__(self, app: Any, offset: float) -> None:
        self._app = app
        self._offset = offset
        self.codec = getattr(app, "codec", None)

    def now(self) -> float:
        return time.time() + self._offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app.store, name)


class ChildApp:
    """The user's app with :class:`ChildStore` as its ``store`` (all else is the app's)."""

    def __init__(self, app: Any, offset: float) -> None:
        self._app = app
        self.store = ChildStore(app, offset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)


def load(spec: str) -> Any:
    """The app named by ``module:attr`` or ``file.py:attr``."""
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        found = runpy.run_path(target, run_name="__durq_pool_child__")
        return found[attr]
    return getattr(importlib.import_module(target), attr)


def die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this child when the worker that started it dies (even by SIGKILL),
    so no child outlives its worker; elsewhere the closed pipe ends it after its job."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def context(view: ChildApp, executor: Executor, job: Claimed) -> JobContext:
    """The ``ctx`` a task sees in a child: the same fields and calls as in a thread."""
    app = view._app
    task = app.tasks.get(job.task)
    return JobContext(
        job.id,
        job.task,
        job.queue,
        job.attempt,
        job.max_attempts,
        job.lease_token,
        lambda i, t, body: bool(app.store.set_progress(i, t, body)),
        _steps=cast(Any, view.store),
        _parents=lambda i: list(app.store.parent_results(i)),
        _codec=view.store.codec,
        _will_retry=None if task is None else partial(executor.would_retry, job, task),
    )


def run_one(view: ChildApp, executor: Executor, job: Claimed) -> Outcome:
    """One attempt; an error outside the task's own (SystemExit, a broken codec) becomes
    a retry, as a thread's does."""
    try:
        return executor.run_sync(job, context(view, executor, job))
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt in a task
        error = AttemptError(
            job.attempt,
            view.store.now(),
            type(exc).__name__,
            describe(exc),
            "".join(traceback.format_exception(exc)),
            "transient",
        )
        kind = "failed" if job.attempt >= job.max_attempts else "retry"
        return Outcome(job.id, job.lease_token, kind, error=error, delay=1.0)


def main(argv: list[str]) -> int:
    spec, url, offset, read_fd, write_fd, parent = argv
    die_with_parent(int(parent))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's
    inp = Connection(int(read_fd), writable=False)
    out = Connection(int(write_fd), readable=False)
    paths = os.environ.pop(PATH_ENV, None)
    if paths:
        sys.path[:] = json.loads(paths)
    try:
        app = load(spec)
        app.url = url
    except BaseException as exc:  # noqa: BLE001 - reported to the worker, which stops
        out.send(Failed(f"the pool child could not import {spec}: {type(exc).__name__}: {exc}"))
        return 1
    view = ChildApp(app, float(offset))
    executor = Executor(cast("Registry", view))
    names = tuple(name for name, task in app.tasks.items() if not task.is_async)
    out.send(Ready(os.getpid(), names))
    while True:
        try:
            job = inp.recv()
        except (EOFError, OSError):
            return 0
        if job is EXIT:
            return 0
        outcome = run_one(view, executor, job)
        out.send(Done(outcome, rss_bytes()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
