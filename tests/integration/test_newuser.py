"""What a new user following the README ran into (branch feat/newuser)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT


def test_events_logged_without_any_logging_setup_carry_their_fields(tmp_path: Path) -> None:
    """An app that configures no logging used to get bare event names on stderr
    (``alert_sent``) from Python's last-resort handler; the message now has the fields."""
    code = "import durq, sys\ndq = durq.Durq(sys.argv[1])\ndq.alert('disk:/var', 'disk 91% full')\n"
    out = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{tmp_path / 'jobs.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    assert out.stderr.strip() == 'alert_sent key="disk:/var" suppressed=0'


def test_a_plain_function_as_on_complete_says_to_make_it_a_task(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}")

    def import_finished(batch_id: int, outcome: str, counts: dict, meta: dict) -> None: ...

    with (
        pytest.raises(durq.ConfigError, match=r"decorate it with @dq\.task"),
        dq.batch(on_complete=import_finished),
    ):
        pass
    dq.close()


def test_a_read_verb_on_a_missing_database_says_what_creates_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "durq", "status", "--db", str(tmp_path / "jobs.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 1
    assert "nothing has created it yet" in out.stderr
    assert "durq migrate" in out.stderr
    assert not (tmp_path / "jobs.db").exists()
