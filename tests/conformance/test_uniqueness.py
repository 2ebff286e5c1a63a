"""Uniqueness while active and for a period (issue 15 item 5), on every backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from durq.errors import ConfigError
from durq.model import AttemptError, Outcome
from tests.conftest import Clock

ROOT = Path(__file__).resolve().parents[2]


def register(app: durq.Durq) -> durq.Task:  # type: ignore[type-arg]
    @app.task
    def sync(account: int) -> int:
        return account

    return sync


def finish_one(app: durq.Durq, ok: bool = True) -> None:
    (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
    if ok:
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    else:
        error = AttemptError(c.attempt, 0.0, "E", "x", "", "permanent")
        app.store.finish([Outcome(c.id, c.lease_token, "failed", error=error)])


def test_active_holds_the_key_only_while_a_job_is_live(app: durq.Durq) -> None:
    sync = register(app)
    first = sync.options(key="acct-1", unique="active").enqueue(account=1)
    again = sync.options(key="acct-1", unique="active").enqueue(account=1)
    assert again.id == first.id  # queued: held
    other_key = sync.options(key="acct-2", unique="active").enqueue(account=2)
    assert other_key.id != first.id
    app.cancel(other_key.id)
    (c,) = app.store.claim("default", ["sync"], 1, 30.0, "w")
    assert sync.options(key="acct-1", unique="active").enqueue(account=1).id == first.id  # running
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="null")])
    fresh = sync.options(key="acct-1", unique="active").enqueue(account=1)
    assert fresh.id != first.id and fresh.state == "queued"  # finished: released
    finish_one(app, ok=False)
    assert sync.options(key="acct-1", unique="active").enqueue(account=1).id not in (
        first.id,
        fresh.id,
    )  # a failed job does not hold it either


def test_waiting_and_parked_jobs_hold_an_active_key(app: durq.Durq) -> None:
    sync = register(app)
    parent = sync.enqueue(account=0)
    child = sync.options(key="k", unique="active", after=[parent]).enqueue(account=1)
    assert child.state == "waiting"
    assert app.enqueue("sync", {"account": 1}, key="k", unique="active").id == child.id
    parked = sync.options(key="p", unique="active", park=True).enqueue(account=2)
    assert sync.options(key="p", unique="active").enqueue(account=2).id == parked.id


def test_period_holds_the_key_for_its_window_whatever_the_state(
    app: durq.Durq, clock: Clock
) -> None:
    sync = register(app)
    first = sync.options(key="daily", unique="period:3600").enqueue(account=1)
    finish_one(app)
    clock.advance(3599)
    assert sync.options(key="daily", unique="period:3600").enqueue(account=1).id == first.id
    clock.advance(2)
    later = sync.options(key="daily", unique="period:3600").enqueue(account=1)
    assert later.id != first.id


def test_the_default_key_is_still_held_until_pruned(app: durq.Durq) -> None:
    sync = register(app)
    first = sync.options(key="once").enqueue(account=1)
    finish_one(app)
    assert sync.options(key="once").enqueue(account=1).id == first.id


@pytest.mark.parametrize(
    ("unique", "key", "message"),
    [
        ("active", None, "needs key="),
        ("forever", "k", "must be 'active' or 'period:N'"),
        ("period:0", "k", "must be 'active' or 'period:N'"),
        ("period:abc", "k", "must be 'active' or 'period:N'"),
        ("period:inf", "k", "must be 'active' or 'period:N'"),
    ],
)
def test_bad_unique_modes_are_refused_and_nothing_is_written(
    app: durq.Durq, unique: str, key: str | None, message: str
) -> None:
    sync = register(app)
    with pytest.raises(ConfigError, match=message):
        sync.options(key=key, unique=unique).enqueue(account=1)
    assert app.jobs() == []


RACER = """
import sys, durq
dq = durq.Durq(sys.argv[1])
@dq.task
def sync(account: int) -> int:
    return account
ids = [sync.options(key="race", unique="active").enqueue(account=1).id for _ in range(500)]
print(len(set(ids)))
"""


def test_two_processes_racing_1000_enqueues_yield_one_live_job(
    app: durq.Durq, backend_url: str, tmp_path: Path
) -> None:
    register(app)
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), backend_url], stdout=subprocess.PIPE, env=env, text=True
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0]
    assert [json.loads(o) for o in outs] == [1, 1]  # each process saw one job throughout
    live = app.jobs(state="queued")
    assert len(live) == 1 and len(app.jobs()) == 1
    finish_one(app)
    new = app.enqueue("sync", {"account": 1}, key="race", unique="active")
    assert new.id != live[0].id and len(app.jobs()) == 2
