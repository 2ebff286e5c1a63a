"""A producer for the power-cut loop: ``python -m tests.powercut.producer URL ACKS``.

Enqueues ``noop`` jobs one by one for ever and, after each ``enqueue()`` has returned,
appends the job's id to ACKS (a file on a real disk, one ``write()`` per line), so the
loop knows every enqueue that returned before the cut."""

from __future__ import annotations

import os
import sys

import durq


def main(url: str, acks: str) -> None:
    dq = durq.Durq(url)
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n = 0
    while True:
        try:
            job = dq.enqueue("noop", {"n": n}, queue="cut")
        except durq.StoreError:  # busy: the cut comes soon anyway
            continue
        os.write(fd, f"{job.id}\n".encode())
        n += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
