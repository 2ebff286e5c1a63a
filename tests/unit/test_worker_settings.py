"""Worker settings that cannot work are refused at start (issue 13, defect 4).

Before the fix ``--lease 1 --heartbeat 3`` was accepted (healthy workers lost every lease
and ran each job until its attempts ran out) and ``--lease inf`` crashed the heartbeat with
``OverflowError``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

import durq
from durq.errors import ConfigError
from tests.support.procs import ROOT


def app_with_task(make_app: Callable[..., durq.Durq]) -> durq.Durq:
    app = make_app()

    @app.task
    def noop() -> None:
        return None

    return app


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"lease": math.inf}, "lease must be a finite number of seconds above 0"),
        ({"lease": math.nan}, "lease must be a finite number"),
        ({"lease": 0}, "lease must be a finite number"),
        ({"lease": -5}, "lease must be a finite number"),
        ({"lease": 1, "heartbeat_interval": 3}, "use a heartbeat of at most 0.333333 s"),
        ({"lease": 30, "heartbeat_interval": 11}, "or a lease of at least 33 s"),
        ({"lease": 30, "heartbeat_interval": math.inf}, "heartbeat interval must be a finite"),
        ({"lease": 30, "heartbeat_interval": -1}, "heartbeat interval must be a finite"),
        ({"grace": math.inf}, "grace must be a finite number"),
        ({"grace": -1}, "grace must be a finite number"),
        ({"reap_interval": math.inf}, "reap interval must be a finite"),
        ({"poll_interval": 0}, "poll interval must be a finite"),
        ({"idle_claim_interval": math.nan}, "idle claim interval must be a finite"),
        ({"rescue_after": 1.0}, "rescue_after must be at least 2 s"),
        ({"rescue_after": math.inf}, "rescue_after must be at least 2 s"),
        ({"rescue_after": math.nan}, "rescue_after must be at least 2 s"),
        ({"loop_block_threshold": 0}, "loop_block_threshold must be > 0 s"),
        ({"loop_block_threshold": math.inf}, "loop_block_threshold must be > 0 s"),
        ({"loop_block_threshold": math.nan}, "loop_block_threshold must be > 0 s"),
    ],
)
def test_settings_that_cannot_work_are_refused(
    make_app: Callable[..., durq.Durq], kwargs: dict[str, float], says: str
) -> None:
    app = app_with_task(make_app)
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        app.worker(**kwargs)  # type: ignore[arg-type]


def test_a_heartbeat_of_a_third_of_the_lease_is_fine(make_app: Callable[..., durq.Durq]) -> None:
    app = app_with_task(make_app)
    w = app.worker(lease=0.3, heartbeat_interval=0.1)
    assert w.heartbeat_interval == 0.1
    assert app.worker(lease=9).heartbeat_interval == 3


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--lease", "1", "--heartbeat", "3"], "over a third of the lease"),
        (["--lease", "inf"], "lease must be a finite number"),
        (["--grace", "inf"], "grace must be a finite number"),
    ],
)
def test_the_cli_refuses_them_in_one_line(tmp_path: object, args: list[str], says: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "durq", "worker", "tests.apps.basic:dq", "--db",
         f"sqlite:///{tmp_path}/jobs.db", *args],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert says in out.stderr
    assert "Traceback" not in out.stderr and "OverflowError" not in out.stderr


def test_a_waited_out_store_error_says_what_the_store_answered() -> None:
    from durq.errors import StoreBusy, StoreError, StoreFull, StoreUnavailable
    from durq.worker.service import passing, wait_reason

    cases = {
        StoreBusy("database is locked"): "busy",
        StoreFull("jobs.db: disk full (SQLite: database or disk is full)"): "full",
        StoreError("database or disk is full"): "full",
        StoreUnavailable("server closed the connection"): "unavailable",
        StoreError("disk I/O error"): "io",
    }
    for exc, reason in cases.items():
        assert passing(exc) and wait_reason(exc) == reason, exc
