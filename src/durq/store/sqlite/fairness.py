"""Fair claims on SQLite: round-robin across ``fair_key`` values (docs/features/fairness.md).

Jobs with a fair key are left out of the plain claim; this pass runs first when the queue
has any (one probe of the partial index ``jobs_fair_ready``, so a queue without fair jobs
claims as before). Each round serves the keys whose turn (``fair_turns.turn``, a counter
per queue) is lowest first, one head job (priority, run_at, id) each, and stamps their turn.

Finding those keys: every enqueue of a fair job makes its key's ``fair_turns`` row (turn 0:
a new key goes first), so a round reads the rows in turn order and looks up heads only for
the first few (``TURN_HEADS``: the keys it needs plus ``WINDOW_SLACK``), instead of the
head and the turn of every queued key (``FAIR_HEADS``, a skip scan of that index: 0.5 ms
a claim with 100 keys, which cost the fair drain half its rate). Keys met without a ready
job go to the back of the turns, so the window does not fill with finished tenants. The
full scan still runs when the window comes up short and on every ``FULL_SCAN_EVERY``-th
fair claim of a store, so a key without a row (a job stored before its row existed) is
served all the same.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from durq.failpoints import hit
from durq.model import Claimed
from durq.store.sqlite.base import SqliteBase

#: The most keys one round of the full scan looks at.
MAX_KEYS = 1000
#: Keys the turn-ordered round looks at beyond the ones it needs: each costs a head lookup
#: on the claimer (16 cost 0.6-0.8 µs per job more than 4 in the 100-key drain); keys met
#: without a ready job go to the back, and a short window falls back to the full scan.
WINDOW_SLACK = 4
#: Every this many fair claims of a store, a round takes the full scan.
FULL_SCAN_EVERY = 16

ANY_FAIR_QUEUED = """
SELECT 1 FROM jobs WHERE state = 'queued' AND queue = :queue AND fair_key IS NOT NULL LIMIT 1
"""

FAIR_HEADS = """
WITH RECURSIVE keys(k) AS (
    SELECT (SELECT min(fair_key) FROM jobs
            WHERE state = 'queued' AND queue = :queue AND fair_key IS NOT NULL)
    UNION ALL
    SELECT (SELECT min(fair_key) FROM jobs
            WHERE state = 'queued' AND queue = :queue AND fair_key > keys.k)
    FROM keys WHERE keys.k IS NOT NULL
    LIMIT :max_keys)
SELECT k,
       (SELECT id FROM jobs
        WHERE state = 'queued' AND queue = :queue AND fair_key = keys.k AND run_at <= :now
          AND task IN (SELECT value FROM json_each(:tasks)) AND limit_key IS NULL
        ORDER BY priority, run_at, id LIMIT 1),
       coalesce((SELECT turn FROM fair_turns WHERE queue = :queue AND fair_key = keys.k), 0)
FROM keys WHERE k IS NOT NULL
"""

# The keys with the lowest turns and their head jobs (None: nothing ready for this claim).
TURN_HEADS = """
SELECT t.fair_key,
       (SELECT id FROM jobs
        WHERE state = 'queued' AND queue = :queue AND fair_key = t.fair_key AND run_at <= :now
          AND task IN (SELECT value FROM json_each(:tasks)) AND limit_key IS NULL
        ORDER BY priority, run_at, id LIMIT 1),
       t.turn
FROM (SELECT fair_key, turn FROM fair_turns WHERE queue = :queue
      ORDER BY turn, fair_key LIMIT :window) AS t
"""

CLAIM_IDS = """
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    lease_token = (random() & 9223372036854775807),
    lease_expires_at = :expires,
    worker_id = :worker_id,
    started_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'queued'
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = :queue AND paused = 1)
RETURNING id, queue, task, payload, CAST(attempts AS INTEGER), CAST(max_attempts AS INTEGER),
          lease_token, CAST(shutdown_requeues AS INTEGER), CAST(priority AS INTEGER),
          CAST(run_at AS REAL), batch_id
"""

# One statement for a round's stamps (each statement run lets the GIL go for its step): the
# keys in the order served, numbered on from the queue's last turn, which is read here
# (once: an uncorrelated subquery) rather than in a statement of its own.
STAMP_TURN = """
INSERT INTO fair_turns (queue, fair_key, turn)
SELECT :queue, value,
       (SELECT coalesce(max(turn), 0) FROM fair_turns WHERE queue = :queue) + key + 1
FROM json_each(:keys) WHERE true
ON CONFLICT (queue, fair_key) DO UPDATE SET turn = excluded.turn
"""


# Retention of the turns (docs/features/fairness.md): a key whose every job has ended keeps
# nothing worth a row; a later job of it starts again at turn 0, as a new key does. A row
# is dead when no job of its key is live: queued (and scheduled) ones are probed in
# jobs_fair_ready, the few running, waiting and parked ones read once per statement.
NO_LIVE_JOB = """NOT EXISTS (SELECT 1 FROM jobs AS j
                   WHERE j.state = 'queued' AND j.fair_key IS NOT NULL
                     AND j.queue = t.queue AND j.fair_key = t.fair_key)
       AND (t.queue, t.fair_key) NOT IN (
           SELECT queue, fair_key FROM jobs WHERE state = 'running' AND fair_key IS NOT NULL
           UNION ALL
           SELECT queue, fair_key FROM jobs WHERE state = 'waiting' AND fair_key IS NOT NULL
           UNION ALL
           SELECT queue, fair_key FROM jobs WHERE state = 'parked' AND fair_key IS NOT NULL)"""

# One window of the sweep: up to :limit rows after (:after_queue, :after_key) in key order,
# each with whether it is dead.
TURNS_WINDOW = f"""
SELECT t.queue, t.fair_key, {NO_LIVE_JOB}
FROM fair_turns AS t
WHERE (t.queue, t.fair_key) > (:after_queue, :after_key)
  AND (:queue IS NULL OR t.queue = :queue)
ORDER BY t.queue, t.fair_key LIMIT :limit
"""

DELETE_TURN = "DELETE FROM fair_turns WHERE queue = ? AND fair_key = ?"

# A replayed job's key gets its row again (a retry of a finished job is the one way a key
# comes back to life without an enqueue): turn 0, as at its enqueue.
ADD_TURNS_OF = """
INSERT OR IGNORE INTO fair_turns (queue, fair_key, turn)
SELECT DISTINCT queue, fair_key, 0 FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND fair_key IS NOT NULL
"""


class FairnessMixin(SqliteBase):
    """The fair pass of the claim, and the retention of its turns."""

    _fair_claims = 0  # fair claims this store made (every FULL_SCAN_EVERY-th: the full scan)

    def _any_fair(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        """Whether ``params["queue"]`` has a queued fair-keyed job (one index probe)."""
        return conn.execute(ANY_FAIR_QUEUED, params).fetchone() is not None

    def _claim_fair(
        self,
        conn: sqlite3.Connection,
        params: dict[str, Any],
        limit: int,
        rounds: int = 1,
        probed: bool = False,
    ) -> list[Claimed]:
        """Claim up to ``limit`` fair-keyed jobs of ``params["queue"]``, round-robin over
        their keys, in at most ``rounds`` rounds of one job per key (inside the caller's
        write transaction). ``probed``: the caller found such a job (``queries.CLAIM_PASSES``)
        in this transaction already."""
        if limit <= 0 or not (probed or self._any_fair(conn, params)):
            return []
        claimed: list[Claimed] = []
        self._fair_claims += 1
        full = self._fair_claims % FULL_SCAN_EVERY == 0
        for _ in range(rounds):
            need = limit - len(claimed)
            if need <= 0:
                break
            heads, behind = self._fair_heads(conn, params, need, full)
            full = False
            chosen = heads[:need]
            rows: list[Any] = []
            if chosen:
                rows = conn.execute(
                    CLAIM_IDS, {**params, "ids": json.dumps([r[1] for r in chosen])}
                ).fetchall()
            served = [r[0] for r in chosen] + behind if rows else behind
            if served:
                conn.execute(STAMP_TURN, {"queue": params["queue"], "keys": json.dumps(served)})
            if not rows:
                break
            by_id = {r[0]: r for r in rows}
            claimed.extend(
                Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10], float(r[9]))
                for r in (by_id[h[1]] for h in chosen if h[1] in by_id)
            )
        return claimed

    @staticmethod
    def _fair_heads(
        conn: sqlite3.Connection, params: dict[str, Any], need: int, full: bool
    ) -> tuple[list[Any], list[str]]:
        """The (key, head id, turn) rows to serve, lowest turn first, and the keys met
        without a ready job (to go to the back of the turns)."""
        behind: list[str] = []
        if not full:
            window = need + WINDOW_SLACK
            rows = conn.execute(TURN_HEADS, {**params, "window": window}).fetchall()
            heads = [r for r in rows if r[1] is not None]
            behind = [r[0] for r in rows if r[1] is None]
            if len(heads) >= need or len(rows) < window:  # enough, or every key seen
                return heads, behind
        heads = [r for r in conn.execute(FAIR_HEADS, {**params, "max_keys": MAX_KEYS}) if r[1]]
        heads.sort(key=lambda r: (r[2], r[1]))
        return heads, behind

    def prune_fair_turns(
        self, queue: str | None, after: tuple[str, str] | None, limit: int
    ) -> tuple[int, tuple[str, str] | None]:
        """Look at up to ``limit`` turn rows after ``after`` and delete those whose key has
        no live job, in one write transaction (an enqueue of the key takes the same write
        lock, so it commits wholly before or after: before, its job keeps the row; after,
        its ``INSERT OR IGNORE`` makes the row again)."""
        conn = self._conn()
        first, second = after if after is not None else ("", "")
        params = {"queue": queue, "after_queue": first, "after_key": second, "limit": limit}
        with self._write():
            rows = conn.execute(TURNS_WINDOW, params).fetchall()
            hit("prune_turns_read")
            dead = [(r[0], r[1]) for r in rows if r[2]]
            if dead:
                hit("prune_turns_locked")
                conn.executemany(DELETE_TURN, dead)
        last = (rows[-1][0], rows[-1][1]) if len(rows) == limit else None
        return len(dead), last
