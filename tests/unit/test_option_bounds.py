"""Options out of what the stores hold or a worker can run are refused, naming the option
and its range, before anything is written (issue 11 hardening, items 1 and 2).

Found by an adversarial pass: ``max_snoozes=2**63`` crashed the claimer at the first
snooze (and four other jobs of its grouped commit ran twice); ``timeout=True``,
``max_retry_after=inf`` were accepted, ``timeout='5'`` raised a bare TypeError,
``retry_where(chunk=1.5)`` reached the database, ``concurrency=99999999999999`` hung.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import durq
from durq.errors import ConfigError
from tests.support.procs import ROOT, wait_for
from tests.support.threads import running_worker


def noop() -> None:
    return None


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_snoozes", 2**63),
        ("max_snoozes", 2**31),
        ("max_snoozes", -1),
        ("max_snoozes", True),
        ("max_snoozes", 1.5),
        ("max_attempts", 0),
        ("max_attempts", 10**7),
        ("max_attempts", True),
        ("max_attempts", 2.5),
        ("priority", 2**31),
        ("priority", -(2**31)),
        ("priority", True),
        ("priority", 1.5),
        ("timeout", True),
        ("timeout", 1e300),
        ("timeout", math.inf),
        ("timeout", math.nan),
        ("timeout", 0),
        ("timeout", "5"),
        ("max_retry_after", math.inf),
        ("max_retry_after", True),
        ("max_retry_after", "5"),
        ("max_retry_after", -1),
        ("max_retry_after", 1e300),
        ("max_retry_after", math.nan),
    ],
)
def test_a_task_option_out_of_range_is_a_config_error(
    make_app: Callable[..., durq.Durq], option: str, value: object
) -> None:
    app = make_app()
    with pytest.raises(ConfigError, match=f"^{option} must be .* (from|to|above) ") as err:
        app.task(name="bad", **{option: value})(noop)  # type: ignore[call-overload]
    assert repr(value) in str(err.value)  # it says what it got
    assert "bad" not in app.tasks  # nothing registered


def test_the_largest_values_both_stores_hold_are_accepted(
    make_app: Callable[..., durq.Durq],
) -> None:
    app = make_app()
    task = app.task(
        name="edge",
        max_snoozes=2**31 - 1,
        max_attempts=1_000_000,
        priority=-(2**31 - 1),
        timeout=10 * 365 * 86400,
        max_retry_after=0,
    )(noop)
    assert task.max_snoozes == 2**31 - 1
    assert app.task(name="plain", max_retry_after=None, timeout=0.5)(noop).timeout == 0.5


@pytest.mark.parametrize("chunk", [math.nan, 1.5, 10**30, True, 0, "5"])
def test_retry_where_refuses_a_bad_chunk(make_app: Callable[..., durq.Durq], chunk: Any) -> None:
    app = make_app()
    app.task(name="t")(noop)
    with pytest.raises(ConfigError, match="chunk must be an int from 1 to 100000"):
        app.retry_where("failed", chunk=chunk)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"concurrency": 99999999999999}, "concurrency (pool='threads') must be an int from 1 to 10000"),
        ({"concurrency": 0}, "concurrency (pool='threads') must be an int from 1 to 10000"),
        ({"concurrency": True}, "concurrency (pool='threads') must be an int"),
        ({"concurrency": 2.5, "pool": "processes"}, "concurrency (pool='processes') must be an int from 1 to 512"),
        ({"concurrency": 513, "pool": "processes"}, "from 1 to 512, not 513"),
        ({"pool": "processes", "max_jobs_per_child": 1.5}, "max_jobs_per_child must be an int from 1"),
        ({"pool": "processes", "max_jobs_per_child": True}, "max_jobs_per_child must be an int from 1"),
        ({"pool": "processes", "max_jobs_per_child": 0}, "max_jobs_per_child must be an int from 1"),
        ({"pool": "processes", "max_memory_per_child": True}, "max_memory_per_child must be a number above 0"),
        ({"pool": "processes", "max_memory_per_child": math.nan}, "max_memory_per_child must be a number above 0"),
        ({"pool": "processes", "max_memory_per_child": 0}, "max_memory_per_child must be a number above 0"),
        ({"prefetch": 10**30}, "prefetch must be an int from 0 to 1000000"),
        ({"prefetch": 2.5}, "prefetch must be an int"),
        ({"free_requeues": 10**30}, "free_requeues must be an int from 0 to 1000"),
    ],
)  # fmt: skip
def test_worker_sizes_out_of_range_are_refused(
    make_app: Callable[..., durq.Durq], kwargs: dict[str, Any], says: str
) -> None:
    app = make_app()
    app.task(name="t")(noop)
    with pytest.raises(ConfigError) as err:
        app.worker(**kwargs)
    assert says in str(err.value)


def test_the_cli_refuses_a_huge_concurrency_at_once(tmp_path: object) -> None:
    """It used to hang on SQLite (and fail with "integer out of range" on PostgreSQL)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "durq", "worker", "tests.apps.basic:dq", "--db",
         f"sqlite:///{tmp_path}/jobs.db", "-c", "99999999999999"],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode != 0
    assert "concurrency (pool='threads') must be an int from 1 to 10000" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_retry_after_beyond_ten_years_is_cut_with_a_note(
    make_app: Callable[..., durq.Durq],
) -> None:
    """``Transient(retry_after=1e300)`` under no ``max_retry_after`` cap: run_at was 1e300;
    now the delay is cut to ten years and the attempt's error entry says so."""
    app = make_app()

    @app.task(max_retry_after=None, max_attempts=2)
    def later() -> None:
        raise durq.Transient("come back much later", retry_after=1e300)

    job_id = later.enqueue().id
    before = app.store.now()
    with running_worker(app.worker(concurrency=1)):
        wait_for(lambda: len(app.get(job_id).errors) == 1, 30, what="the first attempt")
    job = app.get(job_id)
    assert job.state in ("queued", "scheduled")
    assert before + 10 * 365 * 86400 - 60 <= job.run_at <= before + 10 * 365 * 86400 + 60
    assert "cut to 3.1536e+08 s (10 years)" in job.errors[-1].message


@pytest.mark.parametrize("snoozes", [2**31, 2**63])  # past PostgreSQL's / SQLite's integers
def test_an_unstorable_outcome_fails_only_its_own_job(
    make_any: Callable[..., durq.Durq], snoozes: int
) -> None:
    """A value past the definition checks (here ``max_snoozes`` set on the task after it)
    reaches the claimer's grouped commit: that one job fails with a clear error; the
    other jobs of the commit run once and succeed; the worker runs on. Before, the
    database refused the whole commit (OverflowError on SQLite, NumericValueOutOfRange on
    PostgreSQL), the claimer crashed and the other jobs ran again on the next worker."""
    app = make_any()
    runs: list[int] = []

    @app.task(max_snoozes=5)
    def sleepy() -> None:
        raise durq.Snooze(1)

    @app.task
    def count(n: int) -> int:
        runs.append(n)
        return n

    sleepy.max_snoozes = snoozes  # what the check at definition refuses
    bad = sleepy.enqueue().id
    good = [count.enqueue(n=i).id for i in range(8)]
    worker = app.worker(concurrency=4)
    with running_worker(worker):
        wait_for(
            lambda: (
                app.get(bad).state == "failed"
                and all(app.get(i).state == "succeeded" for i in good)
            ),
            60,
            what="every job to finish",
        )
        late = count.enqueue(n=99).id  # the worker still claims and commits
        wait_for(lambda: app.get(late).state == "succeeded", 30, what="a job after it")
    assert worker.exit_code == 0 and worker.crash_reason is None
    job = app.get(bad)
    assert job.errors[-1].type == "UnstorableOutcome"
    assert f"max_snoozes {snoozes} is not an int from 0 to 2147483647" in job.errors[-1].message
    assert sorted(runs) == [*range(8), 99]  # each ran once
    assert all(app.get(i).attempts == 1 for i in good)
