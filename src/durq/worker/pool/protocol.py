"""What parent and child say to each other over a pair of pipes.

Each message is one object pickled by :func:`dumps` in the frame of
:class:`multiprocessing.connection.Connection` (a 4-byte length, then the bytes); each end
reads whatever whole frames a pipe holds in one read (:func:`frames`).

Parent → child: a list of jobs to run, in order, each :func:`pack` of its
:class:`durq.model.Claimed` (all the jobs the parent hands a child at once, in one write;
a child holds at most :data:`DEPTH`: the one it runs and the next ones, so it never waits
for a round trip between two short jobs), a :class:`TakeBack`, or :data:`EXIT` to end.
Child → parent: first a :class:`Ready`, then lists of ``(pack(outcome), rss)``, one
item per job in the order the jobs were sent (:func:`done`; several outcomes of short
jobs go in one write, see ``child.must_flush``), and a :class:`Returned` for each
:class:`TakeBack`. Jobs and outcomes go as plain tuples of their fields: a dataclass
with slots pickles field by field through Python code, several times slower.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass
from typing import Any, TypeVar

from durq.errors import Transient
from durq.model import AttemptError, Outcome

T = TypeVar("T")

#: Asks the child to end once its current job (there is none: one job at a time) is done.
EXIT = None

#: The environment variable that carries the parent's ``sys.path`` (JSON) to a child.
PATH_ENV = "DURQ_POOL_SYS_PATH"
#: Set (to "1") when the pool has a memory limit: the child then reads its RSS after
#: each job (a /proc read it skips otherwise).
MEMORY_ENV = "DURQ_POOL_MEASURE_RSS"
#: Set to "1" for children of a worker with OpenTelemetry tracing on (``--otel``): each
#: child then opens the attempt's span around the body, as a thread would.
TRACING_ENV = "DURQ_POOL_TRACING"


#: The frame header of ``multiprocessing.connection.Connection``: the message's length.
HEADER = struct.Struct("!i")

#: Jobs a child holds at once: the one it runs and the ones waiting behind it (only while
#: bodies are short, see ``pool.HOLD``). Each wake-up of a child (a read, a thread
#: hand-off, a write back) is paid per batch, not per job: at 4 it cost a no-op drain
#: ~91 us of CPU per job (parent and children), at 16 ~61 us (bench/README.md).
DEPTH = 16
#: Jobs per child the worker's default prefetch is sized for: a prefetch sized for DEPTH
#: (128 at 4 children) drained no faster than this (32), and holds 4 x more leased jobs.
PREFETCH_PER_CHILD = 4


@dataclass(frozen=True, slots=True)
class TakeBack:
    """Give back these jobs if they have not started (the one running cannot be), named
    by (job id, lease token): two attempts of one job are two different jobs here."""

    keys: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Stop:
    """Sent just before SIGTERM to the child's group: why its running body is stopped
    (``"timeout"``, ``"cancelled"``, ``"expired"``, ``"lease_lost"``, ``"memory"``), so
    the body gets :class:`durq.Interrupted` with that reason and its ``finally`` blocks and
    ``ctx.on_interrupt`` callbacks run before the child exits."""

    reason: str


@dataclass(frozen=True, slots=True)
class Returned:
    """The jobs of a :class:`TakeBack` that had not started: they never ran here, as
    (job id, lease token)."""

    keys: tuple[tuple[int, int], ...]


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


def dumps(message: object) -> bytes:
    """A message's bytes: plain :func:`pickle.dumps` (protocol 5), several times cheaper
    for a small message than the ``ForkingPickler`` of ``Connection.send``; the frame
    (``Connection.send_bytes``) is the same, so either end may read it as ``recv`` does."""
    return pickle.dumps(message, protocol=5)


def frames(buf: bytearray) -> tuple[list[Any], int]:
    """The messages of the whole frames at the start of ``buf`` (a 4-byte big-endian
    length, then the pickle) and how many bytes they took."""
    out: list[Any] = []
    at = 0
    end = len(buf)
    view = memoryview(buf)
    try:
        while end - at >= 4:
            (size,) = HEADER.unpack_from(buf, at)
            if end - at - 4 < size:
                break
            out.append(pickle.loads(view[at + 4 : at + 4 + size]))
            at += 4 + size
    finally:
        view.release()
    return out, at


def pack(record: Any) -> tuple[Any, ...]:
    """A slots dataclass (``Claimed``, ``Outcome``) as the tuple of its fields, in order."""
    return tuple([getattr(record, name) for name in type(record).__slots__])


def unpack(cls: type[T], fields: tuple[Any, ...]) -> T:
    """The record :func:`pack` made ``fields`` of."""
    return cls(*fields)


def done(message: tuple[Any, ...]) -> Done:
    """A child's ``(pack(outcome), rss)`` as a :class:`Done`."""
    outcome = unpack(Outcome, message[0])
    if outcome.error is not None and not isinstance(outcome.error, AttemptError):
        raise TypeError(f"not an AttemptError: {outcome.error!r}")
    return Done(outcome, message[1])


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
