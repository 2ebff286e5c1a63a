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
import threading
import time
from collections import deque
from functools import partial
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, cast

from durq import shield
from durq.classify import describe
from durq.context import JobContext
from durq.errors import Interrupted
from durq.model import AttemptError, Claimed, Outcome
from durq.observability import tracing
from durq.worker.executor import Executor
from durq.worker.interrupt import REASONS, exception_for
from durq.worker.pool.protocol import (
    EXIT,
    MEMORY_ENV,
    PATH_ENV,
    TRACING_ENV,
    Failed,
    Ready,
    Returned,
    Stop,
    TakeBack,
    dumps,
    frames,
    pack,
    rss_bytes,
    unpack,
)
from durq.worker.tracebacks import format_task_error

if TYPE_CHECKING:
    from durq.registry import Registry

PR_SET_PDEATHSIG = 1
#: Outcomes held at most before they are sent in one write...
FLUSH_COUNT = 16
#: ...and seconds the first of them waits at most.
FLUSH_AFTER = 0.001


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


#: The signal the kernel sends a child when its worker dies (``PR_SET_PDEATHSIG``): its
#: handler SIGKILLs the child's whole process group, so what a body started goes too.
PARENT_DIED = signal.SIGUSR1


def kill_group(_signum: int = 0, _frame: object = None) -> None:
    """SIGKILL this child's whole process group, itself included (it leads the group:
    ``setsid``): the worker is gone, and so must be everything its bodies started."""
    os.killpg(0, signal.SIGKILL)


def die_with_parent(parent: int) -> None:
    """Linux: when the worker that started this child dies (even by SIGKILL) the kernel
    sends :data:`PARENT_DIED`, whose handler kills the child's whole process group (a
    ``PR_SET_PDEATHSIG`` of SIGKILL would kill the child alone and leave its body's
    subprocesses behind). The handler runs between two bytecodes of the main thread; a
    body stuck in a C call that holds the GIL delays it, and the inbox's reader thread
    kills the group too when the worker's pipe closes without an EXIT. A grandchild that
    started a session of its own (``setsid``) is out of the group and escapes both.
    Elsewhere the closed pipe alone ends the child."""
    signal.signal(PARENT_DIED, kill_group)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        kill_group()


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


class Body:
    """The body this child runs now, for the SIGTERM handler: the parent sends a
    :class:`Stop` with the reason, then SIGTERMs the child's group; a running body then
    gets :class:`durq.Interrupted` (its ``finally`` blocks and ``ctx.on_interrupt``
    callbacks run) and the child exits once it returns. An idle child just ends."""

    def __init__(self) -> None:
        self.ctx: JobContext | None = None
        self.stopped = False
        self.reason: str | None = None
        self.told = threading.Event()  # a Stop arrived (the reader thread sets it)

    def on_sigterm(self, _signum: int, _frame: object) -> None:
        ctx = self.ctx
        if ctx is None or self.stopped:  # idle, or asked again: end as SIGTERM would
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.told.wait(0.2)  # the Stop was written before the signal; its reader may lag
        self.stopped = True
        reason = self.reason or "cancelled"
        ctx.mark_interrupted(reason)
        # not inside durq's store (the child writes progress and steps itself): a body in
        # a store call gets it as the call returns (durq.shield)
        if reason in REASONS and shield.hold(exception_for(reason)):
            return
        raise Interrupted(reason)


def run_one(view: ChildApp, executor: Executor, job: Claimed, body: Body) -> Outcome:
    """One attempt; an error outside the task's own (SystemExit, a broken codec) becomes
    a retry, as a thread's does."""
    try:
        body.ctx = context(view, executor, job)
        try:
            if not tracing.enabled():
                return executor.run_sync(job, body.ctx)
            record = view.store.get(job.id)  # the trace context stored at enqueue
            with tracing.process_span(job, record.meta if record else None) as span:
                outcome = executor.run_sync(job, body.ctx)
                tracing.record_outcome(span, outcome)
                return outcome
        finally:
            body.ctx = None
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt in a task
        error = AttemptError(
            job.attempt,
            view.store.now(),
            type(exc).__name__,
            describe(exc),
            format_task_error(exc),
            "transient",
        )
        kind = "failed" if job.attempt >= job.max_attempts else "retry"
        return Outcome(job.id, job.lease_token, kind, error=error, delay=1.0)


class Inbox:
    """The jobs sent and not yet started, filled by a reader thread so that a
    :class:`TakeBack` is answered even while the main thread runs a long body."""

    def __init__(
        self, inp: Connection, out: Connection, send_lock: threading.Lock, body: Body, parent: int
    ) -> None:
        self.inp, self.out, self.send_lock, self.body = inp, out, send_lock, body
        self.parent = parent  # the worker's pid
        self.jobs: deque[Claimed] = deque()
        self.cond = threading.Condition()
        self.closed = False

    def read(self) -> None:
        """Take what the parent sends until :data:`EXIT` or the pipe's end: one read of
        the pipe for however many whole messages it holds, handled under one lock."""
        fd = self.inp.fileno()
        buf = bytearray()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:  # the worker is gone (it sends EXIT before it closes the pipe)
                if os.getppid() != self.parent:
                    kill_group()
                self.end()
                return
            buf += chunk
            messages, at = frames(buf)
            del buf[:at]
            with self.cond:
                for msg in messages:
                    if msg is EXIT:
                        self.closed = True
                        self.cond.notify()
                        return
                    if isinstance(msg, Stop):
                        self.body.reason = msg.reason
                        self.body.told.set()
                    elif isinstance(msg, TakeBack):
                        self.take_back(msg)
                    else:  # a list of jobs, in the order they are to run
                        self.jobs.extend([unpack(Claimed, fields) for fields in msg])
                self.cond.notify()

    def end(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify()

    def take_back(self, msg: TakeBack) -> None:
        """Give back the jobs of ``msg`` that wait here (call under :attr:`cond`: a job is
        either returned or run)."""
        back = [j for j in self.jobs if (j.id, j.lease_token) in msg.keys]
        for job in back:
            self.jobs.remove(job)
        with self.send_lock:
            self.out.send_bytes(dumps(Returned(tuple((j.id, j.lease_token) for j in back))))

    def next(self, wait: bool) -> Claimed | None:
        """The next job to run (None: none yet, when not ``wait``ing; or the parent asked
        to end, or is gone: see :attr:`closed`)."""
        with self.cond:
            while wait and not self.jobs and not self.closed:
                self.cond.wait()
            if self.closed or not self.jobs:
                return None
            return self.jobs.popleft()

    def peek(self) -> Claimed | None:
        with self.cond:
            return self.jobs[0] if self.jobs else None


def main(argv: list[str]) -> int:
    spec, url, offset, read_fd, write_fd, parent = argv
    die_with_parent(int(parent))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's
    for fd in (int(read_fd), int(write_fd)):  # a subprocess of a task must not hold them:
        os.set_inheritable(fd, False)  # the worker sees the child's end by their closing
    inp = Connection(int(read_fd), writable=False)
    out = Connection(int(write_fd), readable=False)
    if os.environ.pop(TRACING_ENV, None) == "1":
        tracing.enable()
    paths = os.environ.pop(PATH_ENV, None)
    if paths:
        sys.path[:] = json.loads(paths)
    try:
        app = load(spec)
        app.url = url
    except BaseException as exc:  # noqa: BLE001 - reported to the worker, which stops
        out.send_bytes(
            dumps(Failed(f"the pool child could not import {spec}: {type(exc).__name__}: {exc}"))
        )
        return 1
    view = ChildApp(app, float(offset))
    executor = Executor(cast("Registry", view))
    names = tuple(name for name, task in app.tasks.items() if not task.is_async)
    out.send_bytes(dumps(Ready(os.getpid(), names)))
    send_lock = threading.Lock()
    measure = os.environ.get(MEMORY_ENV) == "1"
    body = Body()
    signal.signal(signal.SIGTERM, body.on_sigterm)
    inbox = Inbox(inp, out, send_lock, body, int(parent))
    threading.Thread(target=inbox.read, name="durq-pool-inbox", daemon=True).start()
    done: list[tuple[Any, ...]] = []  # outcomes not sent yet (one write for several)
    first = 0.0

    def flush() -> None:
        with send_lock:
            out.send_bytes(dumps(done))
        done.clear()

    while True:
        job = inbox.next(wait=not done)
        if job is None:
            if done:
                flush()
                continue
            return 0
        outcome = run_one(view, executor, job, body)
        if body.stopped:  # the parent settles the stopped job; what ran before goes now
            if done:
                flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        if not done:
            first = time.monotonic()
        done.append((pack(outcome), rss_bytes() if measure else 0))
        if must_flush(app, job, inbox.peek(), len(done), first):
            flush()


def must_flush(app: Any, job: Claimed, after: Claimed | None, held: int, first: float) -> bool:
    """Whether the outcomes held must go now. They wait (for one write with the next
    ones) only while the next job is already here, neither job has a timeout (the parent
    then knows exactly which body runs when it stops one), fewer than FLUSH_COUNT are held
    and the first of them is younger than FLUSH_AFTER seconds."""
    if after is None or held >= FLUSH_COUNT or time.monotonic() - first >= FLUSH_AFTER:
        return True
    tasks = app.tasks
    return any(
        (task := tasks.get(j.task)) is None or task.timeout is not None for j in (job, after)
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
