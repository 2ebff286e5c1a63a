"""The job life cycle on PostgreSQL: enqueue, finish-and-claim, leases, release, the reaper."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import psycopg

from durq.failpoints import hit
from durq.model import Claimed, Inserted, InsertedRows, NewJob, Outcome, ReapSummary
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import translate

T = TypeVar("T")

#: From how many plain jobs on ``enqueue_many`` uses ``COPY`` rather than one
#: ``INSERT … SELECT FROM unnest(…)`` (below it the extra round trip for the ids costs more
#: than COPY saves).
COPY_FROM = 200
#: Rows of COPY data sent to the server in one write.
COPY_ROWS = 1_000
#: The same in parts (three per row) for :meth:`JobsMixin._copy_in`.
COPY_PARTS = 3 * COPY_ROWS
#: The start and the end of a binary COPY stream (PostgreSQL's ``COPY … (FORMAT BINARY)``:
#: signature, flags, header extension length; a field count of -1).
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)
_FIELD_LENGTH = struct.Struct("!i").pack


def _text_field(value: str, encoding: str) -> bytes:
    """``value`` as one text field of a binary COPY row: its length and its bytes in the
    connection's client encoding (the server's ``textrecv`` converts and checks them)."""
    data = value.encode(encoding)
    return _FIELD_LENGTH(len(data)) + data


def _copy_columns(job: NewJob, now: float, encoding: str) -> tuple[bytes, bytes, float]:
    """The binary COPY row of ``job`` (``COPY_JOBS``'s ten columns) but its id and its
    payload, as (``head``, ``tail``, ``run_at``): a row is ``_row_start(head)(10, 8, id,
    head, len(payload))``, the payload's bytes, then ``tail``. ``run_at`` is computed
    exactly as ``INSERT_MANY`` computes it in SQL: ``now + delay`` unless given."""
    run_at = now + float(job.delay) if job.run_at is None else float(job.run_at)
    head = _text_field(job.queue, encoding) + _text_field(job.task, encoding)
    tail = b"".join((
        struct.pack("!ii", 4, job.priority),
        struct.pack("!id", 8, run_at),
        struct.pack("!ii", 4, job.max_attempts),
        _text_field("queued", encoding),
        struct.pack("!id", 8, now),
        _FIELD_LENGTH(-1) if job.meta is None else _text_field(job.meta, encoding),
    ))  # fmt: skip
    return head, tail, run_at


def _row_start(head: bytes) -> Callable[..., bytes]:
    """The packer of a row's start: its field count (10), the id's length (8) and value,
    ``head`` (queue and task, :func:`_copy_columns`) and the payload's length, in one
    call."""
    return struct.Struct(f"!hiq{len(head)}si").pack


def _same_columns(job: NewJob, last: NewJob) -> bool:
    """True when ``job`` has the very objects of ``last`` in every COPY column but its
    payload (not equal values: the same ones, which a shared template gives; a mere
    equal value only costs formatting the row's columns again)."""
    return (
        job.queue is last.queue
        and job.task is last.task
        and job.priority is last.priority
        and job.run_at is last.run_at
        and job.delay is last.delay
        and job.max_attempts is last.max_attempts
        and job.meta is last.meta
    )


_OUTCOME_ARRAYS = frozenset({"ids", "tokens", "kinds", "results", "errors", "delays", "caps"})


class JobsMixin(PostgresBase):
    """Enqueue (with its NOTIFY), claim and finish, leases, progress, release and reap."""

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], connection: Any = None) -> list[Inserted]:
        if connection is None and len(jobs) == 1 and jobs[0].plain:
            job = jobs[0]
            params = {
                "at": self._at(), "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": job.run_at, "delay": float(job.delay),
                "max_attempts": job.max_attempts, "meta": job.meta,
            }  # fmt: skip
            with self._tx(transaction=False) as conn:  # one statement: its own transaction
                row = conn.execute(self._sql["INSERT_ONE"], params).fetchone()
                self._wakes.send(conn, (job.queue,))  # after the commit (wakes.py)
            assert row is not None
            return [Inserted(int(row[0]), True, float(row[1]), float(row[2]))]
        simple = all(job.plain for job in jobs)  # one check a row, not one per pass
        if not simple and any(job.batch_id is not None for job in jobs):  # plain: no batch
            return self._enqueue_in_batch(jobs, connection)
        if connection is not None:
            try:
                return self._set_extras(connection, jobs, self._enqueue_on(connection, jobs))
            except psycopg.Error as exc:
                raise translate(exc, self.options) from exc

        def insert(conn: psycopg.Connection[Any]) -> list[Inserted]:
            inserted = self._enqueue_on(conn, jobs, simple=simple, notify=False)
            return inserted if simple else self._set_extras(conn, jobs, inserted)

        return self._committed_then_woken(jobs, insert)

    def _committed_then_woken(
        self,
        jobs: Sequence[NewJob],
        insert: Callable[[psycopg.Connection[Any]], list[Inserted]],
    ) -> list[Inserted]:
        """``insert(conn)`` in a transaction of its own, then, after its commit and on the
        same connection, the wake-up of the jobs' queues (:class:`~durq.store.postgres.
        wakes.Wakes`: outside the transaction so that concurrent producers' commits do not
        queue behind PostgreSQL's NOTIFY lock). ``insert`` must not notify itself."""
        with self._tx(transaction=False) as conn:
            with conn.transaction():
                out = insert(conn)
            self._wakes.send(conn, {j.queue for j in jobs})
        return out

    def _enqueue_on(
        self,
        conn: psycopg.Connection[Any],
        jobs: Sequence[NewJob],
        *,
        simple: bool = False,
        notify: bool = True,
    ) -> list[Inserted]:
        """Insert ``jobs`` on ``conn`` in its transaction. ``simple``: the caller found
        every row plain (:attr:`NewJob.plain`), so the limit, hook and workflow passes are
        skipped. ``notify``: send the NOTIFY of their queues in this transaction (on a
        caller's connection, whose commit durq does not see); False when the caller wakes
        them after the commit (:meth:`_committed_then_woken`)."""
        at = self._at()
        out: list[Inserted] = []
        plain: list[NewJob] = []

        def flush() -> None:
            if not plain:
                return
            if len(plain) >= COPY_FROM:
                out.extend(self._copy_in(conn, at, plain))
                plain.clear()
                return
            rows = conn.execute(
                self._sql["INSERT_MANY"],
                {
                    "at": at,
                    "queues": [j.queue for j in plain],
                    "tasks": [j.task for j in plain],
                    "payloads": [j.payload for j in plain],
                    "priorities": [j.priority for j in plain],
                    "run_ats": [None if j.run_at is None else float(j.run_at) for j in plain],
                    "delays": [float(j.delay) for j in plain],
                    "max_attempts": [j.max_attempts for j in plain],
                    "metas": [j.meta for j in plain],
                },
            ).fetchall()
            rows.sort(key=lambda r: r[0])  # identity values follow the insert order
            out.extend(Inserted(int(r[0]), True, float(r[1]), float(r[2])) for r in rows)
            plain.clear()

        # unique keys of this insert: a later row with one holds no new job either (its key
        # is written on the first row only after the loop, by _set_workflow)
        uniques: dict[tuple[str, str, float | None], Inserted] = {}
        slot: tuple[str, str, float | None] | None = None  # the unique key of the row before
        for job in jobs:
            if slot is not None:  # the row before had a unique key: this is its job
                uniques[slot] = out[-1]  # (its row is flushed: a unique row goes alone)
                slot = None
            if job.unique_key is not None:
                flush()
                slot = (job.queue, job.unique_key, job.unique_period)
                holder = uniques.get(slot) or self._unique_holder(conn, job, at)
                if holder is not None:
                    out.append(replace(holder, created=False))
                    continue
            if job.key is None and job.unique_key is None:
                plain.append(job)
                continue
            flush()
            if job.key is None:  # a unique key, no idempotency key: its own row
                plain.append(job)
                flush()
                continue
            params = {
                "at": at, "queue": job.queue, "task": job.task, "payload": job.payload,
                "priority": job.priority, "run_at": job.run_at, "delay": float(job.delay),
                "max_attempts": job.max_attempts, "key": job.key, "meta": job.meta,
            }  # fmt: skip
            row = conn.execute(self._sql["INSERT_KEYED"], params).fetchone()
            if row is not None:
                out.append(Inserted(int(row[0]), True, float(row[1]), float(row[2])))
            else:
                existing = conn.execute(
                    self._sql["SELECT_JOB_BY_KEY"], {"queue": job.queue, "key": job.key}
                ).fetchone()
                assert existing is not None  # the conflicting row is committed and visible
                out.append(
                    Inserted(int(existing[0]), False, float(existing[5]), float(existing[13]))
                )
        flush()
        if not simple:
            self._set_limits(conn, jobs, out)
            self._set_hooks(conn, jobs, out)
            self._set_workflow(conn, jobs, out, at)
        if notify:
            for queue in sorted({j.queue for j in jobs}):
                conn.execute(self._sql["NOTIFY"], {"channel": self.channel, "queue": queue})
        return out

    def _copy_in(
        self, conn: psycopg.Connection[Any], at: float | None, jobs: Sequence[NewJob]
    ) -> list[Inserted]:
        """Insert plain jobs with ``COPY … FROM STDIN (FORMAT BINARY)``: one round trip for
        their ids and the database's time (``RESERVE_IDS``), then one COPY with explicit
        ids, which PostgreSQL accepts into the ``GENERATED ALWAYS`` identity column.

        The binary rows are built here (:func:`_copy_columns`): text fields are the
        values' bytes in the connection's encoding (nothing to escape), numbers their
        network-order bytes; the columns around the payload are encoded again only when a
        row's differ from the previous row's (the rows of one ``enqueue_many`` share every
        one of them)."""
        row = conn.execute(self._sql["RESERVE_IDS"], {"at": at, "n": len(jobs)}).fetchone()
        assert row is not None
        now, ids = float(row[0]), row[1]
        encoding = conn.info.encoding
        out: list[Inserted] = []
        parts: list[bytes] = [COPY_SIGNATURE]
        last: NewJob | None = None
        head = tail = b""
        start = _row_start(head)
        run_at = now
        with conn.cursor() as cur, cur.copy(self._sql["COPY_JOBS"]) as copy:
            for job_id, job in zip(ids, jobs, strict=True):
                if last is None or not _same_columns(job, last):
                    head, tail, run_at = _copy_columns(job, now, encoding)
                    start = _row_start(head)
                    last = job
                payload = job.payload.encode(encoding)
                parts += (start(10, 8, job_id, head, len(payload)), payload, tail)
                out.append(Inserted(job_id, True, run_at, now))
                if len(parts) >= COPY_PARTS:
                    copy.write(b"".join(parts))
                    parts.clear()
            parts.append(COPY_TRAILER)
            copy.write(b"".join(parts))
        return out

    def enqueue_rows(
        self, job: NewJob, payloads: Sequence[str], build: Callable[[InsertedRows], T]
    ) -> T:
        """One plain job per payload (see :meth:`durq.store.base.Store.enqueue_rows`): from
        :data:`COPY_FROM` payloads on one binary COPY whose rows differ only in their id
        and payload, built in one loop; fewer go through :meth:`enqueue`. ``build`` runs
        once the last row is sent, while the server still writes the rows (the client's
        work on the result and the server's on the rows overlap), before the commit; the
        queue's wake-up goes after the commit (:meth:`_committed_then_woken`'s rule).

        Raises:
            ValueError: ``job`` is not plain.
            StoreError: the database refused the rows; none of them was written.
        """
        if not job.plain:
            raise ValueError("enqueue_rows takes a plain job (no key, batch, hooks, ...)")
        if len(payloads) < COPY_FROM:
            inserted = self.enqueue([job.with_payload(p) for p in payloads])
            if not inserted:
                return build(InsertedRows([], self.now(), self.now()))
            first_row = inserted[0]
            ids = [i.id for i in inserted]
            return build(InsertedRows(ids, first_row.run_at, first_row.created_at))
        with self._tx(transaction=False) as conn:
            with conn.transaction():
                n = len(payloads)
                row = conn.execute(self._sql["RESERVE_IDS"], {"at": self._at(), "n": n}).fetchone()
                assert row is not None
                now, ids = float(row[0]), row[1]
                encoding = conn.info.encoding
                head, tail, run_at = _copy_columns(job, now, encoding)
                start = _row_start(head)
                with conn.cursor() as cur, cur.copy(self._sql["COPY_JOBS"]) as copy:
                    copy.write(COPY_SIGNATURE)
                    for first in range(0, n, COPY_ROWS):
                        parts: list[bytes] = []
                        last = first + COPY_ROWS
                        rows = zip(ids[first:last], payloads[first:last], strict=True)
                        for job_id, text in rows:
                            payload = text.encode(encoding)
                            parts += (start(10, 8, job_id, head, len(payload)), payload, tail)
                        copy.write(b"".join(parts))
                    copy.write(COPY_TRAILER)  # every row is on its way: build while they land
                    built = build(InsertedRows(ids, run_at, now))
            # after the commit, as every enqueue that durq commits (store/postgres/wakes.py)
            self._wakes.send(conn, (job.queue,))
        return built

    # -- running jobs ---------------------------------------------------------------------

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        tasks: Sequence[str],
        limit: int,
        lease: float,
        worker_id: str,
        limited: int | None = None,
    ) -> tuple[list[bool], list[Claimed]]:
        """Outcomes and the first queue's claim go in one statement (one round trip, one
        commit); further queues, when the first did not fill ``limit``, are claimed after.
        Outcomes of batch members run in one transaction with their batches' close; limited
        jobs are claimed by their own pass (see :meth:`_claim_limited`), at most
        ``limited`` of them, and come first in the list returned."""
        at = self._at()
        claimed: list[Claimed] = []
        capped: list[Claimed] = []
        budget = limit if limited is None else min(limited, limit)

        def room() -> int:
            return min(limit - len(claimed) - len(capped), budget - len(capped))

        params: dict[str, Any] = {
            "at": at,
            "ids": [o.job_id for o in outcomes],
            "tokens": [o.lease_token for o in outcomes],
            "kinds": [o.kind for o in outcomes],
            "results": [o.result for o in outcomes],
            "errors": [json.dumps(o.error.to_dict()) if o.error else None for o in outcomes],
            "delays": [float(o.delay) for o in outcomes],
            "caps": [o.max_snoozes for o in outcomes],
            "tasks": list(tasks),
            "lease": lease,
            "worker_id": worker_id,
        }
        claim_queues = list(queues) if limit > 0 else []
        if outcomes:
            if any(o.kind == "retry" for o in outcomes):
                hit("retry_tx")
            hit("finish_tx")
        done: set[int] = set()  # ids of the jobs an outcome was written for
        held: set[tuple[int, int]] = set()  # (id, token) of the outcomes written
        batched = any(o.batch_id is not None for o in outcomes)  # then close them in one tx
        hooked = any(o.on_fail for o in outcomes)  # on_fail hook jobs: in the same tx
        # limits: queues whose limited jobs waited last time are offered the slots first;
        # the claims below skip limited jobs and report (a NULL row) queues that have some
        first = [name for name in claim_queues if name in self._limited_queues]
        for queue in first:
            capped.extend(self._claim_limited(queue, tasks, room(), lease, worker_id))
        seen: dict[str, bool] = {}
        fair: list[str] = []  # queues whose fair-keyed jobs the claims left (fairness.py)

        def claim_over(conn: psycopg.Connection[Any], names: Sequence[str]) -> set[int]:
            """CLAIM on each of ``names`` while slots are left, noting the queues whose
            limited (``seen``) or fair-keyed jobs it left; the ids it claimed."""
            before = len(claimed)
            for queue in names:
                if len(claimed) + len(capped) >= limit:
                    break
                params["queue"], params["limit"] = queue, limit - len(claimed) - len(capped)
                rows = conn.execute(self._sql["CLAIM"], params).fetchall()
                if any(r[0] is None and r[1] != -1 for r in rows):
                    seen[queue] = True
                else:
                    seen.setdefault(queue, False)
                if queue not in fair and any(r[0] is None and r[1] == -1 for r in rows):
                    fair.append(queue)
                claimed.extend(self._claimed_in_order([r[1:] for r in rows if r[0]]))
            return {c.id for c in claimed[before:]}

        # one statement is its own transaction; claims over several queues share one
        with self._tx(transaction=len(claim_queues) > 1 or batched or hooked) as conn:
            if outcomes and not claim_queues:
                held = {(r[0], r[1]) for r in conn.execute(self._sql["FINISH_MANY"], params)}
                done = {job_id for job_id, _ in held}
            elif outcomes:
                queue = claim_queues.pop(0)
                params["queue"], params["limit"] = queue, limit - len(claimed) - len(capped)
                rows = []
                seen[queue] = False
                for r in conn.execute(self._sql["FINISH_AND_CLAIM"], params).fetchall():
                    if r[0] is None and r[1] == -1:
                        fair.append(queue)
                    elif r[0] is None:
                        seen[queue] = True
                    elif r[0]:
                        rows.append(r[1:])
                    else:
                        done.add(r[1])
                        held.add((r[1], r[7]))
                claimed.extend(self._claimed_in_order(rows))
            if batched:
                self._close_batches_of(conn, outcomes, done, at)
            if hooked:
                marked = [o.job_id for o in outcomes if o.on_fail and _key(o) in held]
                self._fail_hooks(conn, marked, at, flagged=False)
            claim_over(conn, claim_queues)
        left = [o for o in outcomes if o.job_id not in done]
        if left:  # stale outcomes, or jobs with children: finished with their settle
            # the children those finishes queue (a chain's next step) are claimed in the
            # same transaction: else they wait for the NOTIFY and a claim of their own
            def claim_promoted(conn: psycopg.Connection[Any]) -> set[int]:
                return claim_over(conn, queues)

            more = claim_promoted if limit > 0 and queues else None
            held |= self._finish_parents(left, params, at, more)
        for queue in fair:
            if len(claimed) + len(capped) < limit:
                claimed.extend(
                    self._claim_fair(
                        queue, tasks, limit - len(claimed) - len(capped), lease, worker_id
                    )
                )
        for queue, waiting in seen.items():
            if not waiting:
                self._limited_queues.discard(queue)
                continue
            self._limited_queues.add(queue)
            if queue not in first:
                capped.extend(self._claim_limited(queue, tasks, room(), lease, worker_id))
        if self._limited_ids and outcomes:
            self._limited_finished([o.job_id for o in outcomes])
        return [_key(o) in held for o in outcomes], capped + claimed

    def give_back(self, leases: Sequence[tuple[int, int]]) -> list[int]:
        if not leases:
            return []
        params = {
            "ids": [i for i, _ in leases],
            "tokens": [t for _, t in leases],
            "channel": self.channel,
        }
        with self._tx(transaction=False) as conn:
            back = {int(r[0]) for r in conn.execute(self._sql["GIVE_BACK"], params).fetchall()}
        return [i for i, _ in leases if i in back]

    def paused_among(self, queues: Sequence[str]) -> set[str]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._sql["PAUSED_AMONG"], {"queues": list(queues)}).fetchall()
        return {r[0] for r in rows}

    def _finish_parents(
        self,
        left: Sequence[Outcome],
        params: dict[str, Any],
        at: float | None,
        claim: Callable[[psycopg.Connection[Any]], set[int]] | None = None,
    ) -> set[tuple[int, int]]:
        """Record the outcomes of jobs that have children (the hot statement leaves them)
        in one transaction with the children's settle, their batches' close and on_fail
        hooks, and, when the settle queued children and ``claim`` is given, ``claim(conn)``
        in that transaction too (a later statement: it sees them; it returns the ids it
        claimed, and the others are announced with a NOTIFY). Outcomes whose token no
        longer holds change nothing, as before. Returns (id, token) of the outcomes
        written."""
        ids = {o.job_id for o in left}
        keep = [i for i, job_id in enumerate(params["ids"]) if job_id in ids]
        sub = {k: ([v[i] for i in keep] if k in _OUTCOME_ARRAYS else v) for k, v in params.items()}
        with self._tx() as conn:
            rows = conn.execute(self._sql["FINISH_PARENTS"], sub).fetchall()
            held = {(int(r[0]), int(r[2])) for r in rows}
            if not held:
                return held
            done = {job_id for job_id, _ in held}
            ended = [int(r[0]) for r in rows if r[1] != "queued"]
            if any(o.batch_id is not None for o in left):
                self._close_batches_of(conn, left, done, at)
            marked = [o.job_id for o in left if o.on_fail and _key(o) in held]
            if marked:
                self._fail_hooks(conn, marked, at, flagged=False)
            promoted = self._deps.settle(conn, ended, at, quiet=claim is not None)
            if promoted and claim is not None:
                taken = claim(conn)  # then wake the workers for those it left queued
                left_queued = [i for i in promoted if i not in taken]
                if left_queued:
                    self._deps.notify_queued(conn, left_queued)
        return held

    @staticmethod
    def _claimed_in_order(rows: Sequence[Sequence[Any]]) -> list[Claimed]:
        """Claimed rows (id, queue, task, payload, attempts, max_attempts, token, requeues,
        priority, run_at, batch_id) in claim order: RETURNING does not keep the ORDER BY."""
        ordered = sorted(rows, key=lambda r: (r[8], r[9], r[0]))
        return [
            Claimed(
                int(r[0]),
                r[1],
                r[2],
                r[3],
                int(r[4]),
                int(r[5]),
                int(r[6]),
                int(r[7]),
                r[10],
                float(r[9]),
            )
            for r in ordered
        ]

    def extend_leases(
        self, leases: Sequence[tuple[int, int]], lease: float
    ) -> list[tuple[int, int]]:
        if not leases:
            return []
        params = {
            "at": self._at(),
            "lease": lease,
            "ids": [i for i, _ in leases],
            "tokens": [t for _, t in leases],
        }
        hit("heartbeat_tx")
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._sql["EXTEND_LEASES"], params).fetchall()
        kept = {(int(r[0]), int(r[1])) for r in rows}  # per (id, token): not per id
        return [(i, t) for i, t in leases if (i, t) not in kept]

    def set_progress(self, job_id: int, token: int, progress: str) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(
                self._sql["SET_PROGRESS"], {"id": job_id, "token": token, "progress": progress}
            )
            return cur.rowcount == 1

    def release(
        self, job_id: int, token: int, free_requeues: int, error: str, on_fail: bool = False
    ) -> tuple[str, int] | None:
        params = {
            "at": self._at(),
            "id": job_id,
            "token": token,
            "free": free_requeues,
            "error": error,
        }
        with self._tx() as conn:  # a release that fails a job closes its batch with it
            row = conn.execute(self._sql["RELEASE"], params).fetchone()
            if row is not None and row[0] == "failed":
                self._batches.close_for_jobs(conn, [job_id], self._at())
                self._deps.settle(conn, [job_id], self._at())
                self._fail_hooks(conn, [job_id], self._at(), flagged=not on_fail)
        return (row[0], row[1]) if row else None

    def reap(self, fail_tasks: Sequence[str] = ()) -> ReapSummary:
        at = self._at()
        with self._tx() as conn:
            rows = conn.execute(self._sql["REAP"], {"at": at}).fetchall()
            self._batches.close_for_jobs(conn, [r[0] for r in rows if r[1] == "failed"], at)
            failed = [r[0] for r in rows if r[1] == "failed"]
            self._deps.settle(conn, failed, at)
            self._fail_hooks(conn, failed, at, flagged=True, tasks=fail_tasks)
            at = conn.execute(self._sql["CLOCK"], {"at": at}).fetchone()
            now = float(at[0]) if at else self.now()
            summary = ReapSummary(
                at=now,
                recovered=sum(1 for r in rows if r[1] == "queued"),
                failed=sum(1 for r in rows if r[1] == "failed"),
                job_ids=tuple(sorted(int(r[0]) for r in rows)),
            )
            value = {"at": now, "recovered": summary.recovered, "failed": summary.failed}
            conn.execute(self._sql["PUT_META"], {"key": "last_reap", "value": json.dumps(value)})
            if rows:  # as the rescue does: idle workers claim the re-queued jobs now, and the
                # cancel watch of a worker still running one of their bodies stops it
                payload = {"channel": self.channel, "queue": self._sql["CANCEL_PAYLOAD"]}
                conn.execute(self._sql["NOTIFY"], payload)
        return summary


def _key(o: Outcome) -> tuple[int, int]:
    """(job id, lease token) of an outcome: how the finish statements name what they wrote
    (one batch may hold two attempts of one job)."""
    return (o.job_id, o.lease_token)
