"""Shared plumbing: child processes speaking JSON lines, timing helpers, machine facts."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import queue
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
REPO_ROOT = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    """A measurement could not be taken (a child failed, timed out or lied)."""


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) by the nearest-rank method."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def paired_ratios(
    durq_op: Callable[[], object],
    floor_op: Callable[[], object],
    n: int,
    block: int = 50,
    rounds: int = 5,
) -> list[float]:
    """Each of ``rounds`` rounds: ``n`` calls of ``durq_op`` and ``n`` of ``floor_op``,
    alternating in blocks of ``block`` in this process; returns each round's floor time ÷
    durq time (durq's rate ÷ the floor's). A change in the machine's load or the disk's
    commit time hits both sides of a round alike, which separate runs do not."""
    ratios: list[float] = []
    for _ in range(rounds):
        durq_s = floor_s = 0.0
        for _ in range(max(1, n // block)):
            t0 = time.perf_counter()
            for _ in range(block):
                durq_op()
            t1 = time.perf_counter()
            for _ in range(block):
                floor_op()
            durq_s += t1 - t0
            floor_s += time.perf_counter() - t1
        ratios.append(floor_s / durq_s)
    return ratios


def read_status_kb(pid: int, key: str) -> int:
    """A ``kB`` field (``VmRSS``, ``VmHWM``) of ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise BenchError(f"no {key} in /proc/{pid}/status")


def sqlite_default_synchronous() -> str:
    """The ``synchronous`` level a connection gets when the library does not set one.

    Both peers leave it alone, so this is the durability they run with (in WAL mode).
    """
    with tempfile.TemporaryDirectory(prefix="durq-bench-probe-") as tmp:
        conn = sqlite3.connect(os.path.join(tmp, "probe.db"))
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
        finally:
            conn.close()
    return SYNC_NAMES.get(level, str(level))


def filesystem_of(path: str) -> str:
    """The mount (device and type) that holds ``path``, from /proc/mounts."""
    best, found = "", "unknown"
    real = os.path.realpath(path)
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 3:
                continue
            mount = parts[1]
            inside = real == mount or real.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best):
                best, found = mount, f"{parts[2]} ({parts[0]} on {mount})"
    return found


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine_info(base_dir: str) -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "bench_dir": base_dir,
        "filesystem": filesystem_of(base_dir),
        "durq": package_version("durq"),
        "huey": package_version("huey"),
        "persist-queue": package_version("persist-queue"),
        "psycopg": package_version("psycopg"),
        "procrastinate": package_version("procrastinate"),
        "pgqueuer": package_version("pgqueuer"),
        "sqlite_default_synchronous": sqlite_default_synchronous(),
    }


@contextlib.contextmanager
def case_dir(base: str, name: str) -> Iterator[Path]:
    """A fresh temporary directory for one case, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"durq-bench-{name}-", dir=base) as tmp:
        yield Path(tmp)


def sqlite_url(path: Path, synchronous: str | None = None) -> str:
    url = f"sqlite:///{path}"
    return f"{url}?synchronous={synchronous}" if synchronous else url


@dataclass
class Child:
    """A benchmark child process (``python -m bench.<module> ...``) that prints one JSON
    object per line on stdout and reads commands (``stop``) on stdin.

    Use as a context manager: leaving it always ends the process (a polite ``stop``
    line and closed stdin first, then SIGTERM, then SIGKILL).
    """

    module: str
    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    prefix: list[str] = field(default_factory=list)  # e.g. valgrind and its options
    proc: subprocess.Popen[str] | None = None
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _log: IO[str] | None = None

    def __enter__(self) -> Child:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self._log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", self.module, *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=str(REPO_ROOT),
            env=env,
        )
        threading.Thread(target=self._pump, name=f"bench-read-{self.module}", daemon=True).start()
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def read(self, timeout: float) -> dict[str, Any]:
        """The next JSON object the child printed (non-JSON lines are skipped).

        Raises:
            BenchError: the child exited or stayed silent for ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{self.module}: no answer within {timeout:.0f}s{self._tail()}")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise BenchError(f"{self.module} exited early{self._tail()}")
            line = line.strip()
            if not line.startswith("{"):
                continue
            data: dict[str, Any] = json.loads(line)
            if "error" in data:
                raise BenchError(f"{self.module} failed: {data['error']}{self._tail()}")
            return data

    def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def _tail(self) -> str:
        if self._log is not None:
            self._log.flush()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        tail = text.strip().splitlines()[-15:]
        return ("\n  child stderr:\n    " + "\n    ".join(tail)) if tail else ""

    def __exit__(self, *exc: object) -> None:
        proc = self.proc
        try:
            if proc is not None and proc.poll() is None:
                self.send("stop")
                with contextlib.suppress(OSError):
                    assert proc.stdin is not None
                    proc.stdin.close()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.terminate()
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(timeout=5)
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            if self._log is not None:
                self._log.close()


def emit(data: dict[str, Any]) -> None:
    """Print one JSON line for the parent (children only)."""
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def watch_stdin(on_stop: Callable[[], object]) -> threading.Thread:
    """In a child: call ``on_stop()`` when the parent writes ``stop`` or closes stdin."""

    def loop() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        on_stop()

    thread = threading.Thread(target=loop, name="bench-stdin", daemon=True)
    thread.start()
    return thread
