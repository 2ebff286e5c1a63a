"""Jobs that depend on jobs, on SQLite: the edges' SQL and the steps the store runs inside
its own write transaction (``BEGIN IMMEDIATE`` serialises every writer, so two parents
finishing at once take turns and the second sees the first).

:func:`add_parents` runs in the enqueue's transaction; :func:`settle` in the transaction
of every transition that can make a job terminal (finish, reap, release, cancel, expire, a
batch's abort), right beside the batch close. docs/features/dependencies.md.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from durq.codecs import Codec, decode_with, encode_with
from durq.errors import ConfigError, ParentNotFound
from durq.model import Inserted, NewJob
from durq.model.batches import TERMINAL, TERMINAL_SQL
from durq.model.dependencies import CANCEL, PARENT_FAILED_KIND
from durq.store.sqlite import batches as sb
from durq.store.sqlite.queries import HISTORY

IDS = "(SELECT value FROM json_each(:ids))"
TERMINAL_STATES = frozenset(TERMINAL)

# Marks the parents (they now have children) and reads their states in one statement.
MARK_PARENTS = f"""
UPDATE jobs SET has_children = 1 WHERE id IN {IDS} RETURNING id, state, task
"""

INSERT_EDGE = """
INSERT OR IGNORE INTO job_deps (child_id, parent_id, on_failure, pass_as, pass_list)
VALUES (?, ?, ?, ?, ?)
"""

SET_WAITING = f"UPDATE jobs SET state = 'waiting' WHERE id IN {IDS} AND state = 'queued'"

# The edges from just-finished parents to children that still wait, with the parents' states.
FRONTIER = f"""
SELECT d.child_id, d.parent_id, d.on_failure, p.state, p.task
FROM job_deps d JOIN jobs c ON c.id = d.child_id JOIN jobs p ON p.id = d.parent_id
WHERE d.parent_id IN {IDS} AND c.state = 'waiting' AND p.state IN {TERMINAL_SQL}
ORDER BY d.child_id, d.parent_id
"""

# What keeps the child from running: an unfinished parent, or a 'cancel' parent that ended
# other than succeeded (one cancelled in this same settle, before the child is looked at).
# Parents mostly finish in id order, so the scan starts at the highest parent id (the
# primary key read backwards): a 10,000-wide fan-in answers at its first row.
BLOCKING_PARENT = f"""
SELECT p.id, p.task, p.state FROM job_deps d JOIN jobs p ON p.id = d.parent_id
WHERE d.child_id = :id
  AND (p.state NOT IN {TERMINAL_SQL} OR (d.on_failure = '{CANCEL}' AND p.state <> 'succeeded'))
ORDER BY d.parent_id DESC LIMIT 1
"""

PROMOTE = f"""
UPDATE jobs SET state = 'queued', run_at = max(run_at, :now)
WHERE id IN {IDS} AND state = 'waiting'
"""

CANCEL_CHILD = f"""
UPDATE jobs
SET state = 'cancelled', finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert({HISTORY}, '$[#]', json(:error))
WHERE id = :id AND state IN ('waiting', 'queued')
"""

PASSED_RESULTS = f"""
SELECT d.child_id, d.pass_as, d.pass_list, p.result
FROM job_deps d JOIN jobs p ON p.id = d.parent_id
WHERE d.child_id IN {IDS} AND d.pass_as IS NOT NULL
ORDER BY d.child_id, d.parent_id
"""

SELECT_PAYLOAD = "SELECT payload FROM jobs WHERE id = :id"

SET_PAYLOAD = "UPDATE jobs SET payload = :payload WHERE id = :id"

# Reads for durq jobs show / tree and ctx.parent_results().
EDGES_OF = f"""
SELECT d.parent_id, d.child_id, d.on_failure, p.state, p.task, c.state, c.task
FROM job_deps d JOIN jobs p ON p.id = d.parent_id JOIN jobs c ON c.id = d.child_id
WHERE d.child_id IN {IDS} OR d.parent_id IN {IDS}
ORDER BY d.child_id, d.parent_id
"""

PARENT_RESULTS = """
SELECT p.id, p.task, p.state, p.result
FROM job_deps d JOIN jobs p ON p.id = d.parent_id
WHERE d.child_id = :id ORDER BY p.id
"""

STUCK_WAITING = f"""
SELECT c.id FROM jobs c WHERE c.state = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs p ON p.id = d.parent_id
                  WHERE d.child_id = c.id AND p.state NOT IN {TERMINAL_SQL})
"""


def reason(parent_id: int, task: str, state: str) -> str:
    """The message of a child cancelled because of its parent."""
    return f"parent job {parent_id} ({task}) ended {state}; not run (on_parent_failure='cancel')"


def add_parents(
    conn: sqlite3.Connection,
    jobs: Sequence[NewJob],
    out: Sequence[Inserted],
    now: float,
    codec: Codec | None = None,
) -> None:
    """Store the edges of the rows just inserted and settle each new child (same transaction):
    it waits if a parent is unfinished, is cancelled if a ``cancel`` parent already failed,
    else stays queued (with the parents' results passed in).

    Raises:
        ParentNotFound: a parent id names no job (the caller's transaction rolls back).
        ConfigError: a parent index does not point to an earlier job of this insert.
    """
    children: list[int] = []
    for pos, (job, ins) in enumerate(zip(jobs, out, strict=True)):
        if not job.parents or not ins.created:
            continue
        ids: list[int] = []
        for parent in job.parents:
            if parent.index is not None:
                if not 0 <= parent.index < pos:
                    raise ConfigError(
                        f"job {pos} of this enqueue names job {parent.index} as its parent: "
                        "a parent must come earlier in the same enqueue"
                    )
                ids.append(out[parent.index].id)
            else:
                assert parent.id is not None
                ids.append(parent.id)
        found = {r[0] for r in conn.execute(MARK_PARENTS, {"ids": json.dumps(ids)}).fetchall()}
        missing = sorted(set(ids) - found)
        if missing:
            raise ParentNotFound(
                f"parent job(s) {missing} do not exist (never enqueued, or pruned); "
                "nothing was enqueued"
            )
        conn.executemany(
            INSERT_EDGE,
            [
                (ins.id, pid, p.on_failure, p.pass_as, 1 if p.pass_list else 0)
                for pid, p in zip(ids, job.parents, strict=True)
            ],
        )
        children.append(ins.id)
    if children:
        _decide(conn, children, now, codec)


def settle(
    conn: sqlite3.Connection, job_ids: Sequence[int], now: float, codec: Codec | None = None
) -> None:
    """After ``job_ids`` became terminal: queue each waiting child whose last parent that
    was, cancel each whose ``cancel`` parent ended other than succeeded, and follow the
    cancellations down the graph. No-op (one indexed read) for jobs without children."""
    frontier = list(job_ids)
    while frontier:
        rows = conn.execute(FRONTIER, {"ids": json.dumps(frontier)}).fetchall()
        if not rows:
            return
        cancelled: list[int] = []
        ready: list[int] = []
        blocker: dict[int, tuple[int, str, str]] = {}
        for child, parent, on_failure, state, task in rows:
            if on_failure == CANCEL and state != "succeeded" and child not in blocker:
                blocker[child] = (parent, task, state)
        for child in dict.fromkeys(r[0] for r in rows):
            if child in blocker:
                _cancel(conn, child, blocker[child], now)
                cancelled.append(child)
            else:
                row = conn.execute(BLOCKING_PARENT, {"id": child}).fetchone()
                if row is None:
                    ready.append(child)
                elif row[2] in TERMINAL_STATES:  # a 'cancel' parent that did not succeed
                    _cancel(conn, child, (row[0], row[1], row[2]), now)
                    cancelled.append(child)
        _promote(conn, ready, now, codec)
        if cancelled:
            sb.close_for_jobs(conn, cancelled, now)
        frontier = cancelled


def _decide(conn: sqlite3.Connection, children: list[int], now: float, codec: Codec | None) -> None:
    """Settle new children against every parent: wait, cancel, or run now."""
    waiting: list[int] = []
    ready: list[int] = []
    cancelled: list[int] = []
    for child in children:
        rows = conn.execute(
            f"SELECT d.parent_id, d.on_failure, p.state, p.task FROM job_deps d "
            f"JOIN jobs p ON p.id = d.parent_id WHERE d.child_id = :id "
            f"AND (p.state NOT IN {TERMINAL_SQL} OR (d.on_failure = '{CANCEL}' "
            f"AND p.state <> 'succeeded')) ORDER BY d.parent_id",
            {"id": child},
        ).fetchall()
        failed = [r for r in rows if r[2] in ("failed", "cancelled", "expired") and r[1] == CANCEL]
        if failed:
            _cancel(conn, child, (failed[0][0], failed[0][3], failed[0][2]), now)
            cancelled.append(child)
        elif rows:
            waiting.append(child)
        else:
            ready.append(child)
    if waiting:
        conn.execute(SET_WAITING, {"ids": json.dumps(waiting)})
    _pass_results(conn, ready, codec)
    if cancelled:
        sb.close_for_jobs(conn, cancelled, now)
        settle(conn, cancelled, now, codec)


def _cancel(conn: sqlite3.Connection, child: int, why: tuple[int, str, str], now: float) -> None:
    error = {
        "attempt": 0, "at": now, "type": "ParentFailed", "message": reason(*why),
        "traceback": "", "kind": PARENT_FAILED_KIND,
    }  # fmt: skip
    conn.execute(CANCEL_CHILD, {"id": child, "now": now, "error": json.dumps(error)})


def _promote(conn: sqlite3.Connection, ready: list[int], now: float, codec: Codec | None) -> None:
    if not ready:
        return
    _pass_results(conn, ready, codec)
    conn.execute(PROMOTE, {"ids": json.dumps(ready), "now": now})


def _pass_results(conn: sqlite3.Connection, ready: list[int], codec: Codec | None) -> None:
    """Write the parents' results into the arguments named by ``pass_as`` (dq.chain and
    dq.group(...).then): the value, or the list of a fan-in's results in parent id order."""
    if not ready:
        return
    rows = conn.execute(PASSED_RESULTS, {"ids": json.dumps(ready)}).fetchall()
    if not rows:
        return
    by_child: dict[int, dict[str, object]] = {}
    for child, name, as_list, result in rows:
        value = None if result is None else json.loads(decode_with(codec, result))
        args = by_child.setdefault(child, {})
        if as_list:
            bucket = args.setdefault(name, [])
            assert isinstance(bucket, list)
            bucket.append(value)
        else:
            args[name] = value
    for child, args in by_child.items():
        (payload,) = conn.execute(SELECT_PAYLOAD, {"id": child}).fetchone()
        body = json.loads(decode_with(codec, payload))
        body.update(args)
        stored = encode_with(codec, json.dumps(body))
        conn.execute(SET_PAYLOAD, {"id": child, "payload": stored})
