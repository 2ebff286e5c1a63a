"""``purge`` keeps a parent that a child not yet ended needs (defects item 4), on every
backend, as retention does: a fan-in's child takes its parents' results when it is queued,
so purging a finished parent shortened its list, and purging an unfinished one left the
child waiting for ever."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import durq
from durq.model import Claimed, Outcome
from tests.support.procs import ROOT

LEASE = 30.0


def tasks(app: durq.Durq) -> None:
    @app.task
    def add(x: int) -> int:
        return x

    @app.task
    def total(values: list[int]) -> int:
        return sum(values)


def succeed(app: durq.Durq, claimed: list[Claimed]) -> None:
    outs = []
    for c in claimed:
        value = app.tasks[c.task].fn(**json.loads(c.payload))
        outs.append(Outcome(c.id, c.lease_token, "succeeded", result=json.dumps(value)))
    assert all(app.store.finish(outs))


def test_a_finished_parent_of_a_waiting_child_is_kept_until_the_child_ended(
    app: durq.Durq,
) -> None:
    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    jobs = app.group([add.s(x=1), add.s(x=2), add.s(x=3)]).then(total.s())
    first_two = app.store.claim("default", ["add"], 2, LEASE, "w1")
    succeed(app, first_two)
    lone = add.enqueue(x=9)  # a finished job without children goes as before
    rest = app.store.claim("default", ["add"], 10, LEASE, "w1")
    last = [c for c in rest if c.id != lone.id]
    succeed(app, [c for c in rest if c.id == lone.id])
    assert app.get(lone.id).state == "succeeded"
    assert app.purge("default") == 1
    assert app.store.purge_held("default", ["succeeded"]) == 2
    assert [app.get(j.id).state for j in jobs[:2]] == ["succeeded", "succeeded"]

    succeed(app, last)  # the last parent
    assert app.get(jobs[-1].id).payload == {"values": [1, 2, 3]}  # the whole list
    succeed(app, app.store.claim("default", ["total"], 1, LEASE, "w1"))
    assert app.get(jobs[-1].id).result == 6
    assert app.store.purge_held("default", ["succeeded"]) == 0
    assert app.purge("default") == 4  # the parents once their child ended, and the child


def test_an_unfinished_parent_is_kept_and_its_child_is_not_stranded(app: durq.Durq) -> None:
    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    jobs = app.group([add.s(x=1), add.s(x=2)]).then(total.s())
    assert app.purge("default", states=["queued"]) == 0
    assert app.store.purge_held("default", ["queued"]) == 2
    succeed(app, app.store.claim("default", ["add"], 10, LEASE, "w1"))
    assert app.get(jobs[-1].id).state == "queued" and app.store.stuck_waiting() == []


def test_a_purge_that_takes_the_child_too_takes_its_parents(app: durq.Durq) -> None:
    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    app.group([add.s(x=1), add.s(x=2)]).then(total.s())
    succeed(app, app.store.claim("default", ["add"], 1, LEASE, "w1"))
    everything = ["queued", "running", "succeeded", "failed", "cancelled", "expired", "waiting"]
    assert app.store.purge_held("default", everything) == 0
    assert app.purge("default", states=everything) == 3
    assert app.jobs(limit=10) == []


def test_a_child_on_another_queue_holds_its_parent(app: durq.Durq) -> None:
    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    app.group([add.s(x=1)]).then(total.s().options(queue="other"))
    succeed(app, app.store.claim("default", ["add"], 1, LEASE, "w1"))
    assert app.purge("default") == 0  # its child is queued on "other", not run yet
    assert app.store.purge_held("default", ["succeeded"]) == 1


def test_the_cli_says_how_many_it_kept_and_why(app: durq.Durq, backend_url: str) -> None:
    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    app.group([add.s(x=1), add.s(x=2)]).then(total.s())
    succeed(app, app.store.claim("default", ["add"], 1, LEASE, "w1"))

    def purge(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "durq", "purge", "default", "--db", backend_url, *extra],
            capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=60,
        )  # fmt: skip

    out = purge()
    assert out.returncode == 0, out.stderr
    assert "deleted 0 job(s)" in out.stdout
    assert "kept 1 job(s) that a child not yet ended still waits for" in out.stdout
    shown = json.loads(purge("--json").stdout)
    assert shown["deleted"] == 0 and shown["kept"] == 1


def test_the_dashboards_delete_of_failed_jobs_keeps_a_parent_a_child_waits_for(
    app: durq.Durq,
) -> None:
    from durq.model import AttemptError

    tasks(app)
    add, total = app.tasks["add"], app.tasks["total"]
    jobs = app.group([add.s(x=1), add.s(x=2)]).then(total.s(), on_parent_failure="run")
    first, second = app.store.claim("default", ["add"], 2, LEASE, "w1")
    error = AttemptError(first.attempt, 0.0, "ValueError", "boom", "", "permanent")
    app.store.finish([Outcome(first.id, first.lease_token, "failed", error=error)])
    lone = add.enqueue(x=3)
    (c,) = app.store.claim("default", ["add"], 1, LEASE, "w1")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=error)])
    assert app.store.delete_failed([first.id, lone.id]) == 1  # the lone one only
    succeed(app, [second])
    assert app.get(jobs[-1].id).payload == {"values": [None, 2]}  # the failed one's None kept
