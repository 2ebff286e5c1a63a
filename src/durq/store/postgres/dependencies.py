"""Jobs that depend on jobs, on PostgreSQL: the edges' SQL and the steps run inside the
caller's transaction (docs/features/dependencies.md).

Two rules make a finish and a new child, or two parents finishing at once, unable to miss
each other under READ COMMITTED:

- an enqueue naming a parent sets ``has_children`` on it with an ``UPDATE`` (row locks in id
  order) that returns its state: it waits for a finish in flight and then sees its result,
  and a finish that comes later waits for the enqueue and then sees the edge;
- :meth:`Dependencies.settle` locks the waiting children (``FOR UPDATE``, id order) before
  it reads their other parents in a later statement, so of two parents finishing together
  the second to lock the child sees the first one's commit.

The worker's hot finish statement leaves jobs with ``has_children`` alone; the store
finishes them in a transaction that also settles their children.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from durq.codecs import Codec, nul_problem
from durq.errors import ConfigError, ParentNotFound, PayloadError, PayloadTooLarge
from durq.model import Edge, Inserted, NewJob, ParentResult
from durq.model.batches import TERMINAL, TERMINAL_SQL
from durq.model.dependencies import CANCEL, PARENT_FAILED_KIND
from durq.store import passing
from durq.store.passing import UNSTORABLE
from durq.store.postgres.batches import Batches
from durq.store.postgres.connection import render

MARK_PARENTS = """
UPDATE {s}.jobs AS j SET has_children = true
FROM (SELECT id FROM {s}.jobs WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE) AS l
WHERE j.id = l.id
RETURNING j.id
"""

INSERT_EDGES = """
INSERT INTO {s}.job_deps (child_id, parent_id, on_failure, pass_as, pass_list)
SELECT * FROM unnest(%(children)s::bigint[], %(parents)s::bigint[], %(modes)s::text[],
                     %(names)s::text[], %(lists)s::boolean[])
ON CONFLICT DO NOTHING
"""

# A new child against every parent: the rows that keep it waiting or cancel it.
NEW_CHILD_PARENTS = (
    """
SELECT d.child_id, d.parent_id, d.on_failure, p.state, p.task
FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id
WHERE d.child_id = ANY(%(ids)s::bigint[])
  AND (p.state NOT IN """
    + TERMINAL_SQL
    + " OR (d.on_failure = 'cancel' AND p.state <> 'succeeded'))\nORDER BY d.child_id, d.parent_id"
)

SET_WAITING = """
UPDATE {s}.jobs SET state = 'waiting' WHERE id = ANY(%(ids)s::bigint[]) AND state = 'queued'
"""

# The edges from just-finished parents to children that still wait, with the parents'
# states; the children are locked (FOR UPDATE OF c, in child id order: the lock sits above
# the sort), and a child that another transaction changed meanwhile is read again once
# its lock is ours (READ COMMITTED), and left out when it no longer waits. One statement
# for the read and the lock that were two; the children's other parents are read in a
# later statement (BLOCKING_PARENT), whose snapshot sees the commits the lock waited for.
FRONTIER = (
    """
SELECT d.child_id, d.parent_id, d.on_failure, p.state, p.task
FROM {s}.job_deps d JOIN {s}.jobs c ON c.id = d.child_id JOIN {s}.jobs p ON p.id = d.parent_id
WHERE d.parent_id = ANY(%(ids)s::bigint[]) AND c.state = 'waiting' AND p.state IN """
    + TERMINAL_SQL
    + "\nORDER BY d.child_id, d.parent_id FOR UPDATE OF c"
)

# What keeps the child from running: an unfinished parent, or a 'cancel' parent that ended
# other than succeeded (one cancelled in this same settle). Parents mostly finish in id
# order: the scan starts at the highest parent id. Else, when the child takes its parents'
# results (pass_as; the outer LIMIT stops the Append at the first row, so that probe runs
# only for a child nothing blocks), a row of NULLs and the results' stored size in bytes
# (octet_length reads a TOASTed value's header, not the value: a payload they would make
# too large is refused unread, durq.store.passing); no row when it takes none.
BLOCKING_PARENT = (
    """
(SELECT p.id, p.task, p.state, NULL::bigint FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id
 WHERE d.child_id = %(id)s
   AND (p.state NOT IN """
    + TERMINAL_SQL
    + """ OR (d.on_failure = 'cancel' AND p.state <> 'succeeded'))
 ORDER BY d.parent_id DESC LIMIT 1)
UNION ALL
(SELECT NULL::bigint, NULL::text, NULL::text, coalesce(sum(octet_length(r.result)), 0)
 FROM {s}.job_deps x JOIN {s}.jobs r ON r.id = x.parent_id
 WHERE x.child_id = %(id)s AND x.pass_as IS NOT NULL HAVING count(*) > 0)
LIMIT 1"""
)

PROMOTE = """
WITH up AS (
    UPDATE {s}.jobs SET state = 'queued', run_at = greatest(run_at, {s}.epoch(%(at)s))
    WHERE id = ANY(%(ids)s::bigint[]) AND state = 'waiting'
    RETURNING queue)
SELECT pg_notify(%(channel)s, q) FROM (SELECT DISTINCT queue AS q FROM up) AS u
"""

# The same without the NOTIFY, for a settle whose caller claims in its transaction next
# (a worker's finish): it wakes the workers once its claim is done, for what is left
# (NOTIFY_QUEUED), rather than itself for a claim round that finds its children taken.
PROMOTE_QUIET = """
UPDATE {s}.jobs SET state = 'queued', run_at = greatest(run_at, {s}.epoch(%(at)s))
WHERE id = ANY(%(ids)s::bigint[]) AND state = 'waiting'
"""

NOTIFY_QUEUED = """
SELECT pg_notify(%(channel)s, q)
FROM (SELECT DISTINCT queue AS q FROM {s}.jobs
      WHERE id = ANY(%(ids)s::bigint[]) AND state = 'queued') AS u
"""

# A child that will not run: cancelled by its parent (type ParentFailed), or failed when
# its payload with the parents' results cannot be stored (type UnstorablePayload).
END_CHILD = """
UPDATE {s}.jobs
SET state = %(state)s::text, finished_at = {s}.epoch(%(at)s), lease_token = NULL,
    lease_expires_at = NULL, errors = {s}.append_error(errors, json_build_object(
        'attempt', 0, 'at', {s}.epoch(%(at)s), 'type', %(type)s::text,
        'message', %(message)s::text, 'traceback', '', 'kind', %(kind)s::text)::text)
WHERE id = %(id)s AND state IN ('waiting', 'queued')
"""

# The children's payloads (parent NULL: first) and the results passed into them (pass_as),
# in parent id order, in one statement.
PASSED_RESULTS = """
SELECT c.id, NULL::bigint, NULL::text, NULL::boolean, c.payload
FROM {s}.jobs c WHERE c.id = ANY(%(ids)s::bigint[])
UNION ALL
SELECT d.child_id, d.parent_id, d.pass_as, d.pass_list, p.result
FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id
WHERE d.child_id = ANY(%(ids)s::bigint[]) AND d.pass_as IS NOT NULL
ORDER BY 1, 2 NULLS FIRST
"""

SET_PAYLOAD = "UPDATE {s}.jobs SET payload = %(payload)s WHERE id = %(id)s"

EDGES_OF = """
SELECT d.parent_id, d.child_id, d.on_failure, p.state, p.task, c.state, c.task
FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id JOIN {s}.jobs c ON c.id = d.child_id
WHERE d.child_id = ANY(%(ids)s::bigint[]) OR d.parent_id = ANY(%(ids)s::bigint[])
ORDER BY d.child_id, d.parent_id
"""

PARENT_RESULTS = """
SELECT p.id, p.task, p.state, p.result
FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id
WHERE d.child_id = %(id)s ORDER BY p.id
"""

STUCK_WAITING = (
    """
SELECT c.id FROM {s}.jobs c WHERE c.state = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM {s}.job_deps d JOIN {s}.jobs p ON p.id = d.parent_id
                  WHERE d.child_id = c.id AND p.state NOT IN """
    + TERMINAL_SQL
    + ")"
)


#: The type of the error entry of a child cancelled by its parent (UNSTORABLE, of one
#: failed because its payload with the parents' results could not be stored, is in
#: durq.store.passing).
PARENT_FAILED = "ParentFailed"


def reason(parent_id: int, task: str, state: str) -> str:
    """The message of a child cancelled because of its parent."""
    return f"parent job {parent_id} ({task}) ended {state}; not run (on_parent_failure='cancel')"


class Dependencies:
    """The dependency steps for one schema, on the caller's connection and transaction;
    ``at`` is the store's injected clock (None: the database's)."""

    def __init__(
        self,
        schema: str,
        channel: str,
        batches: Batches,
        settings: Callable[[], tuple[Codec | None, int | None]] = lambda: (None, None),
    ) -> None:
        self.sql = {
            name: render(value, schema)
            for name, value in globals().items()
            if name.isupper() and isinstance(value, str) and "{s}" in value
        }
        self.channel = channel
        self.batches = batches
        # the store's codec and payload_limit, read when results pass down a chain
        self.settings = settings

    def add_parents(
        self,
        conn: psycopg.Connection[Any],
        jobs: Sequence[NewJob],
        out: Sequence[Inserted],
        at: float | None,
    ) -> None:
        """Store the edges of the rows just inserted and settle each new child.

        Raises:
            ParentNotFound: a parent id names no job (the transaction must roll back).
            ConfigError: a parent index does not point to an earlier job of this insert.
        """
        children: list[int] = []
        edges: list[tuple[int, int, str, str | None, bool]] = []
        for pos, (job, ins) in enumerate(zip(jobs, out, strict=True)):
            if not job.parents or not ins.created:
                continue
            for parent in job.parents:
                if parent.index is not None:
                    if not 0 <= parent.index < pos:
                        raise ConfigError(
                            f"job {pos} of this enqueue names job {parent.index} as its "
                            "parent: a parent must come earlier in the same enqueue"
                        )
                    pid = out[parent.index].id
                else:
                    assert parent.id is not None
                    pid = parent.id
                edges.append((ins.id, pid, parent.on_failure, parent.pass_as, parent.pass_list))
            children.append(ins.id)
        if not children:
            return
        wanted = sorted({e[1] for e in edges})
        rows = conn.execute(self.sql["MARK_PARENTS"], {"ids": wanted}).fetchall()
        missing = sorted(set(wanted) - {int(r[0]) for r in rows})
        if missing:
            raise ParentNotFound(
                f"parent job(s) {missing} do not exist (never enqueued, or pruned); "
                "nothing was enqueued"
            )
        conn.execute(
            self.sql["INSERT_EDGES"],
            {
                "children": [e[0] for e in edges],
                "parents": [e[1] for e in edges],
                "modes": [e[2] for e in edges],
                "names": [e[3] for e in edges],
                "lists": [e[4] for e in edges],
            },
        )
        blocking = conn.execute(self.sql["NEW_CHILD_PARENTS"], {"ids": children}).fetchall()
        cancelled: list[int] = []
        waiting: set[int] = set()
        for child, parent, on_failure, state, task in blocking:
            if child in cancelled:
                continue
            if on_failure == CANCEL and state in ("failed", "cancelled", "expired"):
                self._cancel(conn, child, (parent, task, state), at)
                cancelled.append(child)
                waiting.discard(child)
            else:
                waiting.add(child)
        waiting -= set(cancelled)
        if waiting:
            conn.execute(self.sql["SET_WAITING"], {"ids": sorted(waiting)})
        blocked = waiting | set(cancelled)
        unstorable = self._pass_results(conn, [c for c in children if c not in blocked])
        if unstorable:  # refused like any payload that cannot be stored: nothing written
            _, message, too_large = unstorable[0]
            error = PayloadTooLarge if too_large else PayloadError
            raise error(f"{message.removesuffix('; not run')}; nothing was enqueued")
        if cancelled:
            self.batches.close_for_jobs(conn, cancelled, at)
            self.settle(conn, cancelled, at)

    def settle(
        self,
        conn: psycopg.Connection[Any],
        job_ids: Sequence[int],
        at: float | None,
        quiet: bool = False,
    ) -> list[int]:
        """After ``job_ids`` became terminal (in this transaction): queue each waiting child
        whose last unfinished parent that was, cancel each whose ``cancel`` parent ended
        other than succeeded, fail each whose payload with its parents' results would hold
        a NUL character, and follow these endings down. Returns the ids of the children it
        queued. ``quiet``: no NOTIFY for them; the caller sends :meth:`notify_queued` once
        it has claimed what it will (in this transaction)."""
        frontier = [int(i) for i in job_ids]
        promoted: list[int] = []
        while frontier:
            rows = conn.execute(self.sql["FRONTIER"], {"ids": frontier}).fetchall()
            if not rows:
                return promoted
            blocker: dict[int, tuple[int, str, str]] = {}
            for child, parent, on_failure, state, task in rows:
                if on_failure == CANCEL and state != "succeeded" and child not in blocker:
                    blocker[child] = (int(parent), task, state)
            ended: list[int] = []  # cancelled here, or failed (unstorable payload)
            ready: list[int] = []
            takers: list[int] = []  # ready, and takes its parents' results
            for child in sorted({int(r[0]) for r in rows}):  # locked by FRONTIER
                if child in blocker:
                    self._cancel(conn, child, blocker[child], at)
                    ended.append(child)
                else:
                    row = conn.execute(self.sql["BLOCKING_PARENT"], {"id": child}).fetchone()
                    if row is None:
                        ready.append(child)
                    elif row[0] is None:  # it takes results: row[3] is their stored size
                        problem = passing.too_large_early(child, int(row[3]), *self.settings())
                        if problem is None:
                            takers.append(child)
                        else:
                            self._end(conn, child, "failed", UNSTORABLE, problem, at)
                            ended.append(child)
                    elif row[2] in TERMINAL:  # a 'cancel' parent that did not succeed
                        self._cancel(conn, child, (int(row[0]), row[1], row[2]), at)
                        ended.append(child)
            if takers:
                # a payload that cannot be stored (over payload_limit, or a NUL character)
                # fails its child here, so the parent's finish (and the other outcomes of
                # its transaction) still commit
                failed = {c: m for c, m, _ in self._pass_results(conn, takers)}
                for child, message in failed.items():
                    self._end(conn, child, "failed", UNSTORABLE, message, at)
                    ended.append(child)
                ready = sorted(ready + [c for c in takers if c not in failed])
            if ready:
                if quiet:
                    conn.execute(self.sql["PROMOTE_QUIET"], {"ids": ready, "at": at})
                else:
                    conn.execute(
                        self.sql["PROMOTE"], {"ids": ready, "at": at, "channel": self.channel}
                    ).fetchall()
                promoted.extend(ready)
            if ended:
                self.batches.close_for_jobs(conn, ended, at)
            frontier = ended
        return promoted

    def notify_queued(self, conn: psycopg.Connection[Any], job_ids: Sequence[int]) -> None:
        """The NOTIFY of a quiet settle (at commit): for the queues of those of ``job_ids``
        still queued (not claimed meanwhile in this transaction)."""
        conn.execute(
            self.sql["NOTIFY_QUEUED"], {"ids": list(job_ids), "channel": self.channel}
        ).fetchall()

    def _cancel(
        self, conn: psycopg.Connection[Any], child: int, why: tuple[int, str, str], at: float | None
    ) -> None:
        self._end(conn, child, "cancelled", (PARENT_FAILED, PARENT_FAILED_KIND), reason(*why), at)

    def _end(
        self,
        conn: psycopg.Connection[Any],
        child: int,
        state: str,
        entry: tuple[str, str],
        message: str,
        at: float | None,
    ) -> None:
        """End a waiting child without running it: ``state`` with an error entry of
        (type, kind) ``entry``."""
        params = {"id": child, "at": at, "state": state, "type": entry[0], "kind": entry[1]}
        conn.execute(self.sql["END_CHILD"], {**params, "message": message})

    def _pass_results(
        self, conn: psycopg.Connection[Any], ready: list[int]
    ) -> list[tuple[int, str, bool]]:
        """Write the parents' results into the payloads of ``ready`` children (their
        ``pass_as`` arguments). Returns (child, why, over a size limit) of those left
        unwritten: over the app's ``payload_limit`` or :data:`durq.store.passing.STORED_CAP`,
        or the codec's text holds a NUL character (PostgreSQL's text holds none)."""
        unstorable: list[tuple[int, str, bool]] = []
        if not ready:
            return unstorable
        codec, limit = self.settings()
        rows = conn.execute(self.sql["PASSED_RESULTS"], {"ids": ready}).fetchall()
        own: dict[int, str] = {}
        passed: dict[int, list[tuple[str, bool, str | None]]] = {}
        for child, parent, name, as_list, text in rows:
            if parent is None:  # the child's own row, first
                own[int(child)] = text
            else:
                passed.setdefault(int(child), []).append((name, bool(as_list), text))
        for child, args in passed.items():
            stored, why = passing.merge(child, own[child], args, codec, limit)
            if stored is None:
                assert why is not None
                unstorable.append((child, why, True))
                continue
            problem = nul_problem("its payload with its parents' results", stored, False)
            if problem is not None:
                unstorable.append((child, f"job {child}: {problem}; not run", False))
                continue
            conn.execute(self.sql["SET_PAYLOAD"], {"id": child, "payload": stored})
        return unstorable

    def edges(self, conn: psycopg.Connection[Any], job_ids: Sequence[int]) -> list[Edge]:
        rows = conn.execute(self.sql["EDGES_OF"], {"ids": list(job_ids)}).fetchall()
        return [Edge(int(r[0]), int(r[1]), r[2], r[3], r[4], r[5], r[6]) for r in rows]

    def parent_results(self, conn: psycopg.Connection[Any], job_id: int) -> list[ParentResult]:
        rows = conn.execute(self.sql["PARENT_RESULTS"], {"id": job_id}).fetchall()
        return [ParentResult(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def stuck_waiting(self, conn: psycopg.Connection[Any]) -> list[int]:
        return [int(r[0]) for r in conn.execute(self.sql["STUCK_WAITING"]).fetchall()]
