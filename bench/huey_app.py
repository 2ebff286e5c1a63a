"""The SqliteHuey app of the benchmark, built the same way in the parent and the child.

Huey routes by ``module.function`` name, so both sides build it from this module. Default
settings throughout: ``SqliteHuey(filename=...)`` uses WAL and leaves ``synchronous`` at
SQLite's default; results are stored (``results=True``) but not ``None`` ones.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from huey import SqliteHuey  # type: ignore[import-untyped]


@dataclass
class Counter:
    """Counts executed no-op tasks; sets ``done`` when ``target`` is reached."""

    target: int = 0
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    def hit(self) -> None:
        with self.lock:
            self.count += 1
            if self.target and self.count >= self.target:
                self.done.set()


@dataclass
class HueyApp:
    huey: Any
    noop: Any
    stamp: Any
    counter: Counter


def make_huey(path: str) -> HueyApp:
    huey = SqliteHuey(name="bench", filename=path)
    counter = Counter()

    def noop() -> None:
        counter.hit()

    def stamp() -> float:
        return time.time()

    return HueyApp(huey, huey.task()(noop), huey.task()(stamp), counter)
