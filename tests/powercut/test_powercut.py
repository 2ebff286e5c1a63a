"""Power cuts on a FUSE filesystem that drops every write not made durable (the CI's
short version of ``make powercut``; see :mod:`tests.powercut.cuts`).

Skips with the reason when FUSE cannot be used here (no /dev/fuse, no fusermount, no
libfuse 2 for fusepy); under CI=true ``.ci/run`` installs what it can first, and a skip
is then a failure: the guarantee must be tested.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import IN_CI

pytestmark = pytest.mark.slow


def fuse_missing() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount") is None:
        return "no fusermount (Debian: apt-get install fuse3)"
    try:
        import fuse  # noqa: F401  (fusepy, which loads libfuse 2)
    except (ImportError, OSError) as exc:
        return f"fusepy cannot load libfuse 2 ({exc}; Debian: apt-get install libfuse2)"
    return None


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    reason = fuse_missing()
    if reason:
        if IN_CI:
            pytest.fail(f"the power-cut test cannot run under CI: {reason}")
        pytest.skip(reason)
    return tmp_path


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_power_cuts_lose_nothing_acknowledged_and_never_corrupt(workdir: Path, sync: str) -> None:
    from tests.powercut.cuts import CannotMount, run_cuts

    try:
        report = run_cuts(workdir, cuts=3, sync=sync, seed=13, say=lambda _line: None)
    except CannotMount as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))
    assert report.cuts == 3
    assert report.acked > 0 and report.reported > 0, report.summary()
    assert report.corrupt == 0, report.problems
    assert report.undrained == 0, report.problems
    if sync == "full":
        assert report.lost_acked == 0 and report.lost_outcomes == 0, report.problems
    else:
        assert report.not_tail == 0, report.problems
    assert report.passed, report.summary()
