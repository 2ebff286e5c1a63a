"""The wake-up of an enqueue on PostgreSQL: a NOTIFY sent after the jobs' commit, in a
transaction of its own, shared by the threads of this process that committed meanwhile.

Why not inside the enqueue's transaction: PostgreSQL serialises every transaction that
sent a NOTIFY under one cluster-wide lock (``PreCommit_Notify`` in ``async.c`` locks
"database 0" and holds it until after the commit), and the commit's WAL flush happens
while it is held, so concurrent producers could not share a flush (group commit): 8
producer threads ran at under half the rate of the same INSERT without the NOTIFY. A
transaction that only notifies writes no WAL but its commit record, so PostgreSQL does not
wait for its flush (``synchronous_commit = off`` is set for it too, to say so): the lock is
held for microseconds, and the jobs' own commit is made durable as any other.

The protocol (:meth:`Wakes.send`): a thread whose jobs committed adds their queues to the
pending set and notes the number of the next wake to start (``mine``). A wake takes the
whole pending set just before it is sent, so the first wake numbered ``mine`` or higher
carries the thread's queues and starts after its commit. The thread returns once such a
wake has been sent; while another thread is sending, it waits for that wake (which started
before its queues were added, so does not count) and then either finds a later one sent or
sends the next itself, for every thread that added queues meanwhile. A thread sends at
most one wake; a wake that failed (the connection broke after the commit) puts its queues
back, for the next wake of this process to carry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import pq

#: The wake-up of the queues ``$2`` (a text array) on the channel ``$1``: one notification
#: a queue, in a transaction that needs no durability (a notification is not kept over a
#: crash anyway).
WAKE = (
    b"SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, q)"
    b" FROM unnest($2::text[]) AS q"
)
#: The same for one queue ``$2``, the common case (no array to build).
WAKE_ONE = b"SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"

#: Seconds a thread waits for another's wake at most before it sends its own (a wake
#: stuck on a stalled connection must not hold the other producers up with it).
MAX_WAIT = 1.0


class Wakes:
    """The wake-ups of this process's enqueues on one channel (see the module's text).

    Args:
        channel: the NOTIFY channel the workers LISTEN on.
    """

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._cond = threading.Condition(threading.Lock())
        self._pending: set[str] = set()
        self._sending = False
        self._next = 1  # the number of the next wake to take the pending set
        self._done = 0  # the highest number of a wake sent
        self.sent = 0  # wakes sent (for tests and benches)

    def send(self, conn: psycopg.Connection[Any], queues: Iterable[str]) -> None:
        """Return once a NOTIFY for each of ``queues`` has been sent in a transaction that
        started after the caller's commit: by this call on ``conn`` (an autocommit
        connection outside any transaction), or by another thread's call meanwhile.

        Never raises for the database: the jobs are committed already, and an error here
        must not make the caller enqueue them again. A wake that failed leaves its queues
        for the next one; until then an idle worker finds the jobs at its periodic claim.
        """
        with self._cond:
            self._pending.update(queues)
            mine = self._next
            deadline = time.monotonic() + MAX_WAIT if self._sending else 0.0
            while self._sending and self._done < mine:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._done >= mine:
                return
            if self._sending:  # waited MAX_WAIT: send everything pending, outside the turn
                todo, number, turn = sorted(self._pending), self._next, False
            else:
                todo, number, turn = sorted(self._pending), self._next, True
                self._pending.clear()
                self._sending = True
            self._next += 1
        ok = False
        try:
            ok = _notify(conn, self.channel, todo)
        finally:
            with self._cond:
                if turn:
                    self._sending = False
                if ok:
                    self._done = max(self._done, number)
                    self.sent += 1
                elif turn:
                    self._pending.update(todo)
                self._cond.notify_all()


def _notify(conn: psycopg.Connection[Any], channel: str, queues: Sequence[str]) -> bool:
    """Send the wake-up of ``queues`` on ``conn``; False when it failed.

    On libpq directly (``conn.pgconn``, psycopg's documented low-level interface; the
    connection is this thread's, idle, outside a transaction): ``conn.execute`` cost the
    enqueue ~110,000 instructions more (a cursor, adaptation, the result), this ~25,000
    (callgrind, producer process: 235,000 per `noop.enqueue()` before, 260,000 now). libpq
    releases the GIL while it waits for the server, as ``execute`` does."""
    enc = conn.info.encoding
    if len(queues) == 1:
        statement, params = WAKE_ONE, [channel.encode(enc), queues[0].encode(enc)]
    else:
        statement, params = WAKE, [channel.encode(enc), text_array(queues).encode(enc)]
    try:
        result = conn.pgconn.exec_params(statement, params)
    except psycopg.Error:
        return False
    return result.status == pq.ExecStatus.TUPLES_OK


def text_array(values: Sequence[str]) -> str:
    """``values`` as a PostgreSQL array literal of text: each element double-quoted, with
    its backslashes and double quotes escaped by a backslash."""
    quoted = (v.replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return "{" + ",".join(f'"{v}"' for v in quoted) + "}"
