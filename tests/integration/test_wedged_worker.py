"""A wedged worker is visible (issue 13, defect 7): slots held by ``def`` bodies past their
timeout show per worker in ``durq status`` (and ``--json``). Before the fix status showed
the worker live with 0 running and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import durq
from tests.support.procs import ROOT, wait_for, workers


def status(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "durq", "status", "--db", url, *args],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip


def test_slots_held_past_their_timeout_show_per_worker(url: str, tmp_path: Path) -> None:
    producer = durq.Durq(url)
    try:
        producer.enqueue("hang", {}, queue="wedge")
        producer.enqueue("hang", {}, queue="wedge")
    finally:
        producer.close()
    spec = {"app": "tests.apps.wedged", "url": url, "log": tmp_path / "w.log",
            "args": ("--concurrency", "3", "--lease", "1.5", "--grace", "0.5")}  # fmt: skip
    with workers(spec):

        def wedged() -> int:
            out = status(url, "--json")
            if out.returncode != 0:
                return -1
            ws = json.loads(out.stdout)["workers"]
            return int(ws[0]["wedged"]) if ws else -1

        wait_for(lambda: wedged() == 2, 30, 0.3, "status to show 2 wedged slots")
        out = status(url)
        assert out.returncode == 0, out.stderr
        assert "wedged=2" in out.stdout
        assert "past their timeout" in out.stdout
