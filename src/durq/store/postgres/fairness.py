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


class FairnessMixin(PostgresBase):
    """The fair pass of the claim."""

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
