"""The plain enqueue path (issue 14): a task's checked template is reused, but never past a
change of the task's defaults, a batch or a payload it would have refused."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import durq
from durq.errors import ConfigError, PayloadError, StoreBusy


def test_a_changed_default_is_seen_at_the_next_enqueue(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'q.db'}")
    try:

        @dq.task
        def work(n: int = 0) -> int:
            return n

        first = work.enqueue(n=1)
        work.queue = "other"
        work.priority = 5
        second = work.enqueue(n=2)
        assert (first.queue, first.priority) == ("default", 0)
        assert (second.queue, second.priority) == ("other", 5)
        assert dq.get(second.id).queue == "other"
        work.max_attempts = 0  # checked again, not taken from the cached template
        with pytest.raises(ConfigError):
            work.enqueue(n=3)
        work.max_attempts = 3
        with pytest.raises(PayloadError):
            work.enqueue(nope=1)
        with dq.batch() as batch:  # the open batch is looked up on every enqueue
            work.max_attempts = 2
            inside = work.enqueue(n=4)
        outside = work.enqueue(n=5)
        assert dq.get(inside.id).batch_id == batch.id
        assert dq.get(outside.id).batch_id is None
        ids = [first.id, second.id, inside.id, outside.id]
        assert ids == sorted(ids) and len(set(ids)) == 4
        assert [dq.get(i).payload for i in ids] == [{"n": 1}, {"n": 2}, {"n": 4}, {"n": 5}]
    finally:
        dq.close()


def test_a_plain_enqueue_waits_out_a_held_write_lock_then_gives_up(tmp_path: Path) -> None:
    """The one-statement enqueue polls a locked database itself (its connection has no
    busy handler): it commits once the lock goes, and raises StoreBusy, having written
    nothing, when the lock outlasts ``lock_timeout``."""
    path = tmp_path / "q.db"
    dq = durq.Durq(f"sqlite:///{path}?lock_timeout=0.5")
    blocker = sqlite3.connect(path, isolation_level=None)
    try:

        @dq.task
        def work(n: int = 0) -> int:
            return n

        work.enqueue(n=0)  # the store is open and the writer connection made
        blocker.execute("BEGIN IMMEDIATE")
        result: list[Any] = []
        started = time.monotonic()
        thread = threading.Thread(target=lambda: result.append(work.enqueue(n=1)))
        thread.start()
        time.sleep(0.2)
        assert not result  # still waiting for the lock
        blocker.execute("COMMIT")
        thread.join(timeout=30)
        assert result and dq.get(result[0].id).payload == {"n": 1}
        assert time.monotonic() - started >= 0.2
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusy):
                work.enqueue(n=2)
        finally:
            blocker.execute("COMMIT")
        assert sorted(j.payload["n"] for j in dq.jobs(limit=10)) == [0, 1]
        assert work.enqueue(n=3).id > result[0].id  # and the path works again after
    finally:
        blocker.close()
        dq.close()


def test_plain_inserts_bind_no_none(tmp_path: Path) -> None:
    """The plain inserts (one row, and the multi-row ``enqueue_many``) write a NULL meta and
    key in the statement: the sqlite3 module sends every bound ``None`` through its adapter
    lookup, a failed attribute lookup that formats an exception message (about 0.5 µs a
    value, a sixth of ``enqueue_many``'s instructions per row). An adapter registered for
    ``NoneType`` sees every bound ``None``: it must see none, and the rows must read back
    as before, with and without meta."""
    bound: list[object] = []
    sqlite3.register_adapter(type(None), lambda value: bound.append(value))
    dq = durq.Durq(f"sqlite:///{tmp_path / 'q.db'}")
    try:

        @dq.task
        def work(n: int = 0) -> int:
            return n

        one = work.enqueue(n=1)
        many = work.enqueue_many([{"n": i} for i in range(5)])
        assert bound == []
        tagged = work.options(meta={"who": "me"})
        with_meta = [tagged.enqueue(n=7), *tagged.enqueue_many([{"n": 8}, {"n": 9}])]
        for job in [one, *many]:
            row = dq.get(job.id)
            assert (row.meta, row.key, row.state) == (None, None, "queued")
        assert [dq.get(j.id).meta for j in with_meta] == [{"who": "me"}] * 3
        assert [dq.get(j.id).payload for j in many] == [{"n": i} for i in range(5)]
        # past one statement's rows (500): ids in order, each row its own payload and meta
        bound.clear()
        plain = work.enqueue_many([{"n": i} for i in range(1201)])
        metas = tagged.enqueue_many([{"n": i} for i in range(1201)])
        assert bound == []  # (meta given: bound once a statement, never None)
        rows = {r.id: r for r in dq.jobs(limit=5000)}
        for jobs, meta in ((plain, None), (metas, {"who": "me"})):
            ids = [j.id for j in jobs]
            assert ids == list(range(ids[0], ids[0] + 1201))
            assert [rows[i].payload for i in ids] == [{"n": i} for i in range(1201)]
            assert [j.payload for j in jobs] == [{"n": i} for i in range(1201)]
            assert {str(rows[i].meta) for i in ids} == {str(meta)}
    finally:
        sqlite3.adapters.pop((type(None), sqlite3.PrepareProtocol), None)
        dq.close()


def test_a_bulk_enqueue_logs_each_job_once_it_has_committed(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With events on, enqueue_many's plain rows (one template, the bulk store path; 250
    rows are past PostgreSQL's COPY threshold) log one job_enqueued each, for jobs that
    exist, as a one-at-a-time enqueue does."""
    dq = durq.Durq(url)
    try:

        @dq.task
        def work(n: int) -> int:
            return n

        with caplog.at_level(logging.INFO, logger="durq.events"):
            jobs = work.enqueue_many([{"n": i} for i in range(250)])
        logged = [r for r in caplog.records if "job_enqueued" in r.getMessage()]
        assert len(logged) == len(jobs) == 250
        assert {j.id for j in jobs} == {j.id for j in dq.jobs(limit=500)}
    finally:
        dq.close()
