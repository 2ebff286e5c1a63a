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

from durq.codecs import Codec
from durq.errors import ConfigError, ParentNotFound, PayloadTooLarge
from durq.model import Inserted, NewJob
from durq.model.batches import TERMINAL, TERMINAL_SQL
from durq.model.dependencies import CANCEL, PARENT_FAILED_KIND
from durq.store import passing
from durq.store.sqlite import batches as sb
from durq.store.sqlite.queries import HISTORY

IDS = "(SELECT value FROM json_each(:ids))"


def _terminal(column: str) -> str:
    """``column IN TERMINAL_SQL`` as comparisons: SQLite builds a constant list of more
    than two values into an ephemeral table at each run of the statement (about 15,000
    instructions), comparisons cost nothing of the sort."""
    return "(" + " OR ".join(f"{column} = '{state}'" for state in TERMINAL) + ")"


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

# The waiting children of just-finished parents, one row each (in id order), with what
# decides them, in one statement:
# - the first of those parents (by id) on a 'cancel' edge that ended other than succeeded,
#   with its task and state (SQLite takes the bare columns of a lone min() from its row);
# - else (coalesce stops at its first non-NULL argument) what keeps the child from running,
#   as a JSON [id, task, state]: an unfinished parent, or a 'cancel' parent that ended other
#   than succeeded. Parents mostly finish in id order, so the scan starts at the highest
#   parent id (the primary key read backwards): a 10,000-wide fan-in answers at its first
#   row;
# - else, when the child takes its parents' results (pass_as), 1 + the characters of those
#   results as stored (an integer: the payload they would make can be refused unread,
#   durq.store.passing), NULL when it takes none.
# One statement instead of one for the edges and one per child (and one more for the
# results a chain step never passes): each statement is a round trip of its own.
_FRONTIER = f"""
SELECT d.child_id,
       min(CASE WHEN d.on_failure = '{CANCEL}' AND p.state <> 'succeeded' THEN d.parent_id END),
       p.task, p.state,
       CASE WHEN min(CASE WHEN d.on_failure = '{CANCEL}' AND p.state <> 'succeeded'
                     THEN d.parent_id END) IS NULL THEN coalesce(
           (SELECT json_array(b.id, b.task, b.state)
            FROM job_deps bd JOIN jobs b ON b.id = bd.parent_id
            WHERE bd.child_id = d.child_id
              AND (NOT {_terminal("b.state")}
                   OR (bd.on_failure = '{CANCEL}' AND b.state <> 'succeeded'))
            ORDER BY bd.parent_id DESC LIMIT 1),
           (SELECT 1 + coalesce(sum(length(r.result)), 0)
            FROM job_deps x JOIN jobs r ON r.id = x.parent_id
            WHERE x.child_id = d.child_id AND x.pass_as IS NOT NULL HAVING count(*) > 0)) END
FROM job_deps d JOIN jobs c ON c.id = d.child_id JOIN jobs p ON p.id = d.parent_id
WHERE d.parent_id IN {{ids}} AND c.state = 'waiting' AND {_terminal("p.state")}
GROUP BY d.child_id ORDER BY d.child_id
"""

#: FRONTIER of one parent (a chain step): ``= :id`` reads the index without the ephemeral
#: table SQLite builds for ``IN (SELECT value FROM json_each(...))``.
FRONTIER = _FRONTIER.format(ids=IDS)
FRONTIER_ONE = _FRONTIER.format(ids="(:id)")

PROMOTE = f"""
UPDATE jobs SET state = 'queued', run_at = max(run_at, :now)
WHERE id IN {IDS} AND state = 'waiting'
"""

PROMOTE_ONE = """
UPDATE jobs SET state = 'queued', run_at = max(run_at, :now) WHERE id = :id AND state = 'waiting'
"""

# A child that will not run: cancelled by its parent (type ParentFailed), or failed when
# its payload with the parents' results cannot be stored (type UnstorablePayload).
END_CHILD = f"""
UPDATE jobs
SET state = :state, finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert({HISTORY}, '$[#]', json(:error))
WHERE id = :id AND state IN ('waiting', 'queued')
"""

# The children's payloads (parent NULL: first) and the results passed into them (pass_as),
# in parent id order, in one statement.
PASSED_RESULTS = f"""
SELECT c.id, NULL, NULL, NULL, c.payload FROM jobs c WHERE c.id IN {IDS}
UNION ALL
SELECT d.child_id, d.parent_id, d.pass_as, d.pass_list, p.result
FROM job_deps d JOIN jobs p ON p.id = d.parent_id
WHERE d.child_id IN {IDS} AND d.pass_as IS NOT NULL
ORDER BY 1, 2
"""

SET_PAYLOAD = "UPDATE jobs SET payload = :payload WHERE id = :id"

# A child that takes its parents' results: its new payload and its promotion in one write.
PROMOTE_WITH = """
UPDATE jobs SET payload = :payload, state = 'queued', run_at = max(run_at, :now)
WHERE id = :id AND state = 'waiting'
"""

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
    limit: int | None = None,
) -> None:
    """Store the edges of the rows just inserted and settle each new child (same transaction):
    it waits if a parent is unfinished, is cancelled if a ``cancel`` parent already failed,
    else stays queued (with the parents' results passed in). ``limit``: the app's
    ``payload_limit`` (bytes of JSON), which a payload with its parents' results must keep.

    Raises:
        ParentNotFound: a parent id names no job (the caller's transaction rolls back).
        ConfigError: a parent index does not point to an earlier job of this insert.
        PayloadTooLarge: a new child's parents have all finished and its payload with their
            results would be over ``limit`` (or :data:`durq.store.passing.STORED_CAP`);
            the caller's transaction rolls back: nothing is enqueued.
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
        _decide(conn, children, now, codec, limit)


def settle(
    conn: sqlite3.Connection,
    job_ids: Sequence[int],
    now: float,
    codec: Codec | None = None,
    limit: int | None = None,
) -> None:
    """After ``job_ids`` became terminal: queue each waiting child whose last parent that
    was, cancel each whose ``cancel`` parent ended other than succeeded, fail each whose
    payload with its parents' results would be over ``limit`` (the app's
    ``payload_limit``, bytes of JSON; kind ``unstorable_payload``), and follow these
    endings down the graph. No-op (one indexed read) for jobs without children.

    A chain step is one read (:data:`FRONTIER`) and one write (:data:`PROMOTE`), or
    :data:`PASSED_RESULTS` and one :data:`PROMOTE_WITH` per child when the child takes a
    result. A child decided from a parent cancelled in the same round (both in one
    frontier) is decided again in the next round, whose frontier is the ended jobs."""
    frontier = list(job_ids)
    while frontier:
        if len(frontier) == 1:
            rows = conn.execute(FRONTIER_ONE, {"id": frontier[0]}).fetchall()
        else:
            rows = conn.execute(FRONTIER, {"ids": json.dumps(frontier)}).fetchall()
        if not rows:
            return
        ended: list[int] = []  # cancelled here, or failed (unstorable payload)
        ready: list[int] = []
        takers: list[int] = []  # ready, and takes its parents' results
        for child, failed, task, state, blocked in rows:
            if failed is not None:
                why: tuple[int, str, str] = (failed, task, state)
            elif blocked is None:  # nothing blocks it and it takes no result: it runs
                ready.append(child)
                continue
            elif isinstance(blocked, int):  # it takes results: 1 + their stored size
                problem = passing.too_large_early(child, blocked - 1, codec, limit)
                if problem is None:
                    takers.append(child)
                else:
                    _end(conn, child, "failed", passing.UNSTORABLE, problem, now)
                    ended.append(child)
                continue
            else:
                parent, ptask, pstate = json.loads(blocked)
                if pstate not in TERMINAL_STATES:  # an unfinished parent: it waits
                    continue
                why = (parent, ptask, pstate)  # a 'cancel' parent that did not succeed
            _cancel(conn, child, why, now)
            ended.append(child)
        if takers:
            payloads, refused = _with_results(conn, takers, codec, limit)
            for child, payload in payloads.items():
                conn.execute(PROMOTE_WITH, {"id": child, "payload": payload, "now": now})
            for child, message in refused.items():
                _end(conn, child, "failed", passing.UNSTORABLE, message, now)
                ended.append(child)
            ready.extend(c for c in takers if c not in payloads and c not in refused)
        if len(ready) == 1:
            conn.execute(PROMOTE_ONE, {"id": ready[0], "now": now})
        elif ready:
            conn.execute(PROMOTE, {"ids": json.dumps(ready), "now": now})
        if ended:
            sb.close_for_jobs(conn, ended, now)
        frontier = ended


def _decide(
    conn: sqlite3.Connection,
    children: list[int],
    now: float,
    codec: Codec | None,
    limit: int | None,
) -> None:
    """Settle new children against every parent: wait, cancel, or run now.

    Raises:
        PayloadTooLarge: a child that runs now would not fit its parents' results.
    """
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
    if ready:
        payloads, refused = _with_results(conn, ready, codec, limit)
        if refused:  # refused like any payload over the limit: nothing is written
            why = min(refused.items())[1].removesuffix("; not run")
            raise PayloadTooLarge(f"{why}; nothing was enqueued")
        for child, payload in payloads.items():
            conn.execute(SET_PAYLOAD, {"id": child, "payload": payload})
    if cancelled:
        sb.close_for_jobs(conn, cancelled, now)
        settle(conn, cancelled, now, codec, limit)


def _cancel(conn: sqlite3.Connection, child: int, why: tuple[int, str, str], now: float) -> None:
    _end(conn, child, "cancelled", ("ParentFailed", PARENT_FAILED_KIND), reason(*why), now)


def _end(
    conn: sqlite3.Connection,
    child: int,
    state: str,
    entry: tuple[str, str],
    message: str,
    now: float,
) -> None:
    """End a waiting child without running it: ``state`` with an error entry of
    (type, kind) ``entry``."""
    error = {
        "attempt": 0, "at": now, "type": entry[0], "message": message,
        "traceback": "", "kind": entry[1],
    }  # fmt: skip
    conn.execute(END_CHILD, {"id": child, "now": now, "state": state, "error": json.dumps(error)})


def _with_results(
    conn: sqlite3.Connection, ready: list[int], codec: Codec | None, limit: int | None
) -> tuple[dict[int, str], dict[int, str]]:
    """The new payloads (stored text, by child id) of the children among ``ready`` that
    take results: the parents' results written into the arguments named by ``pass_as``
    (dq.chain and dq.group(...).then): the value, or the list of a fan-in's results in
    parent id order; and, by child id, why each child whose payload would be over
    ``limit`` (or :data:`durq.store.passing.STORED_CAP`) was left out. A child that takes
    none is in neither."""
    rows = conn.execute(PASSED_RESULTS, {"ids": json.dumps(ready)}).fetchall()
    own: dict[int, str] = {}
    passed: dict[int, list[tuple[str, bool, str | None]]] = {}
    for child, parent, name, as_list, value_text in rows:
        if parent is None:  # the child's own row, first
            own[child] = value_text
        else:
            passed.setdefault(child, []).append((name, bool(as_list), value_text))
    payloads: dict[int, str] = {}
    refused: dict[int, str] = {}
    for child, args in passed.items():
        stored, problem = passing.merge(child, own[child], args, codec, limit)
        if stored is None:
            assert problem is not None
            refused[child] = problem
        else:
            payloads[child] = stored
    return payloads, refused
