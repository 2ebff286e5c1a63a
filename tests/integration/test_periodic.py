"""Periodic jobs in real worker processes: a per-second schedule across crashes and
restarts, with one and with two schedulers at once, on both backends."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import durq
from tests.support.procs import WorkerProc, wait_for, workers

pytestmark = pytest.mark.slow

APP = "tests.apps.periodic"
ARGS = ("--lease", "2", "--grace", "5")


def periodic_jobs(url: str) -> list[durq.Job]:
    """The schedule's jobs (none while the first worker has not created the schema yet)."""
    dq = durq.Durq(url, migrate=False)
    try:
        return dq.jobs(task="every_second", limit=100_000)
    except durq.StoreError:
        return []
    finally:
        dq.close()


def assert_each_slot_once(url: str) -> list[int]:
    """One job per slot, for every second from the first slot to the last (the restarts
    were shorter than the 60 s grace, so no slot counts as missed), and the stored last
    slot is the latest job's."""
    jobs = periodic_jobs(url)
    slots = sorted(int(j.meta["slot"]) for j in jobs)
    assert slots, "no slot fired"
    assert len(slots) == len(set(slots)), "a slot fired twice"
    assert slots == list(range(slots[0], slots[-1] + 1)), "a slot was skipped"
    assert all(j.run_at == j.meta["slot"] and j.payload == {"slot": j.meta["slot"]} for j in jobs)
    dq = durq.Durq(url, migrate=False)
    try:
        assert dq.store.periodic_slots()["every_second"][0] == slots[-1]
    finally:
        dq.close()
    return slots


def runs(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]


def test_a_crash_inside_the_enqueue_transaction_and_a_restart_fire_each_slot_once(
    url: str, tmp_path: Path
) -> None:
    """The first worker dies (exit 137, like SIGKILL) inside the transaction that enqueues
    its third slot; the restarted worker enqueues that slot and goes on: each once."""
    runs_file = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs_file)}
    crashing = {**env, "DURQ_FAILPOINTS": "periodic_tx=exit@3"}
    with workers(dict(app=APP, url=url, log=tmp_path / "w1.log", args=ARGS, env=crashing)) as (w1,):
        assert w1.wait(30) == 137
    assert len(periodic_jobs(url)) == 2  # the third slot's transaction rolled back
    with workers(dict(app=APP, url=url, log=tmp_path / "w2.log", args=ARGS, env=env)) as (w2,):
        wait_for(lambda: len(set(runs(runs_file))) >= 6, 30, what="six slots run")
        w2.signal(signal.SIGTERM)
        assert w2.wait(30) == 0
    slots = assert_each_slot_once(url)
    assert len(slots) >= 6
    assert set(runs(runs_file)) <= set(slots)


def test_two_workers_at_once_and_a_kill_restart_fire_each_slot_once(
    url: str, tmp_path: Path
) -> None:
    """Two workers schedule at the same time (on SQLite both tick; on PostgreSQL one leads);
    one is killed with SIGKILL and restarted inside a slot; a slot still fires once."""
    runs_file = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs_file)}
    spec = dict(app=APP, url=url, args=ARGS, env=env)
    with workers({**spec, "log": tmp_path / "a.log"}, {**spec, "log": tmp_path / "b.log"}) as (
        a,
        b,
    ):
        wait_for(lambda: len(set(runs(runs_file))) >= 3, 30, what="three slots run")
        a.kill()
        seen = len(periodic_jobs(url))
        restarted = WorkerProc(APP, url, tmp_path / "a2.log", ARGS, env)
        try:
            wait_for(lambda: len(periodic_jobs(url)) >= seen + 3, 30, what="three more slots")
            b.kill()
            wait_for(lambda: len(periodic_jobs(url)) >= seen + 5, 30, what="slots after b died")
            restarted.signal(signal.SIGTERM)
            assert restarted.wait(30) == 0
        finally:
            restarted.stop()
    slots = assert_each_slot_once(url)
    assert len(slots) >= 8


def test_periodic_list_shows_last_and_next_slot(url: str, tmp_path: Path) -> None:
    """`durq periodic list --app MODULE` after a worker ran the schedule for a while."""
    import json
    import os
    import subprocess
    import sys

    from tests.support.procs import ROOT

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "durq", "periodic", "list", "--app", APP, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "DURQ_URL": url, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )

    with workers(dict(app=APP, url=url, log=tmp_path / "w.log", args=ARGS)) as (w,):
        wait_for(lambda: len(periodic_jobs(url)) >= 2, 30, what="two slots")
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0
    out = cli("--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    latest = max(j.meta["slot"] for j in periodic_jobs(url))
    assert (row["name"], row["cron"], row["tz"]) == ("every_second", "* * * * * *", "UTC")
    assert row["last_slot"] == latest and row["next_slot"] > latest
    table = cli()
    assert table.returncode == 0 and "every_second" in table.stdout
