"""``durq worker --autoreload``: for development, restart the worker when a source changes.

The command runs as a small supervisor: the worker itself is a child process (the same
command without ``--autoreload``). Every ``interval`` seconds the supervisor looks at the
modification times of the ``*.py`` files under the watched directories (the current
directory by default); when one changed, it stops the child gracefully (SIGTERM: running
jobs finish within the grace, the rest go back to the queue) and starts a new one. A
SIGINT or SIGTERM to the supervisor is passed to the child, and the supervisor exits with
the child's code. Not for production: use a process manager there (docs/deploy.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType

#: Directories never watched (virtualenvs, caches, VCS data).
SKIP = {".venv", "venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", "node_modules"}


def snapshot(roots: Iterable[Path]) -> dict[Path, float]:
    """``{path: mtime}`` of every ``*.py`` file under ``roots`` (skipping :data:`SKIP`)."""
    seen: dict[Path, float] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    path = Path(folder, name)
                    try:
                        seen[path] = path.stat().st_mtime
                    except OSError:
                        continue
    return seen


def changed(before: dict[Path, float], after: dict[Path, float]) -> Path | None:
    """A file that was added, removed or modified between two snapshots, or None."""
    for path, mtime in after.items():
        if before.get(path) != mtime:
            return path
    for path in before:
        if path not in after:
            return path
    return None


def supervise(argv: Sequence[str], roots: Sequence[Path], interval: float = 1.0) -> int:
    """Run ``python -m durq <argv>`` and restart it when a watched file changes.

    Args:
        argv: the worker command's arguments (without ``--autoreload``).
        roots: the directories to watch.
        interval: seconds between looks at the files.

    Returns:
        The exit code of the last child (after a signal to the supervisor).
    """
    stop: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    command = [sys.executable, "-m", "durq", *argv]
    while True:
        child = subprocess.Popen(command)
        before = snapshot(roots)
        reason: Path | None = None
        while not stop and child.poll() is None:
            time.sleep(interval)
            reason = changed(before, after := snapshot(roots))
            if reason is not None:
                break
            before = after
        if stop:
            if child.poll() is None:
                child.send_signal(stop[0])
            return child.wait()
        if reason is None:  # the worker ended on its own (a crash, a bad app): wait for a fix
            print(
                f"durq: autoreload: the worker exited with {child.returncode}; "
                "waiting for a change to restart it",
                file=sys.stderr,
                flush=True,
            )
            before = snapshot(roots)
            while not stop and changed(before, snapshot(roots)) is None:
                time.sleep(interval)
            if stop:
                return child.returncode
            continue
        print(
            f"durq: autoreload: {reason} changed; restarting the worker",
            file=sys.stderr,
            flush=True,
        )
        child.send_signal(signal.SIGTERM)
        child.wait()
