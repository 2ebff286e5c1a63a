"""Which workers ``durq status``, ``durq workers`` and the dashboard count as live (issue
ux-polish, item 4): beaten within their lease, or their ``rescue_after`` when shorter (the
rescue's verdict), and on this host only while their process is there. The store returns
each worker's ``rescue_after`` and process stamp for that (both backends)."""

from __future__ import annotations

import os
import socket

import durq
from durq.model import WorkerInfo, WorkerReport
from durq.observability import views
from durq.observability.processes import proc_stamp
from tests.conftest import Clock

LEASE = 30.0


def join(app: durq.Durq, worker_id: str, rescue_after: float | None, proc: str | None) -> None:
    now = app.store.now()
    host, pid = socket.gethostname(), os.getpid()
    app.store.register_worker(WorkerInfo(worker_id, host, pid, ("q",), ("t",), now, now, LEASE))
    app.store.report_worker(worker_id, WorkerReport("threads", 1, "0", (), 0, 0))
    assert app.store.beat_worker(worker_id, rescue_after, proc) == 0


def live_ids(app: durq.Durq) -> tuple[list[str], list[str]]:
    """The live workers' ids as ``dq.status()`` and ``durq workers`` see them."""
    return [w["id"] for w in app.status()["workers"]], [w["id"] for w in views.workers(app.store)]


def test_the_store_returns_each_workers_rescue_after_and_stamp(app: durq.Durq) -> None:
    join(app, "beaten", 5.0, "boot/ns/123")
    join(app, "old", None, None)
    got = {w.id: (w.rescue_after, w.proc) for w in app.store.status_data().workers}
    assert got == {"beaten": (5.0, "boot/ns/123"), "old": (None, None)}
    details = {w.id: (w.rescue_after, w.proc) for w in app.store.worker_details()}
    assert details == got


def test_a_worker_that_stopped_beating_is_dead_after_its_rescue_after(
    app: durq.Durq, clock: Clock
) -> None:
    join(app, "beats", 5.0, None)
    join(app, "old", None, None)  # no rescue_after (an older worker): its lease decides
    clock.advance(4)
    assert live_ids(app) == (["beats", "old"], ["beats", "old"])
    clock.advance(2)  # 6 s without a beat: the leader's rescue counts "beats" dead now
    assert live_ids(app) == (["old"], ["old"])
    clock.advance(LEASE - 6 + 1)
    assert live_ids(app) == ([], [])


def test_a_worker_whose_process_is_gone_from_this_host_is_not_live(app: durq.Durq) -> None:
    mine = proc_stamp(os.getpid())
    if mine is None:  # no /proc: nothing is judged by pid, as for the rescue
        return
    boot_ns, _, started = mine.rpartition("/")
    join(app, "here", 5.0, mine)  # this very process: live
    join(app, "reused", 5.0, f"{boot_ns}/{int(started) + 1}")  # its pid, another start
    join(app, "other-boot", 5.0, f"other-boot/x/{started}")  # cannot tell: live
    assert live_ids(app) == (["here", "other-boot"], ["here", "other-boot"])


def test_why_a_job_waits_counts_workers_live_by_the_same_rule(app: durq.Durq, clock: Clock) -> None:
    """The job page's "why not running" (``Store.why_facts``) serves a queued job only from
    a worker that ``durq status`` counts live: one silent past its ``rescue_after`` no
    longer serves it, although its lease (30 s) has not run out."""
    join(app, "beats", 5.0, None)
    job = app.enqueue("t", {}, queue="q")
    record = app.store.get(job.id)
    assert record is not None
    assert app.store.why_facts(record).served
    clock.advance(6)
    assert live_ids(app) == ([], [])
    assert not app.store.why_facts(record).served
