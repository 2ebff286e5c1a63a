"""Issue 15's speed rows (SQLite): a 10,000-job chain and a 10,000-wide fan-in enqueued in
one call each and drained, an encrypted payload, and the fair claim — each next to the
plain drain of the same number of jobs at the same concurrency (``drain_full_c10``)."""

from __future__ import annotations

import os
import time
from typing import Any

from bench.common import case_dir, sqlite_url
from bench.durq_app import KEY_ENV, make_app
from bench.report import Row, Section

Figures = dict[str, Any]

CONCURRENCY = 10
PLAIN = ("drain_full_c10", "rate")
#: A chain runs one step at a time whatever the concurrency: its drain is compared with the
#: plain drain at concurrency 1.
SERIAL = ("drain_full_c1", "rate")


def _drain(d: Any, url: str, n: int, tag: str, concurrency: int = CONCURRENCY) -> Figures:
    from bench.cases import drain_child

    return drain_child(d, url, concurrency, n, tag)


def chain(base: str, n: int) -> Figures:
    """``dq.chain`` of ``n`` no-op steps in one call, then one worker (concurrency 1: a
    chain has one runnable step at a time) drains it."""
    with case_dir(base, "chain") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            start = time.perf_counter()
            app.dq.chain(*(app.noop.s() for _ in range(n)))
            enqueue = time.perf_counter() - start
        finally:
            app.dq.close()
        figures = _drain(d, url, n, "chain", concurrency=1)
    return {**figures, "enqueue_seconds": enqueue, "enqueue_rate": n / enqueue, "jobs": n}


def fan_in(base: str, n: int) -> Figures:
    """``dq.group`` of ``n`` no-ops ``.then`` one more, in one call, then drained."""
    with case_dir(base, "fan-in") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            start = time.perf_counter()
            app.dq.group([app.noop.s() for _ in range(n)]).then(app.noop.s())
            enqueue = time.perf_counter() - start
        finally:
            app.dq.close()
        figures = _drain(d, url, n + 1, "fan-in")
    return {**figures, "enqueue_seconds": enqueue, "enqueue_rate": n / enqueue, "jobs": n + 1}


def encrypted(base: str, n: int, chunk: int) -> Figures:
    """The plain drain with every payload and result sealed by durq.codecs.Encrypted."""
    from durq.codecs import Encrypted

    os.environ[KEY_ENV] = Encrypted.generate_key()
    try:
        with case_dir(base, "encrypted") as d:
            url = sqlite_url(d / "jobs.db")
            app = make_app(url)
            try:
                left = n
                while left > 0:
                    size = min(chunk, left)
                    app.noop.enqueue_many([{}] * size)
                    left -= size
            finally:
                app.dq.close()
            figures = _drain(d, url, n, "encrypted")
    finally:
        del os.environ[KEY_ENV]
    return {**figures, "jobs": n}


def fair(base: str, n: int, chunk: int) -> Figures:
    """``n`` jobs of a task with ``fair_key`` over 100 tenants, drained."""
    with case_dir(base, "fair") as d:
        url = sqlite_url(d / "jobs.db")
        app = make_app(url)
        try:
            items = [{"tenant": f"t{i % 100}"} for i in range(n)]
            for i in range(0, n, chunk):
                app.fair.enqueue_many(items[i : i + chunk])
        finally:
            app.dq.close()
        figures = _drain(d, url, n, "fair")
    return {**figures, "jobs": n}


def plan(base: str, n: int, chunk: int) -> list[tuple[str, Any]]:
    return [
        ("chain", lambda: chain(base, n)),
        ("fan_in", lambda: fan_in(base, n)),
        ("encrypted", lambda: encrypted(base, n, chunk)),
        ("fair", lambda: fair(base, n, chunk)),
    ]


def section(n: int) -> Section:
    """The table: each drain within its allowance of the plain drain (issue 15)."""
    return Section(
        "workflows",
        "workflows (SQLite, FULL; next to the plain drain at the same concurrency)",
        (),
        [
            Row(f"enqueue a {n:,}-job chain in one call", "jobs/s", ("chain", "enqueue_rate")),
            Row(f"enqueue a {n:,}-wide fan-in in one call", "jobs/s", ("fan_in", "enqueue_rate")),
            Row(f"drain {n:,} plain, c1", "jobs/s", SERIAL),
            Row(
                f"drain the {n:,}-job chain, c1",
                "jobs/s",
                ("chain", "rate"),
                "within",
                0.30,
                ref=SERIAL,
            ),
            Row(f"drain {n:,} plain, c10", "jobs/s", PLAIN),
            Row(
                f"drain the {n:,}-wide fan-in",
                "jobs/s",
                ("fan_in", "rate"),
                "within",
                0.30,
                ref=PLAIN,
            ),
            Row(
                f"drain {n:,} encrypted", "jobs/s", ("encrypted", "rate"), "within", 0.20, ref=PLAIN
            ),
            Row(
                f"drain {n:,} fair (100 keys)",
                "jobs/s",
                ("fair", "rate"),
                "within",
                0.25,
                ref=PLAIN,
            ),
        ],
        "A dependency may cost at most 30 % of the plain drain rate, encryption 20 %, the "
        "fair claim 25 %.",
    )
