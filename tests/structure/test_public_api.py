"""The public API is what it was before the structure change (issue 10).

``api_snapshot.txt`` was written by ``python -m tests.structure.api`` on the commit before
the change; this test writes the surface again and compares. Where a parameter typed
``Durq`` is now typed by the protocol a ``Durq`` satisfies (so that the worker and the
tasks do not import the app module), callers still pass a ``Durq``: those names are read as
``Durq`` here, and only there.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("api_snapshot.txt")

#: Protocols a Durq satisfies, in the annotations where a Durq was named before.
PROTOCOLS_OF_DURQ = {"app: 'TaskApp'": "app: 'Durq'", "app: 'Registry'": "app: 'Durq'"}


def test_public_api_matches_the_snapshot() -> None:
    # In a fresh interpreter: the suite's fixtures wrap Durq.__init__ to close every app.
    now = subprocess.run(
        [sys.executable, "-m", "tests.structure.api"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for protocol, durq in PROTOCOLS_OF_DURQ.items():
        now = now.replace(protocol, durq)
    before = SNAPSHOT.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(before.splitlines(True), now.splitlines(True), "snapshot", "now")
    )
    assert now == before, f"the public API changed:\n{diff}"
