"""PostgreSQL-only behaviour: many hosts, connection faults, the database clock, leadership."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

import durq
from durq.model import JobFilter
from durq.worker.prefetch import default_depth
from tests.conftest import PG_URL, require_pg
from tests.support.procs import ROOT, WorkerProc, wait_for

APP = "tests.apps.basic:dq"


def schema_of(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["schema"]


def admin(sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_unreachable_server_names_the_url_with_the_password_masked() -> None:
    url = "postgresql://bob:s3cret@127.0.0.1:1/jobs"
    for verb in (["status", "--db", url], ["worker", APP, "--db", url]):
        out = run_cli(*verb)
        assert out.returncode == 1, verb
        assert "postgresql://bob:***@127.0.0.1:1/jobs" in out.stderr
        assert "s3cret" not in out.stderr + out.stdout


def test_two_processes_migrating_at_once_migrate_once(pg_url: str) -> None:
    script = "import sys, durq; print(durq.Durq(sys.argv[1]).store.migrate())"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, pg_url], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1
    versions = admin(f'SELECT version FROM "{schema_of(pg_url)}".schema_version ORDER BY version')
    from durq.store.postgres.connection import migration_files

    # migration numbers are assigned per feature, so the shipped ones may have gaps
    shipped = [v for v, _name, _sql in migration_files()]
    assert [v[0] for v in versions] == shipped and shipped[-1] == int(outs[0])


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    first = durq.Durq(pg_url)
    first.store.migrate()
    first.close()
    admin(f'INSERT INTO "{schema_of(pg_url)}".schema_version (version) VALUES (99)')
    with pytest.raises(durq.SchemaTooNew, match="v99"):
        durq.Durq(pg_url).store  # noqa: B018
    out = run_cli("status", "--db", pg_url)
    assert out.returncode == 1 and "upgrade durq" in out.stderr


def test_one_leader_and_a_quick_takeover_when_it_dies(pg_url: str) -> None:
    first, second = durq.Durq(pg_url), durq.Durq(pg_url)
    try:
        assert first.store.lead("reaper", stale_after=60) is True
        assert second.store.lead("reaper", stale_after=60) is False
        assert first.store.lead("reaper", stale_after=60) is True
        first.close()  # the leader's session ends: its advisory lock goes with it
        started = time.monotonic()
        wait_for(
            lambda: second.store.lead("reaper", stale_after=60), 5, 0.1, "the second store to lead"
        )
        assert time.monotonic() - started < 3
    finally:
        second.close()


def test_a_frozen_leader_is_stood_in_for(pg_url: str) -> None:
    leader, other = durq.Durq(pg_url), durq.Durq(pg_url)
    try:
        assert leader.store.lead("reaper", stale_after=1.0)
        assert not other.store.lead("reaper", stale_after=1.0)
        time.sleep(1.3)  # the leader holds its lock but stops stamping (frozen)
        assert other.store.lead("reaper", stale_after=1.0)
    finally:
        leader.close()
        other.close()


def starts_by_pid(runs: Path) -> dict[int, list[int]]:
    found: dict[int, list[int]] = defaultdict(list)
    for line in runs.read_text().splitlines():
        kind, job_id, _attempt, pid = line.split()
        if kind == "start":
            found[int(job_id)].append(int(pid))
    return found


def count(app: durq.Durq, state: str) -> int:
    """Jobs of ``state`` counted exactly (not the status snapshot's estimate)."""
    return app.store.count_jobs(JobFilter(state=state), 1_000_000)


@pytest.mark.slow
@pytest.mark.parametrize("kills", [0, 4])
def test_four_workers_on_two_hosts_drain_20000_jobs(
    tmp_path: Path, pg_url: str, kills: int
) -> None:
    """Without kills every job runs exactly once; with SIGKILLs none is lost and every
    extra run began in a killed process."""
    app = durq.Durq(pg_url)
    for _ in range(4):
        app.enqueue_many_with(
            "sleepy",
            [{"ms": 0}] * 5000,
            durq.task.EnqueueOptions(max_attempts=10),
            keys=None,
            task=None,
        )
    runs = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs)}
    args = ["--concurrency", "8", "--lease", "2", "--grace", "1"]
    procs: list[WorkerProc] = []
    killed: set[int] = set()
    rng = random.Random(kills)
    try:
        for host in ("hostA", "hostB"):
            for n in (1, 2):
                procs.append(
                    WorkerProc(
                        APP,
                        pg_url,
                        tmp_path / f"{host}-{n}.log",
                        [*args, "--worker-id", f"{host}-{n}"],
                        env,
                    )
                )
        for k in range(kills):
            time.sleep(rng.uniform(0.2, 0.8))
            victim = procs[k % 4]
            killed.add(victim.pid)
            victim.kill()
            procs[k % 4] = WorkerProc(
                APP, pg_url, tmp_path / f"re-{k}.log", [*args, "--worker-id", f"re-{k}"], env
            )
        # counted exactly (status() shows the planner's estimate above 10,000 finished)
        wait_for(lambda: count(app, "succeeded") == 20_000, 120, 0.5, "20,000 succeeded")
    finally:
        for p in procs:
            p.stop()
    assert count(app, "succeeded") == 20_000 and count(app, "failed") == 0
    starts = starts_by_pid(runs)
    assert len(starts) == 20_000
    if not kills:
        assert set(map(len, starts.values())) == {1}
        hosts = Counter(
            e["worker_id"] for p in procs for e in p.events() if e["event"] == "job_succeeded"
        )
        assert set(hosts) == {"hostA-1", "hostA-2", "hostB-1", "hostB-2"}
    else:
        extra = 0
        for pids in starts.values():
            assert len([p for p in pids if p not in killed]) <= 1
            extra += len(pids) - 1
        # a killed worker repeats at most what it held: its 8 slots and its prefetch
        assert extra <= kills * (8 + default_depth(8))


@pytest.mark.slow
def test_worker_survives_its_sessions_being_terminated(tmp_path: Path, pg_url: str) -> None:
    app = durq.Durq(pg_url)
    jobs = [app.enqueue("sleepy", {"ms": 20}) for _ in range(300)]
    name = f"durq-cut-{os.getpid()}"
    url = f"{pg_url}&application_name={name}"
    w = WorkerProc(APP, url, tmp_path / "w.log", ["--concurrency", "4", "--lease", "5"])
    try:
        # once it has registered (a worker that cannot reach the store at its first call
        # exits with that error), cut its sessions every 0.4 s: at least 4 times, and on
        # until the worker has met a cut (a session cut while idle in the pool is replaced
        # without an error)
        wait_for(lambda: any(e["event"] == "worker_started" for e in w.events()), 60, 0.02,
                 "the worker to register")  # fmt: skip
        for cut in range(100):
            time.sleep(0.4)
            admin(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'"
            )
            if cut >= 3 and any(e["event"] == "store_busy" for e in w.events()):
                break
        wait_for(
            lambda: all(app.get(j.id).state == "succeeded" for j in jobs[-20:]),
            60,
            0.2,
            "the last jobs",
        )
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=1000)) == 300, 60, 0.2, "all 300 jobs"
        )
        assert w.proc.poll() is None, "the worker must reconnect, not exit"
    finally:
        w.stop()
    assert app.jobs(state="failed") == []
    assert any(e["event"] == "store_busy" for e in w.events()), (
        "the cut should have been noticed and waited out"
    )


@pytest.mark.slow
@pytest.mark.serial
def test_worker_survives_a_server_restart(tmp_path: Path, pg_url: str) -> None:
    require_pg()
    if shutil.which("pg_ctlcluster") is None:
        pytest.skip("pg_ctlcluster is not installed")
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    app = durq.Durq(pg_url)
    jobs = [app.enqueue("sleepy", {"ms": 10}) for _ in range(200)]
    w = WorkerProc(APP, pg_url, tmp_path / "w.log", ["--concurrency", "4", "--lease", "10"])
    try:
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=1000)) >= 20, 30, 0.1, "some progress"
        )
        app.close()
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
            timeout=120,
        )
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=1000)) == 200, 90, 0.5, "all 200 jobs"
        )
        assert w.proc.poll() is None
    finally:
        w.stop()
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], timeout=120
        )
    assert all(app.get(j.id).state == "succeeded" for j in jobs)


def skewed_env(seconds: float) -> dict[str, str]:
    """The environment of a child process whose wall clock is ``seconds`` off."""
    skew_dir = ROOT / "tests" / "support" / "skew"
    return {"DURQ_TEST_CLOCK_SKEW": str(seconds), "PYTHONPATH": f"{skew_dir}{os.pathsep}{ROOT}"}


@pytest.mark.slow
def test_a_worker_with_a_skewed_clock_neither_steals_leases_nor_shifts_due_times(
    tmp_path: Path, pg_url: str
) -> None:
    """A worker whose clock is 10 minutes fast: it must not reap a live lease it would think
    expired, nor run a delayed job early, nor stretch or shrink a retry's backoff."""
    runs = tmp_path / "runs.txt"
    app = durq.Durq(pg_url)
    args = ["--concurrency", "2", "--lease", "1", "--heartbeat", "0.25"]
    honest = WorkerProc(
        APP,
        pg_url,
        tmp_path / "honest.log",
        [*args, "--worker-id", "honest"],
        {"RUNS_FILE": str(runs), "WORKER_NAME": "honest"},
    )
    skewed = None
    try:
        long_job = app.enqueue("whoami", {"ms": 3000})
        wait_for(
            lambda: app.get(long_job.id).worker_id == "honest",
            10,
            0.01,
            "the honest worker to lease",
        )
        env = {"RUNS_FILE": str(runs), "WORKER_NAME": "skewed", **skewed_env(600)}
        skewed = WorkerProc(
            APP, pg_url, tmp_path / "skewed.log", [*args, "--worker-id", "skewed"], env
        )
        probe = subprocess.run(
            [sys.executable, "-c", "import time; print(time.time())"],
            capture_output=True, text=True, env={**os.environ, **env}, check=True,
        )  # fmt: skip
        assert float(probe.stdout) - time.time() > 590  # the skew is real
        assert long_job.wait(10) == "honest"  # the skewed worker's reaper left it alone
        honest.signal(signal.SIGTERM)  # from now on only the skewed worker takes jobs
        assert honest.wait(10) == 0
        delayed = app.enqueue("whoami", {"ms": 1}, delay=2)
        due = app.enqueue("whoami", {"ms": 1})
        assert due.wait(5) == "skewed"
        time.sleep(0.5)
        assert app.get(delayed.id).state == "scheduled"  # 10 minutes ahead must not make it due
        assert delayed.wait(10) == "skewed"
        delayed.refresh()
        assert delayed.started_at is not None and delayed.started_at - delayed.created_at >= 2.0
        retried = app.enqueue("fail_once", {})
        assert retried.wait(10) == 2
        retried.refresh()
        gap = (retried.started_at or 0) - retried.errors[0].at
        assert 0.8 <= gap < 5, gap  # the 1 s backoff, on the database clock
    finally:
        honest.stop()
        if skewed is not None:
            skewed.stop()
    starts = Counter(
        line.split()[1] for line in runs.read_text().splitlines() if line.startswith("start")
    )
    assert starts[str(long_job.id)] == 1
