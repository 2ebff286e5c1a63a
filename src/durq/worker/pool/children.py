"""One child process of the pool, as the parent holds it: spawn, talk, signal, reap.

A child is ``python -m durq.worker.pool.child`` started with :class:`subprocess.Popen`
in a new session (``start_new_session``: it leads its own process group, so a signal to
the group reaches whatever its task started too). It is a fresh interpreter, not a fork
of the worker: the worker has threads and open database connections, which a fork would
copy half-way (a lock held by another thread stays held for ever in the copy).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from durq.errors import ConfigError
from durq.model import Claimed
from durq.observability import tracing
from durq.worker.pool.protocol import (
    EXIT,
    MEMORY_ENV,
    PATH_ENV,
    TRACING_ENV,
    Done,
    Failed,
    Ready,
    Returned,
    Stop,
    TakeBack,
    done,
    dumps,
    frames,
    pack,
)


def locate(app: Any) -> str:
    """``module:attr`` naming ``app`` in an imported module (or ``file.py:attr`` when it
    lives only in the script that started the worker), for a child to import it.

    Raises:
        ConfigError: no imported module holds the app at its top level.
    """
    main: str | None = None
    for name, module in list(sys.modules.items()):
        try:
            found = [k for k, v in vars(module).items() if v is app]
        except TypeError:  # not a real module
            continue
        if not found:
            continue
        if name not in ("__main__", "__mp_main__"):  # multiprocessing aliases __main__
            return f"{name}:{found[0]}"
        path = getattr(module, "__file__", None)
        if path:
            main = f"{os.path.abspath(path)}:{found[0]}"
    if main is not None:
        return main
    raise ConfigError(
        "pool='processes' needs the app at the top level of an importable module "
        "(a child process imports it from there)"
    )


class Child:
    """A child process: its pid, its pipes, the jobs sent to it, the tasks it knows.

    The constructor starts the process and returns at once; the child's first message
    (:class:`Ready`, or :class:`Failed` if the app did not import) arrives on
    :attr:`fd` like any other, and goes to :meth:`hello`.

    Raises (from the constructor):
        OSError: the process could not be started (out of processes or memory).
    """

    def __init__(self, spec: str, url: str, clock_offset: float, measure: bool = False) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**os.environ, PATH_ENV: json.dumps(sys.path)}
        if measure:
            env[MEMORY_ENV] = "1"
        if tracing.enabled():
            env[TRACING_ENV] = "1"
        argv = [
            sys.executable,
            "-m",
            "durq.worker.pool.child",
            spec,
            url,
            repr(clock_offset),
            str(to_child_r),
            str(from_child_w),
            str(os.getpid()),
        ]
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(to_child_r, from_child_w),
                start_new_session=True,
                env=env,
                stdin=subprocess.DEVNULL,  # the worker's stdin is not the child's
            )
        except BaseException:
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.pid = self.proc.pid
        self.fd = from_child_r
        self.conn_out = Connection(to_child_w, readable=False)
        self.conn_in = Connection(from_child_r, writable=False)  # read as raw frames
        self._buf = bytearray()
        self.started = time.monotonic()
        self.ready = False
        self.jobs = 0
        self.tasks: frozenset[str] = frozenset()

    def hello(self, msg: object) -> None:
        """Take the child's first message.

        Raises:
            ConfigError: the child could not import the app (the message says why).
        """
        if isinstance(msg, Failed):
            raise ConfigError(msg.message)
        if not isinstance(msg, Ready):
            raise ConfigError(f"pool child {self.pid} said {msg!r} before it was ready")
        self.tasks = frozenset(msg.tasks)
        self.ready = True

    def send_jobs(self, jobs: list[Claimed]) -> None:
        """Send jobs to run, in order, in one write (one frame: a list, each job as
        :func:`pack` makes it). The caller counts them in :attr:`jobs`.

        Raises:
            OSError: the child is gone (its pipe is closed).
        """
        self.conn_out.send_bytes(dumps([pack(job) for job in jobs]))

    def send(self, message: TakeBack | Stop | None) -> None:
        """Send a take-back, a stop reason (before a SIGTERM) or :data:`EXIT`.

        Raises:
            OSError: the child is gone (its pipe is closed).
        """
        self.conn_out.send_bytes(dumps(message))

    def receive(self) -> list[list[Done] | Returned | Ready | Failed]:
        """The messages the child sent that have fully arrived (call it when :attr:`fd`
        is readable): one read of the pipe, however many messages it holds.

        Raises:
            EOFError: the child ended (its pipe closed) and every message it sent was read.
        """
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError as exc:
            raise EOFError(str(exc)) from exc
        if not chunk:
            raise EOFError(f"pool child {self.pid} closed its pipe")
        buf = self._buf
        buf += chunk
        messages, at = frames(buf)
        out: list[list[Done] | Returned | Ready | Failed] = []
        for msg in messages:
            if isinstance(msg, list):
                out.append([done(item) for item in msg])
            else:
                assert isinstance(msg, Returned | Ready | Failed)
                out.append(msg)
        del buf[:at]
        return out

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the child's whole process group (what its task started too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def kill(self, grace: float = 0.0) -> int:
        """SIGTERM the group, give the child ``grace`` seconds to end, then SIGKILL the
        whole group and reap the child. Returns its exit status (negative: the signal
        that ended it)."""
        if grace > 0 and not self.exited(0.0):
            self.signal_group(signal.SIGTERM)
            self.exited(grace)
        return self.reap()

    def reap(self) -> int:
        """SIGKILL the child's group (the child if it still runs, and whatever it started:
        a grandchild that outlived it goes too), then reap the child. The group is
        signalled before the reap, while the unreaped child still holds its id."""
        self.signal_group(signal.SIGKILL)
        code = self.proc.wait()
        self.close_pipes()
        return code

    def exited(self, timeout: float) -> bool:
        """Whether the child has ended within ``timeout`` seconds, without reaping it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped already
                return True
            if info is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def stop(self, grace: float) -> int:
        """End an idle child: ask it to exit, then :meth:`kill` it after ``grace``."""
        with contextlib.suppress(OSError):
            self.send(EXIT)
        self.exited(grace)
        return self.kill(grace=0.5)

    def close_pipes(self) -> None:
        for conn in (self.conn_out, self.conn_in):
            with contextlib.suppress(OSError):
                conn.close()

    def alive(self) -> bool:
        return not self.exited(0.0)


def describe_exit(code: int) -> str:
    """``signal 9 (SIGKILL)`` or ``exit code 3`` for a child's exit status."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        return f"signal {-code} ({name})"
    return f"exit code {code}"
