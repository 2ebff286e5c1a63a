"""Fair claims on SQLite: round-robin across ``fair_key`` values (docs/features/fairness.md).

Jobs with a fair key are left out of the plain claim; this pass runs first when the queue
has any (one probe of the partial index ``jobs_fair_ready``, so a queue without fair jobs
claims as before). Each round lists the queue's keys by a skip scan of that index, takes
the head job of each (priority, run_at, id), serves the keys whose turn
(``fair_turns.turn``, a counter per queue) is lowest first, and stamps their turn.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from durq.model import Claimed
from durq.store.sqlite.base import SqliteBase

#: The most keys one round looks at.
MAX_KEYS = 1000

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

LAST_TURN = "SELECT coalesce(max(turn), 0) FROM fair_turns WHERE queue = :queue"

STAMP_TURN = """
INSERT INTO fair_turns (queue, fair_key, turn) VALUES (?, ?, ?)
ON CONFLICT (queue, fair_key) DO UPDATE SET turn = excluded.turn
"""


class FairnessMixin(SqliteBase):
    """The fair pass of the claim."""

    def _claim_fair(
        self, conn: sqlite3.Connection, params: dict[str, Any], limit: int, rounds: int = 1
    ) -> list[Claimed]:
        """Claim up to ``limit`` fair-keyed jobs of ``params["queue"]``, round-robin over
        their keys, in at most ``rounds`` rounds of one job per key (inside the caller's
        write transaction)."""
        if limit <= 0 or conn.execute(ANY_FAIR_QUEUED, params).fetchone() is None:
            return []
        claimed: list[Claimed] = []
        tick = int(conn.execute(LAST_TURN, params).fetchone()[0])
        for _ in range(rounds):
            if len(claimed) >= limit:
                break
            heads = [r for r in conn.execute(FAIR_HEADS, {**params, "max_keys": MAX_KEYS}) if r[1]]
            if not heads:
                break
            heads.sort(key=lambda r: (r[2], r[1]))
            chosen = heads[: limit - len(claimed)]
            rows = conn.execute(
                CLAIM_IDS, {**params, "ids": json.dumps([r[1] for r in chosen])}
            ).fetchall()
            if not rows:
                break
            turns = []
            for key, _, _ in chosen:
                tick += 1
                turns.append((params["queue"], key, tick))
            conn.executemany(STAMP_TURN, turns)
            by_id = {r[0]: r for r in rows}
            claimed.extend(
                Claimed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10], float(r[9]))
                for r in (by_id[h[1]] for h in chosen if h[1] in by_id)
            )
        return claimed
