"""Real worker processes for tests: start, signal, and always stop them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WorkerProc:
    """A ``durq worker`` child process whose JSON-lines stderr goes to a file."""

    def __init__(
        self,
        app: str,
        url: str,
        log: Path,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.log = log
        full_env = {**os.environ, "DURQ_URL": url, "PYTHONPATH": str(ROOT), **(env or {})}
        self._err = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", app, *args],
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def kill(self) -> None:
        """SIGKILL, reap, and close the log (like ``stop``, but says what it does)."""
        self.signal(signal.SIGKILL)
        self.proc.wait(10)
        self.stop()

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self._err.closed:
            self._err.close()

    def events(self) -> list[dict[str, object]]:
        import json

        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


@contextmanager
def workers(*procs_args: dict[str, object]) -> Iterator[list[WorkerProc]]:
    """Start workers from keyword dicts for :class:`WorkerProc`; stop them all on exit."""
    started: list[WorkerProc] = []
    try:
        for kwargs in procs_args:
            started.append(WorkerProc(**kwargs))  # type: ignore[arg-type]
        yield started
    finally:
        for proc in started:
            proc.stop()


def wait_for(
    predicate: object, timeout: float, interval: float = 0.02, what: str = "condition"
) -> None:
    """Poll ``predicate()`` until true; AssertionError after ``timeout`` seconds."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
