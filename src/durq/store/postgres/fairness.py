"""Fair claims on PostgreSQL: round-robin across ``fair_key`` values; the same rounds as
SQLite's (store/sqlite/fairness.py), in their own transaction, with the heads locked ``FOR
UPDATE SKIP LOCKED`` so that two workers never take one job. The hot claim leaves fair
jobs out and returns a marker row (id -1) when the queue has some ready, as it does for
limited jobs; a queue without fair jobs costs nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.model import Claimed
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render

MAX_KEYS = 1000

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
        with self._tx() as conn:
            while len(claimed) < limit:
                heads = [r for r in conn.execute(render(FAIR_HEADS, schema), params) if r[1]]
                heads.sort(key=lambda r: (r[2], r[1]))
                chosen = heads[: limit - len(claimed)]
                if not chosen:
                    break
                rows = conn.execute(
                    render(CLAIM_IDS, schema), {**params, "ids": [r[1] for r in chosen]}
                ).fetchall()
                if not rows:
                    break  # another worker holds these heads: its commit moves them on
                got = {int(r[0]): r for r in rows}
                order = [int(h[1]) for h in chosen if int(h[1]) in got]
                conn.execute(
                    render(STAMP_TURNS, schema),
                    {**params, "keys": [got[i][11] for i in order]},
                )
                claimed.extend(
                    Claimed(int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]), int(r[6]),
                            int(r[7]), r[10], float(r[9]))
                    for r in (got[i] for i in order)
                )  # fmt: skip
        return claimed
