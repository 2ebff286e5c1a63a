"""The Django shop (examples/django_shop) under Django's own test runner, on SQLite and
PostgreSQL, and its management commands as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import durq
from tests.conftest import require_pg
from tests.support.procs import ROOT

MANAGE = ROOT / "examples" / "django_shop" / "manage.py"


def manage(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=timeout,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_shops_own_tests_pass_under_djangos_runner(backend: str, tmp_path: Path) -> None:
    env = {"SHOP_DATA": str(tmp_path), "SHOP_DB": backend}
    if backend == "postgres":
        require_pg()
        env["SHOP_PG_NAME"] = f"shop_{uuid.uuid4().hex[:10]}"  # test_<name> is created
    out = manage("test", "orders", "--noinput", "-v", "2", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Ran 5 tests" in out.stderr and "OK" in out.stderr


def test_the_worker_command_runs_what_a_view_enqueued(tmp_path: Path) -> None:
    env = {"SHOP_DATA": str(tmp_path), "SHOP_DB": "sqlite"}
    assert manage("migrate", "-v", "0", env=env).returncode == 0
    code = (
        "import django, os; django.setup()\n"
        "from django.test import Client\n"
        "print(Client().post('/orders/', {'item': 'lamp'}).content.decode())\n"
    )
    placed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        cwd=MANAGE.parent, env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "shop_site.settings"},
    )  # fmt: skip
    assert placed.returncode == 0, placed.stderr
    job_id = json.loads(placed.stdout)["job"]
    dq = durq.Durq(f"sqlite:///{tmp_path / 'shop.sqlite3'}")
    # durq worker's own options (found by a new-user pass: it took only three, and logged
    # in another format)
    with subprocess.Popen(
        [sys.executable, str(MANAGE), "durq_worker", "--noreload", "--log-format", "json",
         "--concurrency", "3", "--no-prune"],
        env={**os.environ, **env}, stderr=subprocess.PIPE, text=True,
    ) as worker:  # fmt: skip
        try:
            assert dq.get(job_id).wait(timeout=30) == "lamp"
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=30)
            assert worker.returncode == 0, err
    lines = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    started = next(x for x in lines if x["event"] == "worker_started")
    assert "time" in started and started["concurrency"] == 3
    refused = manage("durq_worker", "--noreload", "--pool", "processes", env=env)
    assert refused.returncode == 2 and "without Django set up" in refused.stderr
    status = manage("durq", "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["queues"]["default"]["counts"]["succeeded"] == 1
    dq.close()
    time.sleep(0)


def test_a_job_after_the_database_dropped_the_workers_connection_runs(tmp_path: Path) -> None:
    """PostgreSQL ended every connection of the shop's database (a restart, a failover, an
    idle timeout). Django's connection in the worker's runner thread was then broken for
    good: every later job in that thread failed "connection already closed", since only a
    request cycle closes a broken connection. durq_worker now runs each body between two
    close_old_connections(), so the next attempt reconnects."""
    require_pg()
    import psycopg

    name = f"shop_{uuid.uuid4().hex[:10]}"
    admin = psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    env = {"SHOP_DATA": str(tmp_path), "SHOP_DB": "postgres", "SHOP_PG_NAME": name}
    dq = durq.Durq(f"postgresql://postgres@127.0.0.1:5432/{name}?schema=durq")
    try:
        assert manage("migrate", "-v", "0", env=env).returncode == 0

        def place(item: str) -> int:
            code = (
                "import django, os; django.setup()\n"
                "from django.test import Client\n"
                f"print(Client().post('/orders/', {{'item': '{item}'}}).content.decode())\n"
            )
            placed = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                cwd=MANAGE.parent,
                env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "shop_site.settings"},
            )  # fmt: skip
            assert placed.returncode == 0, placed.stderr
            return int(json.loads(placed.stdout)["job"])

        with subprocess.Popen(
            [sys.executable, str(MANAGE), "durq_worker", "--noreload", "--concurrency", "1"],
            env={**os.environ, **env}, stderr=subprocess.PIPE, text=True,
        ) as worker:  # fmt: skip
            try:
                assert dq.get(place("lamp")).wait(timeout=30) == "lamp"  # the thread's connection
                dq.close()  # this test's own connections: reopened at the next call
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                )
                job = dq.get(place("kettle"))
                assert job.wait(timeout=60) == "kettle"
                assert job.refresh().attempts <= 2  # the attempt that found it broken, at most
            finally:
                worker.send_signal(signal.SIGTERM)
                _, err = worker.communicate(timeout=30)
            assert worker.returncode == 0, err
    finally:
        dq.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
