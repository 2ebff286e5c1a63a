"""Real ``durq worker`` processes for the proving drivers: start, signal, watch, stop.

:class:`WorkerPool` is what a driver holds: it starts workers of one task app with the
runs-file environment (:mod:`durq.proving.runs`), SIGKILLs or SIGTERMs them on demand,
notices those that exit on their own and stops them all at the end. :func:`read_rss` reads a
worker's resident set size. :func:`interrupts_as_keyboard_interrupt` and :func:`shielded`
make a driver's clean-up run on SIGTERM and finish despite a second Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from durq.proving.runs import PARENT_ENV, RUNS_ENV

if TYPE_CHECKING:
    from durq.app import Durq

#: Grace (seconds) a worker gets at the end, via ``--grace``, to finish running jobs.
WORKER_GRACE = 1.0
#: Seconds to wait for a SIGTERMed worker to exit before SIGKILLing it.
STOP_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """How every worker of a proving run is started.

    Attributes:
        app_spec: the ``MODULE:ATTR`` the workers run.
        url: the database URL (absolute: the workers run in ``workdir``).
        queue: the queue they claim from.
        concurrency: slots per worker.
        lease: lease in seconds.
        workdir: their working directory and log location.
        runs: the runs file their tasks append to (:mod:`durq.proving.runs`).
        extra_args: more ``durq worker`` options, appended (e.g. retention for the soak).
    """

    app_spec: str
    url: str
    queue: str
    concurrency: int
    lease: float
    workdir: Path
    runs: Path
    extra_args: tuple[str, ...] = ()

    def command(self, worker_id: str) -> list[str]:
        """The ``durq worker`` command line of the worker ``worker_id``."""
        return [
            sys.executable, "-m", "durq", "worker", self.app_spec,
            "--db", self.url, "--queues", self.queue,
            "--concurrency", str(self.concurrency), "--lease", str(self.lease),
            "--grace", str(WORKER_GRACE), "--worker-id", worker_id, "--log-level", "warning",
            *self.extra_args,
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        """This process's environment plus the database URL, the runs file and this
        process's pid as the workers' parent."""
        return {
            **os.environ,
            "DURQ_URL": self.url,
            RUNS_ENV: str(self.runs),
            PARENT_ENV: str(os.getpid()),
        }


class WorkerProcess:
    """One ``durq worker`` child in a session of its own (so a Ctrl-C reaches the driver
    only, which then stops it), stdout discarded, stderr to ``<workdir>/<worker_id>.log``.

    Args:
        worker_id: the ``--worker-id`` it registers under.
        spec: how it is started.
        env: its environment (see :meth:`WorkerSpec.env`).
    """

    def __init__(self, worker_id: str, spec: WorkerSpec, env: dict[str, str]) -> None:
        self.id = worker_id
        self.log = spec.workdir / f"{worker_id}.log"
        self.killed = False
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                spec.command(worker_id),
                cwd=spec.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """Its exit code (negative: the signal that ended it), None while it runs."""
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL and reap."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self) -> None:
        """SIGTERM (a graceful stop); does not wait."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    def tail(self, lines: int = 3) -> str:
        """The last ``lines`` lines of its stderr joined by `` | ``, for messages."""
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def exit_line(self) -> str:
        """How it exited, for reports: pid, exit code and the end of its stderr."""
        return f"pid {self.pid} exit code {self.returncode}: {self.tail()}"


def stop_all(procs: Sequence[WorkerProcess], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every live process, wait up to ``timeout`` seconds, then SIGKILL the rest."""
    for p in procs:
        if p.alive():
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()


def read_rss(pid: int) -> int | None:
    """The resident set size of ``pid`` in bytes (``VmRSS``), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class WorkerPool:
    """The worker processes of one proving run, all started from one :class:`WorkerSpec`,
    with ids ``<prefix>-0``, ``<prefix>-1``, ...

    Args:
        spec: how each worker is started.
        prefix: the start of every worker id.

    Attributes:
        procs: every process started, in order.
        live: those running and not signalled by the pool.
        stopping: those SIGTERMed by :meth:`terminate` and not yet gone, with the monotonic
            second of the signal.
        exits: one line per worker that exited on its own (see :meth:`replace_exited`).
    """

    def __init__(self, spec: WorkerSpec, prefix: str) -> None:
        self.spec = spec
        self.prefix = prefix
        self.env = spec.env()
        self.procs: list[WorkerProcess] = []
        self.live: list[WorkerProcess] = []
        self.stopping: list[tuple[WorkerProcess, float]] = []
        self.exits: list[str] = []
        self._counter = 0

    def launch(self) -> WorkerProcess:
        """Start one more worker; it joins :attr:`live`."""
        p = WorkerProcess(f"{self.prefix}-{self._counter}", self.spec, self.env)
        self._counter += 1
        self.procs.append(p)
        self.live.append(p)
        return p

    def kill(self, p: WorkerProcess) -> None:
        """SIGKILL a live worker and reap it."""
        self.live.remove(p)
        p.kill()

    def terminate(self, p: WorkerProcess) -> None:
        """SIGTERM a live worker; :meth:`reap_stopping` watches it go."""
        self.live.remove(p)
        p.terminate()
        self.stopping.append((p, time.monotonic()))

    def replace_exited(
        self, max_exits: int, relaunch: Callable[[WorkerProcess], object]
    ) -> list[WorkerProcess]:
        """Find the live workers that exited although nobody signalled them: each leaves
        :attr:`live`, gets a line in :attr:`exits`, and is replaced by ``relaunch(it)`` while
        there have been at most ``max_exits`` such exits.

        Returns:
            The workers that exited, in order.
        """
        gone = []
        for p in list(self.live):
            if not p.alive():
                self.live.remove(p)
                self.exits.append(p.exit_line())
                gone.append(p)
                if len(self.exits) <= max_exits:
                    relaunch(p)
        return gone

    def reap_stopping(self, timeout: float = STOP_TIMEOUT) -> None:
        """Forget the SIGTERMed workers that are gone; SIGKILL those still there ``timeout``
        seconds after the signal (as if they had been SIGKILLed)."""
        for p, since in list(self.stopping):
            if not p.alive():
                self.stopping.remove((p, since))
            elif time.monotonic() - since > timeout:
                p.kill()
                self.stopping.remove((p, since))

    def running(self) -> list[WorkerProcess]:
        """The live workers, then those stopping (all that may still run)."""
        return [*self.live, *(p for p, _ in self.stopping)]

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every worker ever started (see :func:`stop_all`; ``timeout`` in seconds)."""
        stop_all(self.procs, timeout)

    def unregister(self, app: Durq) -> None:
        """Delete every started worker's registration (killed ones could not do it)."""
        for p in self.procs:
            app.store.unregister_worker(p.id)


@contextlib.contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """In the main thread, turn SIGTERM into KeyboardInterrupt (so clean-up runs) for the
    duration; elsewhere do nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM while cleaning up (main thread only), so that a second
    Ctrl-C cannot leave processes or rows behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
