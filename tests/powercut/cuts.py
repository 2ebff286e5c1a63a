"""The power-cut loop: producers and workers on a database in :mod:`tests.powercut.lazyfs`,
cut at a random moment (every process SIGKILLed, then the filesystem process, so every
write not made durable by fsync is gone), "rebooted" (remounted), and checked.

After each cut: ``PRAGMA integrity_check`` must say ``ok``; under ``synchronous=FULL``
every enqueue that returned (the producers' ack files) must be present and every outcome a
worker reported as committed (its ``job_succeeded`` event) must be stored; under
``NORMAL`` only the last commits may vanish (every lost enqueue has a higher id than every
job present); then the queue must drain: every job present ends succeeded.

Run ``python -m tests.powercut.cuts --cuts 200 --sync full`` (``make powercut``); the CI
runs a few cuts from ``tests/powercut/test_powercut.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCERS = 2
WORKERS = 2


class CannotMount(Exception):
    """The FUSE filesystem could not be mounted here (the message says why)."""


@dataclass
class Report:
    sync: str
    cuts: int = 0
    acked: int = 0
    lost_acked: int = 0  # enqueues that returned, missing after a cut
    reported: int = 0
    lost_outcomes: int = 0  # outcomes a worker reported committed, missing after a cut
    not_tail: int = 0  # NORMAL: a lost commit older than one that survived
    corrupt: int = 0
    undrained: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        strict = self.sync == "full"
        lost = (self.lost_acked + self.lost_outcomes) if strict else self.not_tail
        return not (lost or self.corrupt or self.undrained)

    def summary(self) -> str:
        return (
            f"{'PASS' if self.passed else 'FAIL'}: {self.cuts} power cuts (synchronous="
            f"{self.sync}) in {self.seconds:.0f} s: {self.acked} enqueues returned, "
            f"{self.lost_acked} missing after a cut; {self.reported} outcomes reported "
            f"committed, {self.lost_outcomes} missing; {self.not_tail} losses older than a "
            f"surviving commit; {self.corrupt} failed integrity checks; {self.undrained} "
            f"cuts after which the queue did not drain"
        )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Mount:
    """One mount of the lazy filesystem over ``backing`` at ``point``."""

    def __init__(self, backing: Path, point: Path, log: Path) -> None:
        self.point = point
        self.log = open(log, "ab")  # noqa: SIM115 - closed in cut()/unmount()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.powercut.lazyfs", str(backing), str(point)],
            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=self.log,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        if line != "mounted":
            self.proc.kill()
            self.proc.wait(10)
            self.proc.stdout.close()
            self.log.close()
            raise CannotMount(f"the FUSE filesystem did not mount: see {log}")

    def cut(self) -> None:
        """The power cut: the filesystem process dies with what it holds in memory."""
        self.proc.kill()
        self.proc.wait(10)
        self._detach()

    def unmount(self) -> None:
        subprocess.run(["fusermount", "-u", str(self.point)], capture_output=True, timeout=30)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._detach()

    def _detach(self) -> None:
        # a dead FUSE server leaves "Transport endpoint is not connected": detach it always
        subprocess.run(["fusermount", "-u", "-z", str(self.point)], capture_output=True)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def _kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(10)


def _read_ids(paths: list[Path]) -> set[int]:
    ids: set[int] = set()
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip().isdigit():
                    ids.add(int(line))
    return ids


def _succeeded_events(paths: list[Path]) -> set[int]:
    ids: set[int] = set()
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by SIGKILL
            if isinstance(event, dict) and event.get("event") == "job_succeeded":
                ids.add(int(event["id"]))
    return ids


def _drain(url: str, timeout: float = 60.0) -> bool:
    """Run every job present to completion in this process; True when all succeeded."""
    sys.path.insert(0, str(ROOT))
    from tests.powercut.app import dq

    dq.url = url
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            dq.worker(concurrency=4, lease=2, grace=1).run(
                install_signals=False, stop_when_idle=True
            )
            pending = [j for j in dq.jobs(queue="cut", limit=1_000_000) if j.state != "succeeded"]
            if not pending:
                return True
            time.sleep(0.5)
        return False
    finally:
        dq.close()


def run_cuts(
    workdir: Path, cuts: int, sync: str, seed: int, say: Callable[[str], None] = print
) -> Report:
    """Run ``cuts`` power cuts on one database under ``synchronous=sync``.

    Raises:
        CannotMount: FUSE is not available here.
    """
    rng = random.Random(seed)
    backing, point = workdir / "disk", workdir / "mnt"
    backing.mkdir(parents=True, exist_ok=True)
    point.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{point / 'jobs.db'}" + ("?synchronous=normal" if sync == "normal" else "")
    report = Report(sync)
    started = time.monotonic()
    acks: list[Path] = []
    mount = Mount(backing, point, workdir / "fs.log")
    try:
        subprocess.run(
            [sys.executable, "-m", "durq", "migrate", "--db", url],
            cwd=ROOT, env=_env(), check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        for cut in range(1, cuts + 1):
            these = [workdir / f"acks-{cut}-{i}.txt" for i in range(PRODUCERS)]
            logs = [workdir / f"worker-{cut}-{i}.log" for i in range(WORKERS)]
            acks += these
            procs: list[subprocess.Popen[bytes]] = []
            try:
                for path in these:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "tests.powercut.producer", url, str(path)],
                        cwd=ROOT, env=_env(), stderr=subprocess.DEVNULL,
                    ))  # fmt: skip
                for path in logs:
                    with open(path, "wb") as err:
                        procs.append(subprocess.Popen(
                            [sys.executable, "-m", "durq", "worker", "tests.powercut.app:dq",
                             "--db", url, "--concurrency", "2", "--lease", "2", "--grace",
                             "0.5", "--no-prune"],
                            cwd=ROOT, env=_env(), stderr=err, stdout=subprocess.DEVNULL,
                        ))  # fmt: skip
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not (
                    all(p.exists() and p.stat().st_size for p in these)
                    and all(b"job_succeeded" in p.read_bytes() for p in logs)
                ):  # every producer and every worker is at work: cut in the thick of it
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.2, 2.0))
            finally:
                _kill_all(procs)  # every process dies at the same moment ...
                mount.cut()  # ... and so does what the disk had not made durable
            mount = Mount(backing, point, workdir / "fs.log")  # the reboot
            problems = check(point / "jobs.db", _read_ids(acks), _succeeded_events(logs), sync)
            report.cuts += 1
            report.acked = len(_read_ids(acks))
            report.reported += problems.reported
            report.lost_acked += problems.lost_acked
            report.lost_outcomes += problems.lost_outcomes
            report.not_tail += problems.not_tail
            report.corrupt += problems.corrupt
            if problems.lost_ids:
                # NORMAL: the lost enqueues are gone for good; do not count them again
                for path in these:
                    keep = [
                        line for line in path.read_text().splitlines()
                        if line.strip().isdigit() and int(line) not in problems.lost_ids
                    ]  # fmt: skip
                    path.write_text("".join(f"{x}\n" for x in keep))
            if not _drain(url):
                report.undrained += 1
                report.problems.append(f"cut {cut}: the queue did not drain")
            report.problems += [f"cut {cut}: {p}" for p in problems.notes]
            if cut % 10 == 0 or cut == cuts or problems.notes:
                say(f"cut {cut}: {report.summary()}")
    finally:
        mount.unmount()
    report.seconds = time.monotonic() - started
    return report


@dataclass
class CutCheck:
    reported: int = 0
    lost_acked: int = 0
    lost_outcomes: int = 0
    not_tail: int = 0
    corrupt: int = 0
    lost_ids: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def check(db: Path, acked: set[int], succeeded: set[int], sync: str) -> CutCheck:
    """What the database holds after the reboot, against what was acknowledged."""
    out = CutCheck(reported=len(succeeded))
    conn = sqlite3.connect(db, timeout=30)
    try:
        verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if verdict != "ok":
            out.corrupt = 1
            out.notes.append(f"integrity_check: {verdict}")
            return out
        states = dict(conn.execute("SELECT id, state FROM jobs").fetchall())
    finally:
        conn.close()
    missing = acked - set(states)
    lost_outcomes = {i for i in succeeded if states.get(i) != "succeeded"}
    out.lost_ids = missing
    if sync == "full":
        out.lost_acked, out.lost_outcomes = len(missing), len(lost_outcomes)
        if missing:
            out.notes.append(
                f"{len(missing)} acknowledged enqueues missing: {sorted(missing)[:10]}"
            )
        if lost_outcomes:
            out.notes.append(
                f"{len(lost_outcomes)} committed outcomes missing: {sorted(lost_outcomes)[:10]}"
            )
    else:
        out.lost_acked, out.lost_outcomes = len(missing), len(lost_outcomes)
        newest = max(states, default=0)
        older = {i for i in missing if i < newest}
        out.not_tail = len(older)
        if older:
            out.notes.append(f"lost commits older than a surviving one: {sorted(older)[:10]}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=200)
    parser.add_argument("--sync", choices=("full", "normal"), default="full")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    workdir = Path(tempfile.mkdtemp(prefix="durq-powercut-"))
    print(f"power cuts: {args.cuts}, synchronous={args.sync}, seed {seed}, in {workdir}")
    try:
        report = run_cuts(workdir, args.cuts, args.sync, seed)
    except CannotMount as exc:
        print(f"cannot run: {exc}")
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(report.summary())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
