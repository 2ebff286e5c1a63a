"""Fair claims on PostgreSQL: round-robin across ``fair_key`` values; the same rounds as
SQLite's (store/sqlite/fairness.py), in their own transaction, with the heads locked ``FOR
UPDATE SKIP LOCKED`` so that two workers never take one job. The hot claim leaves fair
jobs out and returns a marker row (id -1) when the queue has some ready, as it does for
limited jobs; a queue without fair jobs costs nothing more.

As on SQLite, a round reads ``fair_turns`` in turn order (the enqueue makes each new key's
row) and looks up heads only for the keys it needs plus ``WINDOW_SLACK`` (``TURN_HEADS``);
keys met without a ready job go to the back; the full scan of every queued key
(``FAIR_HEADS``) runs when that window comes up short and every ``FULL_SCAN_EVERY``-th
fair claim of a store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.failpoints import hit
from durq.model import Claimed
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render

MAX_KEYS = 1000
WINDOW_SLACK = 16
FULL_SCAN_EVERY = 16

# The keys with the lowest turns and their head jobs (None: nothing ready for this claim).
TURN_HEADS = """
SELECT t.fair_key,
       (SELECT id FROM {s}.jobs
        WHERE state = 'queued' AND queue = %(queue)s AND fair_key = t.fair_key
          AND run_at <= {s}.epoch(%(at)s) AND task = ANY(%(tasks)s::text[])
          AND limit_key IS NULL
        ORDER BY priority, run_at, id LIMIT 1),
       t.turn
FROM (SELECT fair_key, turn FROM {s}.fair_turns WHERE queue = %(queue)s
      ORDER BY turn, fair_key LIMIT %(window)s) AS t
"""

FAIR_HEADS = """
WITH RECURSIVE keys(k) AS (
    SELECT (SELECT min(fair_key) FROM {s}.jobs
            WHERE state = 'queued' AND queue = %(queue)s AND fair_key IS NOT NULL)
    UNION ALL
    SELECT (SELECT min(fair_key) FROM {s}.jobs
            WHERE state = 'queued' AND queue = %(queue)s AND fair_key > keys.k)
    FROM keys WHERE keys.k IS NOT NULL)
SELECT k,
       (SELECT id FROM {s}.jobs
        WHERE state = 'queued' AND queue = %(queue)s AND fair_key = keys.k
          AND run_at <= {s}.epoch(%(at)s) AND task = ANY(%(tasks)s::text[])
          AND limit_key IS NULL
        ORDER BY priority, run_at, id LIMIT 1),
       coalesce((SELECT turn FROM {s}.fair_turns
                 WHERE queue = %(queue)s AND fair_key = keys.k), 0)
FROM (SELECT k FROM keys WHERE k IS NOT NULL LIMIT %(max_keys)s) AS keys
"""

CLAIM_IDS = """
WITH picked AS (
    SELECT id FROM {s}.jobs
    WHERE id = ANY(%(ids)s::bigint[]) AND state = 'queued'
      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(queue)s AND paused)
    FOR UPDATE SKIP LOCKED)
UPDATE {s}.jobs AS j
SET state = 'running', attempts = j.attempts + 1, lease_token = nextval('{s}.lease_tokens'),
    lease_expires_at = {s}.epoch(%(at)s) + %(lease)s, worker_id = %(worker_id)s,
    started_at = {s}.epoch(%(at)s)
FROM picked WHERE j.id = picked.id
RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.lease_token,
          j.shutdown_requeues, j.priority, j.run_at, j.batch_id, j.fair_key
"""

STAMP_TURNS = """
INSERT INTO {s}.fair_turns (queue, fair_key, turn)
SELECT %(queue)s, k,
       (SELECT coalesce(max(turn), 0) FROM {s}.fair_turns WHERE queue = %(queue)s) + n
FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS x(k, n)
ON CONFLICT (queue, fair_key) DO UPDATE SET turn = excluded.turn
"""


# Retention of the turns (docs/features/fairness.md): a key whose every job has ended keeps
# nothing worth a row; a later job of it starts again at turn 0, as a new key does. A row
# is dead when no job of its key is live: queued (and scheduled) ones are probed in
# jobs_fair_ready, the few running, waiting and parked ones read once per statement (a
# hashed subplan).
_BUSY_KEYS = """(
           SELECT queue, fair_key FROM {s}.jobs WHERE state = 'running' AND fair_key IS NOT NULL
           UNION ALL
           SELECT queue, fair_key FROM {s}.jobs WHERE state = 'waiting' AND fair_key IS NOT NULL
           UNION ALL
           SELECT queue, fair_key FROM {s}.jobs WHERE state = 'parked' AND fair_key IS NOT NULL)"""
_QUEUED_JOB = """SELECT 1 FROM {s}.jobs AS j
                   WHERE j.state = 'queued' AND j.fair_key IS NOT NULL
                     AND j.queue = t.queue AND j.fair_key = t.fair_key"""

# One window of the sweep: up to limit rows after (after_queue, after_key) in key order,
# each with whether it looks dead (a read: the delete decides again). The queued probe is
# a LATERAL ... LIMIT 1, so it stays one index probe per row (as a scalar NOT EXISTS the
# planner may hash every queued fair job of the table instead).
TURNS_WINDOW = f"""
SELECT t.queue, t.fair_key, q.one IS NULL AND (t.queue, t.fair_key) NOT IN {_BUSY_KEYS}
FROM (SELECT queue, fair_key FROM {{s}}.fair_turns
      WHERE (queue, fair_key) > (%(after_queue)s::text, %(after_key)s::text)
        AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      ORDER BY queue, fair_key LIMIT %(limit)s) AS t
LEFT JOIN LATERAL ({_QUEUED_JOB} LIMIT 1) AS q(one) ON true
ORDER BY t.queue, t.fair_key
"""

# The rows that look dead, locked; a row an enqueue holds (HOLD_TURNS) is skipped.
LOCK_TURNS = """
SELECT queue, fair_key FROM {s}.fair_turns
WHERE (queue, fair_key) IN (SELECT * FROM unnest(%(queues)s::text[], %(keys)s::text[]))
FOR UPDATE SKIP LOCKED
"""

# In a later statement than the lock, so its snapshot sees every enqueue that committed
# before the lock was taken: a row whose key got a live job meanwhile stays. The keys are
# judged first (MATERIALIZED: otherwise the planner may scan every turn row against the
# hashed busy keys, 0.2 s with 200,000 rows), then their rows deleted by primary key.
DELETE_TURNS = f"""
WITH doomed AS MATERIALIZED (
    SELECT t.queue, t.fair_key FROM unnest(%(queues)s::text[], %(keys)s::text[]) AS t(queue, fair_key)
    WHERE NOT EXISTS ({_QUEUED_JOB}) AND (t.queue, t.fair_key) NOT IN {_BUSY_KEYS})
DELETE FROM {{s}}.fair_turns AS f USING doomed
WHERE f.queue = doomed.queue AND f.fair_key = doomed.fair_key
"""

# The enqueue's (and a replay's) turn rows: made when missing (turn 0: a new key is served
# first), else held FOR KEY SHARE until its commit, so a sweep skips them (its FOR UPDATE
# conflicts with KEY SHARE; a claim's stamp, a non-key update, does not, nor do other
# enqueues). Returns the rows made or held; one the sweep deleted while this waited for its
# lock is missing, and made again by the next round (:meth:`FairnessMixin._hold_turns`).
HOLD_TURNS = """
WITH want AS (SELECT * FROM unnest(%(queues)s::text[], %(keys)s::text[]) AS w(queue, fair_key)),
made AS (
    INSERT INTO {s}.fair_turns (queue, fair_key, turn)
    SELECT queue, fair_key, 0 FROM want
    ON CONFLICT DO NOTHING
    RETURNING queue, fair_key),
held AS (
    SELECT t.queue, t.fair_key FROM {s}.fair_turns AS t
    WHERE (t.queue, t.fair_key) IN (SELECT queue, fair_key FROM want)
    FOR KEY SHARE)
SELECT queue, fair_key FROM made UNION ALL SELECT queue, fair_key FROM held
"""


class FairnessMixin(PostgresBase):
    """The fair pass of the claim, and the retention of its turns."""

    _fair_claims = 0  # fair claims this store made (every FULL_SCAN_EVERY-th: the full scan)

    def _claim_fair(
        self, queue: str, tasks: Sequence[str], limit: int, lease: float, worker_id: str
    ) -> list[Claimed]:
        """Claim up to ``limit`` fair-keyed jobs of ``queue``, round-robin over their keys."""
        schema = self.options.schema
        params: dict[str, Any] = {
            "queue": queue, "tasks": list(tasks), "at": self._at(), "lease": lease,
            "worker_id": worker_id, "max_keys": MAX_KEYS,
        }  # fmt: skip
        claimed: list[Claimed] = []
        self._fair_claims += 1
        full = self._fair_claims % FULL_SCAN_EVERY == 0
        with self._tx() as conn:
            while len(claimed) < limit:
                heads, behind = self._fair_heads(conn, params, limit - len(claimed), full)
                full = False
                chosen = heads[: limit - len(claimed)]
                rows: list[Any] = []
                if chosen:
                    rows = conn.execute(
                        render(CLAIM_IDS, schema), {**params, "ids": [r[1] for r in chosen]}
                    ).fetchall()
                got = {int(r[0]): r for r in rows}
                order = [int(h[1]) for h in chosen if int(h[1]) in got]
                keys = list(dict.fromkeys([got[i][11] for i in order] + behind))  # once each
                if keys:
                    conn.execute(render(STAMP_TURNS, schema), {**params, "keys": keys})
                if not rows:
                    break  # nothing ready, or another worker holds these heads
                claimed.extend(
                    Claimed(int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]), int(r[6]),
                            int(r[7]), r[10], float(r[9]))
                    for r in (got[i] for i in order)
                )  # fmt: skip
        return claimed

    def _fair_heads(
        self, conn: psycopg.Connection[Any], params: dict[str, Any], need: int, full: bool
    ) -> tuple[list[Any], list[str]]:
        """The (key, head id, turn) rows to serve, lowest turn first, and the keys met
        without a ready job (to go to the back of the turns)."""
        schema = self.options.schema
        behind: list[str] = []
        if not full:
            window = need + WINDOW_SLACK
            rows = conn.execute(render(TURN_HEADS, schema), {**params, "window": window}).fetchall()
            heads = [r for r in rows if r[1] is not None]
            behind = [r[0] for r in rows if r[1] is None]
            if len(heads) >= need or len(rows) < window:  # enough, or every key seen
                return heads, behind
        heads = [r for r in conn.execute(render(FAIR_HEADS, schema), params) if r[1]]
        heads.sort(key=lambda r: (r[2], r[1]))
        return heads, behind

    def _hold_turns(self, conn: psycopg.Connection[Any], turns: Sequence[tuple[str, str]]) -> None:
        """Make or hold the (queue, fair key) turn rows of jobs this transaction makes live
        (see ``HOLD_TURNS``), in sorted order (two enqueues making the same new keys wait
        for each other in one order, never in a cycle)."""
        want = sorted(set(turns))
        while want:
            params = {"queues": [q for q, _ in want], "keys": [k for _, k in want]}
            got = {(r[0], r[1]) for r in conn.execute(self._fsql("HOLD_TURNS"), params)}
            want = [t for t in want if t not in got]  # deleted by a sweep meanwhile: again

    def prune_fair_turns(
        self, queue: str | None, after: tuple[str, str] | None, limit: int
    ) -> tuple[int, tuple[str, str] | None]:
        """Look at up to ``limit`` turn rows after ``after`` and delete those whose key has
        no live job, in one transaction: a read of the window, a lock of the rows that look
        dead (``SKIP LOCKED``: rows an enqueue in flight holds are left), then the delete,
        which decides again on a later snapshot than the lock."""
        first, second = after if after is not None else ("", "")
        params: dict[str, Any] = {
            "queue": queue, "after_queue": first, "after_key": second, "limit": limit,
        }  # fmt: skip
        deleted = 0
        with self._tx() as conn:
            rows = conn.execute(self._fsql("TURNS_WINDOW"), params).fetchall()
            hit("prune_turns_read")
            dead = [(r[0], r[1]) for r in rows if r[2]]
            if dead:
                keys = {"queues": [q for q, _ in dead], "keys": [k for _, k in dead]}
                locked = conn.execute(self._fsql("LOCK_TURNS"), keys).fetchall()
                hit("prune_turns_locked")
                if locked:
                    keys = {"queues": [r[0] for r in locked], "keys": [r[1] for r in locked]}
                    deleted = conn.execute(self._fsql("DELETE_TURNS"), keys).rowcount
        last = (rows[-1][0], rows[-1][1]) if len(rows) == limit else None
        return deleted, last

    def _fsql(self, name: str) -> Any:
        key = f"fairness.{name}"  # rendered once, like queries.py's statements
        if key not in self._sql:
            self._sql[key] = render(globals()[name], self.options.schema)
        return self._sql[key]
