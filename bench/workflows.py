"""Issue 15's speed rows (SQLite, FULL): a 10,000-job chain and a 10,000-wide fan-in
enqueued in one call each and drained, an encrypted payload, and the fair claim, each next
to a plain drain of the same number of no-op jobs at the same concurrency.

Two measurements, both in ``make bench`` (bench/README.md, "The rows of issue 15"):

* **rates, interleaved**: ``rounds`` rounds; in each, every feature's drain runs right
  after a plain drain at its concurrency (plain c1, chain, plain c10, fan-in, plain c10,
  encrypted, plain c10, fair). A feature's ratio is the median over the rounds of its rate
  ÷ the plain rate just before it, so a change in the machine's load between rounds hits
  both sides of a pair alike.
* **instructions per job**: the same drains, smaller, in one worker process under
  ``valgrind --tool=callgrind``; the counters are zeroed just before ``Worker.run`` and
  dumped when it returns (``callgrind_control``), so imports, enqueue and start-up are left
  out. The count does not depend on the machine's load.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import BenchError, Child, case_dir, median, sqlite_url
from bench.durq_app import KEY_ENV, App, make_app
from bench.report import Peer, Row, Section

Figures = dict[str, Any]


@dataclass(frozen=True)
class Feature:
    """One feature row: its drain and the plain drain it is compared with."""

    name: str
    label: str
    concurrency: int
    bound: float  # the most it may cost, as a fraction of the plain drain rate


#: A chain has one runnable step at a time whatever the concurrency: it is compared with
#: the plain drain at concurrency 1; the others at durq's usual 10.
FEATURES = (
    Feature("chain", "the {n:,}-job chain (c1)", 1, 0.30),
    Feature("fan_in", "the {n:,}-wide fan-in (c10)", 10, 0.30),
    Feature("encrypted", "{n:,} encrypted (c10)", 10, 0.20),
    Feature("fair", "{n:,} fair, 100 keys (c10)", 10, 0.25),
)


def fill(name: str, app: App, n: int, chunk: int) -> tuple[int, float]:
    """Enqueue case ``name``'s jobs; returns (the jobs to drain, seconds the enqueue took)."""
    start = time.perf_counter()
    if name == "chain":  # one call: n steps, each after the one before
        app.dq.chain(*(app.noop.s() for _ in range(n)))
        return n, time.perf_counter() - start
    if name == "fan_in":  # one call: n parents and the job that runs after all of them
        app.dq.group([app.noop.s() for _ in range(n)]).then(app.noop.s())
        return n + 1, time.perf_counter() - start
    for i in range(0, n, chunk):
        size = min(chunk, n - i)
        if name == "fair":
            app.fair.enqueue_many([{"tenant": f"t{j % 100}"} for j in range(i, i + size)])
        else:  # plain, and encrypted (the codec is the app's, from KEY_ENV)
            app.noop.enqueue_many([{}] * size)
    return n, time.perf_counter() - start


@contextlib.contextmanager
def keyed(name: str) -> Iterator[None]:
    """For the encrypted case: a fresh key in KEY_ENV (the parent's app and the worker
    child both read it), removed afterwards."""
    if name != "encrypted":
        yield
        return
    from durq.codecs import Encrypted

    os.environ[KEY_ENV] = Encrypted.generate_key()
    try:
        yield
    finally:
        del os.environ[KEY_ENV]


def run(base: str, name: str, n: int, chunk: int, concurrency: int) -> Figures:
    """Enqueue case ``name`` in a fresh database and time one worker process draining it."""
    from bench.cases import drain_child

    with keyed(name), case_dir(base, name) as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            jobs, seconds = fill(name, app, n, chunk)
        finally:
            app.dq.close()
        figures = drain_child(d, url, concurrency, jobs, name)
    return {**figures, "jobs": jobs, "enqueue_seconds": seconds, "enqueue_rate": n / seconds}


def serial_floor(base: str, n: int) -> float:
    """The raw-SQL floor for a chain: ``n`` claim-and-complete cycles of one job per
    transaction on durq's schema (bench/floor.py), the most a drain can do when each job
    becomes runnable only once the one before it has committed."""
    import sqlite3

    from bench.floor import INSERT, _drain

    with case_dir(base, "serial-floor") as d:
        app = make_app(sqlite_url(d / "jobs.db"))
        app.dq.store.migrate()
        app.dq.close()
        conn = sqlite3.connect(d / "jobs.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            for _ in range(n):
                now = time.time()
                conn.execute(INSERT, (now, now))
            conn.execute("COMMIT")
            return _drain(conn, n, 1)
        finally:
            conn.close()


def count(base: str, name: str, n: int, chunk: int, concurrency: int) -> Figures:
    """Instructions per job: the worker child under callgrind, counting only ``Worker.run``."""
    with keyed(name), case_dir(base, f"{name}-callgrind") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            jobs, _ = fill(name, app, n, chunk)
        finally:
            app.dq.close()
        out = d / "callgrind.out"
        args = ["--url", url, "--concurrency", str(concurrency), "--mode", "drain"]
        args += ["--expect", str(jobs), "--callgrind"]
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        with Child("bench.worker_proc", args, d / "worker.stderr", prefix=valgrind) as child:
            got = child.read(timeout=600 + jobs)
        if got["succeeded"] != jobs or got["pending"]:
            raise BenchError(f"worker ran {got['succeeded']} of {jobs} jobs, {got['pending']} left")
        instructions = callgrind_total(Path(f"{out}.1"))
    return {"jobs": jobs, "instructions": instructions, "per_job": instructions / jobs}


def callgrind_total(path: Path) -> int:
    """The ``summary:`` (total instructions) of a callgrind dump."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise BenchError(f"no summary line in {path}")


def measure(base: str, n: int, chunk: int, rounds: int, counted: int) -> Figures:
    """Every feature row: ``rounds`` interleaved rounds of timed drains of ``n`` jobs, then
    (when valgrind is installed and ``counted`` > 0) the instruction counts on ``counted``."""
    rates: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    enqueue: dict[str, list[float]] = {}
    for _ in range(rounds):
        for f in FEATURES:
            plain = run(base, "plain", n, chunk, f.concurrency)
            got = run(base, f.name, n, chunk, f.concurrency)
            rates.setdefault(f"plain_c{f.concurrency}", []).append(plain["rate"])
            rates.setdefault(f.name, []).append(got["rate"])
            ratios.setdefault(f.name, []).append(got["rate"] / plain["rate"])
            if f.name in ("chain", "fan_in"):
                enqueue.setdefault(f.name, []).append(got["enqueue_rate"])
            if f.name == "chain":
                rates.setdefault("serial_floor", []).append(serial_floor(base, n))
    out: Figures = {"jobs": n, "rounds": rounds, "all_rates": rates, "all_ratios": ratios}
    for key, values in rates.items():
        out[f"{key}_rate"] = median(values)
    for f in FEATURES:
        out[f"{f.name}_ratio"] = median(ratios[f.name])
        out[f"{f.name}_plain_rate"] = out[f"plain_c{f.concurrency}_rate"]
    for key, values in enqueue.items():
        out[f"{key}_enqueue_rate"] = median(values)
    if counted > 0 and shutil.which("valgrind") and shutil.which("callgrind_control"):
        out["counted_jobs"] = counted
        plain_per_job: dict[int, float] = {}
        for f in FEATURES:
            c = f.concurrency
            if c not in plain_per_job:
                plain_per_job[c] = count(base, "plain", counted, chunk, c)["per_job"]
                out[f"plain_c{c}_instr"] = plain_per_job[c]
            per_job = count(base, f.name, counted, chunk, c)["per_job"]
            out[f"{f.name}_instr"] = per_job
            out[f"{f.name}_plain_instr"] = plain_per_job[c]
            out[f"{f.name}_instr_ratio"] = plain_per_job[c] / per_job  # as a rate would be
    else:
        out["counted_jobs"] = 0  # valgrind missing: no instruction rows
    return out


def plan(base: str, sizes: Any) -> list[tuple[str, Callable[[], Figures]]]:
    return [
        (
            "workflows",
            lambda: measure(
                base, sizes.drain, sizes.chunk, sizes.workflow_rounds, sizes.workflow_counted
            ),
        )
    ]


PLAIN_PEER = Peer("plain", "plain drain", "plain")
FLOOR_PEER = Peer("floor1", "raw SQL, 1 job/tx", "floor 1/tx", floor=True)


def section(n: int, counted: int) -> Section:
    """The table: each feature's drain beside the plain one, the median ratio of the
    interleaved pairs and the target; then instructions per job under callgrind."""
    rows = [
        Row(f"enqueue a {n:,}-job chain in one call", "jobs/s", ("workflows", "chain_enqueue_rate")),
        Row(f"enqueue a {n:,}-wide fan-in in one call", "jobs/s",
            ("workflows", "fan_in_enqueue_rate")),
    ]  # fmt: skip
    for f in FEATURES:
        rows.append(
            Row(
                f"drain {f.label.format(n=n)}",
                "jobs/s",
                ("workflows", f"{f.name}_rate"),
                "ratio",
                1 - f.bound,
                ref=("workflows", f"{f.name}_ratio"),
                peers={
                    "plain": ("workflows", f"{f.name}_plain_rate"),
                    # a chain step cannot share its commit: the floor of one job per commit
                    "floor1": ("workflows", "serial_floor_rate") if f.name == "chain" else None,
                },
            )
        )
    for f in FEATURES:
        rows.append(
            Row(
                f"instructions per job, {f.label.format(n=counted)}",
                "instr",
                ("workflows", f"{f.name}_instr"),
                "ratio",
                1 - f.bound,
                ref=("workflows", f"{f.name}_instr_ratio"),
                peers={"plain": ("workflows", f"{f.name}_plain_instr")},
                lower_is_better=True,
            )
        )
    return Section(
        "workflows",
        "issue 15: workflows (SQLite, FULL; each drain beside a plain drain at the same "
        "concurrency)",
        (PLAIN_PEER, FLOOR_PEER),
        rows,
        "A dependency may cost at most 30 % of the plain drain rate, encryption 20 %, the "
        "fair claim 25 %. A chain step runs only once the step before has committed, so "
        "its drain is one commit per job, while the plain drain commits a batch at a time: "
        "its other bound is the raw-SQL floor of one claim-and-complete per transaction. "
        "jobs/s rows: the median of interleaved rounds; 'vs plain' is the "
        "median of each round's feature ÷ plain. instr rows: callgrind, Worker.run only; "
        "'vs plain' is plain ÷ feature (what the rate would be if CPU bound).",
        ratio_title="vs plain",
    )
