"""Producer processes for ``durq soak --producers N``: killed and restarted like workers.

Each is ``python -m durq.proving.soak_producers URL QUEUE RATE SEED LEDGER PARENT``: the
soak's mix (:class:`durq.proving.soak_mix.Producer`) at RATE jobs per second, and after
every enqueue transaction has returned, one line ``<id> <kind> <state> <runs>`` per job
appended to LEDGER (one ``write()``, ``O_APPEND``, so a SIGKILL never leaves half a line
and lines of several producers never interleave). A job whose transaction committed just
before its producer was killed, before its lines were written, is not in the ledger: the
soak counts such jobs (*unacknowledged*) and does not judge them, as a caller whose
``enqueue()`` never returned cannot know about its job. A producer exits when its parent
(the soak) is gone.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from durq.proving.soak_mix import KIND_BY_NAME, Producer, SoakConfig
from durq.proving.soak_observe import Expect


class LedgerProducer(Producer):
    """A :class:`Producer` that writes its ledger to a file instead of a shared dict."""

    def __init__(self, url: str, config: SoakConfig, rng: random.Random, ledger: Path) -> None:
        super().__init__(url, config, rng, {}, set(), threading.Lock())
        self.ledger_fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def produce(self, n: int) -> None:
        groups: dict[tuple[str, str], list[tuple[dict[str, Any], Expect]]] = defaultdict(list)
        for _ in range(n):
            kind, payload, expect = self._item()
            group = kind if kind in ("exhausted", "expire") else "default"
            groups[(KIND_BY_NAME[kind].task, group)].append((payload, expect))
        for (task, group), items in groups.items():
            jobs = self.app.enqueue_many_with(
                task, [p for p, _ in items], self._options(group), keys=None, task=None
            )
            lines = "".join(
                f"{job.id} {e.kind} {e.state} {e.runs}\n"
                for job, (_, e) in zip(jobs, items, strict=True)
            )
            os.write(self.ledger_fd, lines.encode())
            self.enqueued += len(jobs)


class ProducerProcess:
    """One producer child in a session of its own; stderr to ``<workdir>/<name>.log``."""

    def __init__(
        self, name: str, config: SoakConfig, url: str, rate: float, seed: int, ledger: Path,
        workdir: Path,
    ) -> None:  # fmt: skip
        self.id = name
        self.log = workdir / f"{name}.log"
        argv = [sys.executable, "-m", "durq.proving.soak_producers", url, config.queue,
                repr(rate), str(seed), str(ledger), str(os.getpid())]  # fmt: skip
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; reaped either way."""
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()


class LedgerLog:
    """The soak's side: reads the complete lines producers appended since the last poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def poll(self) -> list[tuple[int, Expect]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        out = []
        for line in chunk[:end].decode().splitlines():
            job_id, kind, state, runs = line.split()
            out.append((int(job_id), Expect(kind, state, int(runs))))
        return out


def main(argv: list[str]) -> None:
    url, queue, rate, seed, ledger, parent = argv[1:7]
    config = SoakConfig(url, rate=float(rate), queue=queue)
    producer = LedgerProducer(url, config, random.Random(int(seed)), Path(ledger))
    signal.signal(signal.SIGTERM, lambda *_: producer.stop_event.set())

    def watch_parent() -> None:
        while not producer.stop_event.wait(0.5):
            if os.getppid() != int(parent):
                producer.stop_event.set()

    threading.Thread(target=watch_parent, daemon=True).start()
    producer.run()
    producer.app.close()


if __name__ == "__main__":
    main(sys.argv)
