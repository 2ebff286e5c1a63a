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
from collections.abc import Iterable
from typing import Any

import psycopg

#: The wake-up of ``%(queues)s`` on ``%(channel)s``: one notification a queue, in a
#: transaction that needs no durability (a notification is not kept over a crash anyway).
WAKE = """
SELECT set_config('synchronous_commit', 'off', true), pg_notify(%(channel)s, q)
FROM unnest(%(queues)s::text[]) AS q
"""

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
            conn.execute(WAKE, {"channel": self.channel, "queues": todo})
            ok = True
        except psycopg.Error:
            pass  # the jobs are committed; the queues stay pending (below)
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
