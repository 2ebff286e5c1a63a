"""Whether a registered worker is alive, as ``durq status``, ``durq workers`` and the
dashboard see it, and the process checks the leader's rescue uses
(:mod:`durq.worker.liveness`).

A worker beats its ``workers`` row about every second. It is **live** while

- its row was beaten within its lease, or within its ``rescue_after`` when that is shorter
  (after it the leader's rescue counts the worker dead and returns its jobs); and
- when it runs on this host, in this pid namespace and since this boot: its process is
  still there (:func:`process_gone`). A worker killed with ``kill -9`` so drops out of the
  view of a ``durq status`` on its host at once, not a lease (30 s) later.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Protocol, TypeVar


def proc_stamp(pid: int) -> str | None:
    """``"<boot id>/<pid namespace>/<start time>"`` of process ``pid``, or None where
    ``/proc`` does not tell (not Linux, or the process is gone).

    Two stamps with the same boot id and pid namespace come from processes whose pids can
    be compared; the start time (clock ticks since boot) tells a reused pid apart.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.readlink(f"/proc/{pid}/ns/pid")
        started = _start_time(pid)
    except OSError:
        return None
    if started is None:
        return None
    return f"{boot}/{namespace}/{started}"


def _start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (after the command, which may hold spaces), or
    None for a zombie (dead, not yet reaped). Raises OSError when there is no such pid."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def process_gone(pid: int, stamp: str, mine: str | None) -> bool:
    """Whether the process that stamped ``stamp`` as ``pid`` is dead, as seen from the
    process whose stamp is ``mine``. False whenever this cannot be told for sure: another
    boot or pid namespace (a container with the same host name), or no ``/proc``."""
    if mine is None or not stamp:
        return False
    where, _, started = stamp.rpartition("/")
    if where != mine.rpartition("/")[0]:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user holds the pid: compare start times below
    try:
        return _start_time(pid) != started
    except OSError:
        return True


class Registration(Protocol):
    """What the liveness rule reads of a worker's row (``WorkerInfo``, ``WorkerDetail``)."""

    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def last_seen(self) -> float: ...
    @property
    def lease(self) -> float: ...
    @property
    def rescue_after(self) -> float | None: ...
    @property
    def proc(self) -> str | None: ...


R = TypeVar("R", bound=Registration)


def live(workers: Iterable[R], now: float) -> list[R]:
    """The workers among ``workers`` that are live at ``now`` (the store's clock, epoch s),
    in their order: seen within ``min(lease, rescue_after)`` seconds (``lease`` when
    ``rescue_after`` is None), and not on this host with their process gone."""
    host, mine = socket.gethostname(), proc_stamp(os.getpid())
    found = []
    for w in workers:
        window = w.lease if w.rescue_after is None else min(w.lease, w.rescue_after)
        if w.last_seen + window < now:
            continue
        if w.host == host and w.proc and process_gone(w.pid, w.proc, mine):
            continue
        found.append(w)
    return found
