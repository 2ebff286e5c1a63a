"""What parent and child say to each other over a pair of pipes.

Each message is one pickled object framed by :class:`multiprocessing.connection.Connection`
(a 4-byte length, then the bytes): one write and one read per message.

Parent → child: a :class:`durq.model.Claimed` to run, or :data:`EXIT` to end.
Child → parent: first a :class:`Ready`, then one :class:`Done` per job, in order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from durq.errors import Transient
from durq.model import Outcome

#: Asks the child to end once its current job (there is none: one job at a time) is done.
EXIT = None

#: The environment variable that carries the parent's ``sys.path`` (JSON) to a child.
PATH_ENV = "DURQ_POOL_SYS_PATH"


@dataclass(frozen=True, slots=True)
class Ready:
    """The child imported the app: its pid and the sync task names it can run."""

    pid: int
    tasks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Done:
    """A job's outcome and the child's resident memory (bytes) right after the job."""

    outcome: Outcome
    rss: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The child could not start (the app did not import): why, for the worker's error."""

    message: str


class ChildDied(Transient):
    """A job's child process ended while it ran the job (killed, crashed, exited, or
    over ``max_memory_per_child``): the attempt is retried like any transient error, or
    fails when no attempts are left. The message says how the child ended."""


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of a process (this one by default) in bytes, from /proc; 0 if
    unknown (not Linux, or the process is gone)."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
