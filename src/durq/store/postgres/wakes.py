"""The wake-up of an enqueue on PostgreSQL: a NOTIFY sent after the jobs' commit, in a
transaction of its own.

Why not inside the enqueue's transaction: PostgreSQL serialises every transaction that
sent a NOTIFY under one cluster-wide lock (``PreCommit_Notify`` in ``async.c`` locks
"database 0" and holds it until after the commit), and the commit's WAL flush happens
while it is held, so concurrent producers could not share a flush (group commit): 8
producer threads ran at under half the rate of the same INSERT without the NOTIFY. A
transaction that only notifies writes no WAL but its commit record, so PostgreSQL does not
wait for its flush (``synchronous_commit = off`` is set for it too, to say so): the lock is
held for microseconds, and the jobs' own commit is made durable as any other.

Each enqueue sends its own wake, on its own connection, after its commit; so the enqueue
returns only once a NOTIFY that started after its jobs' commit has committed. Sharing one
wake between the threads that committed meanwhile (each waiting for the wake in flight,
then one sending for all) was tried and measured no faster with 4 and 8 producer threads
(median 0.89x of this, rounds alternating on the loaded 2-core machine): the waits cost
what the fewer NOTIFYs saved. A wake that failed (the connection broke after the commit)
leaves its queues to the next wake this process sends.
"""

from __future__ import annotations

import threading
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


class Wakes:
    """The wake-ups of this process's enqueues on one channel (see the module's text).

    Args:
        channel: the NOTIFY channel the workers LISTEN on.
    """

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._lock = threading.Lock()
        self._missed: set[str] = set()  # queues of wakes that failed

    def send(self, conn: psycopg.Connection[Any], queues: Iterable[str]) -> None:
        """Send a NOTIFY for each of ``queues`` on ``conn`` (an autocommit connection
        outside any transaction, after the caller's commit), in a transaction of its own,
        with the queues of earlier wakes that failed.

        Never raises for the database: the jobs are committed already, and an error here
        must not make the caller enqueue them again. A wake that failed leaves its queues
        for the next one; until then an idle worker finds the jobs at its periodic claim.
        """
        todo = set(queues)
        if self._missed:
            with self._lock:
                todo |= self._missed
                self._missed.clear()
        if not _notify(conn, self.channel, sorted(todo)):
            with self._lock:
                self._missed |= todo


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
