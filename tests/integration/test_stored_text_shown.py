"""Any text durq stores is shown by the CLI and the dashboard (branch issue/newuser).

durq accepts and round-trips a lone surrogate in a payload, a result or an error, and a
task's error is whatever text it raised. A lone surrogate made ``durq jobs list``,
``jobs show`` (``--json`` too) end in ``UnicodeEncodeError`` and every dashboard page that
listed the job answer 500; an error holding ``[/bold]`` made ``jobs list`` fail on rich
markup (``[str]`` vanished), and an ANSI escape in it reached the terminal raw.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from durq.testing import drain
from tests.support.procs import ROOT

#: A lone surrogate, rich markup that does not close, a word in brackets, an OSC title
#: escape with its bell, and a colour escape.
HOSTILE = "\ud800 [/bold] [str] \x1b]0;owned\x07 \x1b[31mred"


def run_jobs(url: str) -> None:
    dq = durq.Durq(url)

    @dq.task(max_attempts=1)
    def echo(s: str) -> str:
        return s

    @dq.task(max_attempts=1)
    def bad(s: str) -> None:
        raise ValueError(f"boom {s}")

    echo.enqueue(s=HOSTILE)
    bad.enqueue(s=HOSTILE)
    # the failure's event holds the surrogate: kept out of pytest's captured log, which
    # pytest-xdist sends between processes as UTF-8 and cannot send (CI runs with -n 3)
    events_logger = logging.getLogger("durq")
    level = events_logger.level
    events_logger.setLevel(logging.CRITICAL)
    try:
        result = drain(dq)
    finally:
        events_logger.setLevel(level)
    assert len(result.succeeded) == 1 and len(result.failed) == 1
    dq.close()


def durq_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        cwd=ROOT,
    )


def test_the_cli_shows_any_stored_text_literally(url: str) -> None:
    run_jobs(url)
    listed = durq_cli("jobs", "list", "--db", url)
    assert listed.returncode == 0, listed.stderr
    assert "[/bold] [str]" in listed.stdout  # not read as rich markup
    for out in (listed, durq_cli("jobs", "show", "2", "--db", url)):
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout
        assert "\\ud800 [/bold] [str] \\x1b]0;owned\\x07 \\x1b[31mred" in out.stdout
    shown = durq_cli("jobs", "show", "1", "--db", url)
    assert shown.returncode == 0, shown.stderr
    assert '"\\ud800 [/bold] [str] \\u001b]0;owned\\u0007 \\u001b[31mred"' in shown.stdout
    for one in ("1", "2"):
        out = durq_cli("jobs", "show", one, "--json", "--db", url)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["payload"] == {"s": HOSTILE}  # valid JSON, exact
    out = durq_cli("jobs", "list", "--json", "--db", url)
    assert out.returncode == 0, out.stderr
    assert {j["id"] for j in json.loads(out.stdout)} == {1, 2}


def test_the_dashboard_lists_and_shows_a_job_holding_a_lone_surrogate(url: str) -> None:
    pytest.importorskip("starlette")
    from durq.dashboard.app import create_app
    from tests.support.serve import Client, serving

    run_jobs(url)
    dq = durq.Durq(url)
    try:
        with serving(create_app(dq)) as base:
            c = Client(base)
            for path in ("/", "/jobs", "/failed", "/jobs/1", "/jobs/2", "/jobs?state=failed"):
                r = c.get(path)
                assert r.status_code == 200, (path, r.text[:300])
            assert "\\ud800 [/bold] [str]" in c.get("/jobs/2").text
    finally:
        dq.close()


def test_limits_shows_a_key_holding_brackets(tmp_path: Path) -> None:
    """A limit key is any text the task's ``concurrency_key`` returns; ``[/bold]`` in one
    made ``durq limits`` fail on rich markup."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    dq = durq.Durq(url)

    @dq.task(concurrency=1, concurrency_key=lambda p: p["tenant"])
    def work(tenant: str) -> None: ...

    work.enqueue(tenant="[/bold] acme [str]")
    dq.close()
    out = durq_cli("limits", "--db", url)
    assert out.returncode == 0, out.stderr
    assert "[/bold] acme [str]" in out.stdout


def test_status_json_and_api_status_carry_a_running_jobs_surrogate_progress(
    url: str, tmp_path: Path
) -> None:
    """A running job's progress message is in ``durq status`` and ``/api/status``; a lone
    surrogate in it made the first fail with ``UnicodeEncodeError`` and the second a 500."""
    pytest.importorskip("starlette")
    from durq.dashboard.app import create_app
    from tests.support.procs import WorkerProc, wait_for
    from tests.support.serve import Client, serving

    dq = durq.Durq(url)
    job = dq.enqueue("report", {"message": HOSTILE, "seconds": 60})
    worker = WorkerProc("tests.apps.texts:dq", url, tmp_path / "worker.log")
    try:
        wait_for(lambda: dq.get(job.id).progress is not None, 30, what="the progress")
        out = durq_cli("status", "--json", "--db", url)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["running"][0]["progress"]["message"] == HOSTILE
        out = durq_cli("status", "--db", url)
        assert out.returncode == 0, out.stderr
        assert "\\ud800 [/bold] [str] \\x1b]0;owned" in out.stdout
        with serving(create_app(dq)) as base:
            r = Client(base).get("/api/status")
            assert r.status_code == 200, r.text[:300]
            assert r.json()["running"][0]["progress"]["message"] == HOSTILE
    finally:
        worker.kill()
        dq.close()
