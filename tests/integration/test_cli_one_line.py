"""The CLI fails in one line (issue 13, defect 6): an app module that raises while it is
imported (before: a 40-line traceback) and an unreachable PostgreSQL (before: about eight
lines of pool warnings, after 10 s, before durq's own line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import ROOT


def durq_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("source", "says", "line"),
    [
        ("import durq\ndq = durq.Durq()\nraise RuntimeError('boom at import')\n",
         "raised RuntimeError: boom at import", 3),
        ("import durq\n\ndef broken(:\n    pass\n", "raised SyntaxError: invalid syntax", 3),
        ("import durq\ndq = durq.Durq()\nx = {}['missing']\n", "raised KeyError: 'missing'", 3),
    ],
)  # fmt: skip
def test_an_app_that_raises_on_import_gets_one_line_and_exit_2(
    tmp_path: Path, source: str, says: str, line: int
) -> None:
    (tmp_path / "brokenapp.py").write_text(source)
    for verb in (["worker", "brokenapp:dq"], ["periodic", "list", "--app", "brokenapp:dq"]):
        out = durq_cli(tmp_path, *verb, "--db", f"sqlite:///{tmp_path / 'jobs.db'}")
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert says in lines[0]
        assert f"brokenapp.py:{line})" in lines[0]
        assert "Traceback" not in out.stderr


def test_an_unreachable_postgres_is_one_line(tmp_path: Path) -> None:
    out = durq_cli(tmp_path, "status", "--db", "postgresql://127.0.0.1:1/durq?connect_timeout=2")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("durq: error: cannot reach PostgreSQL at postgresql://127.0.0.1:1/")
    assert "Connection refused" in lines[0]
    assert "pool" not in lines[0]
