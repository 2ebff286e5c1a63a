"""The PostgreSQL measurements: durq and two PostgreSQL-backed peers (procrastinate,
pgqueuer) on the same server in the same run.

durq gets a fresh schema per case (``?schema=bench_<random>``), each peer a fresh
database (its migrations applied there); both are dropped afterwards, even on failure.
Child processes run under :class:`~bench.common.Child`, so they are stopped whatever
happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from bench.cases import Figures, Sizes, drain_child, fill, latency_figures, pickup_on
from bench.common import BenchError, Child, case_dir, median, paired_ratios
from bench.durq_app import make_app
from bench.pg import durq_schema, fresh_database

# -- durq ---------------------------------------------------------------------------------


def durq_enqueue_one(pg_url: str, n: int) -> Figures:
    """``n`` calls of ``noop.enqueue()`` (each one committed statement with its NOTIFY).
    Then the paired figure: durq and the raw one-row INSERT commit on the same schema
    (bench/floor.py ``PG_INSERT``, on a psycopg connection of its own) alternate in blocks
    of 50 in this process, ``n`` of each per round, 5 rounds; ``paired_ratio`` is the
    median of the rounds' durq ÷ floor rates (the load of other processes and the
    server's commit time hit both sides alike, which separate runs do not)."""
    import psycopg

    from bench.floor import PG_INSERT

    with durq_schema(pg_url) as url:
        app = make_app(url)
        try:
            _ = app.dq.store  # connect and migrate, not timed
            start = time.perf_counter()
            for _ in range(n):
                app.noop.enqueue()
            elapsed = time.perf_counter() - start
            schema = url.split("schema=", 1)[1].split("&", 1)[0]
            insert = PG_INSERT.format(s=f'"{schema}"')
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for _ in range(50):  # its statement prepared, as durq's is by now
                    conn.execute(insert)
                ratios = paired_ratios(app.noop.enqueue, lambda: conn.execute(insert), n)
        finally:
            app.dq.close()
    return {
        "rate": n / elapsed,
        "seconds": elapsed,
        "jobs": n,
        "paired_ratio": median(ratios),
        "paired_ratios": ratios,
    }


@contextlib.contextmanager
def _listening(url: str) -> Iterator[None]:
    """A session LISTENing on the schema's durq channel, its notifications read and
    dropped by a thread (as an idle worker's listener does: a NOTIFY costs the sender more
    with a listener than without, and an unread one would fill the server's queue)."""
    import psycopg

    schema = url.split("schema=", 1)[1].split("&", 1)[0]
    stop = threading.Event()
    conn = psycopg.connect(url.split("?", 1)[0], autocommit=True)
    conn.execute(f'LISTEN "durq_jobs_{schema}"')

    def drain() -> None:
        while not stop.is_set():
            for _ in conn.notifies(timeout=0.2):
                pass

    thread = threading.Thread(target=drain, name="bench-listen", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        conn.close()


def producer_rounds(
    base: str,
    pg_url: str,
    producers: int,
    processes: bool,
    sides: Mapping[str, tuple[str, Mapping[str, str]]],
    seconds: float = 1.0,
    rounds: int = 5,
) -> dict[str, list[float]]:
    """Enqueue rates of each side (name → (producer_proc mode, extra environment)), the
    sides taking turns for ``seconds`` each, ``rounds`` rounds, on one fresh schema with a
    listener. Each side is ``producers`` threads in one process, or ``producers``
    processes of one thread (``processes``). Returns each side's rate per round."""
    tag = f"{producers}{'p' if processes else 't'}"
    with case_dir(base, f"pg-producers-{tag}") as d, durq_schema(pg_url) as url:
        app = make_app(url)
        _ = app.dq.store  # migrate
        app.dq.close()
        rates: dict[str, list[float]] = {name: [] for name in sides}
        with contextlib.ExitStack() as stack, _listening(url):
            groups: dict[str, list[Child]] = {}
            for name, (mode, env) in sides.items():
                count, threads = (producers, 1) if processes else (1, producers)
                args = ["--url", url, "--mode", mode, "--threads", str(threads)]
                groups[name] = [
                    stack.enter_context(
                        Child("bench.producer_proc", args, d / f"{name}{i}.stderr", env=dict(env))
                    )
                    for i in range(count)
                ]
            for children in groups.values():
                for child in children:
                    child.read(timeout=60)
            for _ in range(rounds):
                for name, children in groups.items():
                    for child in children:
                        child.send(f"run {seconds}")
                    outs = [child.read(timeout=60 + seconds) for child in children]
                    took = max(float(out["seconds"]) for out in outs)
                    rates[name].append(sum(int(out["count"]) for out in outs) / took)
    return rates


def durq_enqueue_concurrent(
    base: str, pg_url: str, producers: int, processes: bool, seconds: float = 1.0
) -> Figures:
    """``producers`` threads of one app (its psycopg pool: 8 connections), or ``producers``
    processes of one thread, calling ``noop.enqueue()`` for ``seconds``, taking turns with
    as many producers of the raw one-row INSERT (bench/floor.py ``PG_INSERT``, no NOTIFY,
    a connection each), 5 rounds; ``paired_ratio`` is the median of the rounds' durq ÷
    floor rates. An idle listener is on the channel throughout."""
    sides = {"durq": ("durq", {}), "floor": ("floor", {})}
    rates = producer_rounds(base, pg_url, producers, processes, sides, seconds)
    ratios = [a / b for a, b in zip(rates["durq"], rates["floor"], strict=True)]
    return {
        "rate": median(rates["durq"]),
        "floor_rate": median(rates["floor"]),
        "paired_ratio": median(ratios),
        "paired_ratios": ratios,
        "producers": producers,
        "processes": processes,
    }


def durq_enqueue_many(pg_url: str, n: int, chunk: int) -> Figures:
    """``n`` jobs through ``noop.enqueue_many`` in chunks of ``chunk`` (one transaction each)."""
    with durq_schema(pg_url) as url:
        app = make_app(url)
        try:
            _ = app.dq.store
            start = time.perf_counter()
            fill(app, n, chunk)
            elapsed = time.perf_counter() - start
        finally:
            app.dq.close()
    return {"rate": n / elapsed, "seconds": elapsed, "jobs": n, "chunk": chunk}


def durq_drain(
    base: str, pg_url: str, n: int, chunk: int, workers: int, concurrency: int
) -> Figures:
    """Enqueue ``n`` no-op jobs, then drain them with ``workers`` worker processes of
    ``concurrency`` each. The children open their stores, report ``ready`` and start
    together on ``go``; the time runs from the earliest start to the latest
    ``finished_at``."""
    with case_dir(base, f"pg-drain-{workers}x{concurrency}") as d, durq_schema(pg_url) as url:
        app = make_app(url)
        try:
            fill(app, n, chunk)
            args = ["--url", url, "--concurrency", str(concurrency), "--mode", "drain"]
            args += ["--expect", str(n), "--go"]
            with contextlib.ExitStack() as stack:
                children = [
                    stack.enter_context(Child("bench.worker_proc", args, d / f"worker{i}.stderr"))
                    for i in range(workers)
                ]
                for child in children:
                    child.read(timeout=60)
                for child in children:
                    child.send("go")
                outs = [child.read(timeout=60 + n / 200) for child in children]
            done = len(app.dq.jobs(state="succeeded", limit=n + 100))
            left = sum(len(app.dq.jobs(state=s, limit=10)) for s in ("queued", "running"))
        finally:
            app.dq.close()
    codes = [out.get("exit_code") for out in outs]
    if any(code != 0 for code in codes):
        raise BenchError(f"workers exited with {codes}")
    if done != n or left:
        raise BenchError(f"{done} of {n} jobs succeeded, {left} left")
    started = min(float(out["started"]) for out in outs)
    busy = max(float(out["last_finish"]) for out in outs) - started
    returned = max(float(out["returned"]) for out in outs) - started
    return {
        "rate": n / busy,
        "seconds": busy,
        "wall_rate": n / returned,
        "jobs": n,
        "workers": workers,
        "concurrency": concurrency,
        "per_worker_jobs_seen": [out["succeeded"] for out in outs],
        "worker_rss_mb": max(out["rss_kb"] for out in outs) * 1024 / 1e6,
    }


def durq_pickup(base: str, pg_url: str, samples: int, gap: float) -> Figures:
    """The idle pickup case of the SQLite section, on PostgreSQL (LISTEN/NOTIFY wakes
    the serving worker)."""
    with case_dir(base, "pg-pickup") as d, durq_schema(pg_url) as url:
        return pickup_on(url, d, samples, gap)


def durq_profile(base: str, pg_url: str, n: int, chunk: int, concurrency: int, out: Any) -> Figures:
    """One worker process draining ``n`` jobs at ``concurrency`` with every thread under
    cProfile (stats to ``out``)."""
    with case_dir(base, "pg-profile") as d, durq_schema(pg_url) as url:
        app = make_app(url)
        try:
            fill(app, n, chunk)
        finally:
            app.dq.close()
        return drain_child(d, url, concurrency, n, "worker", profile=out)


# -- peers --------------------------------------------------------------------------------


def _peer_drain(out: Figures, n: int, what: str) -> Figures:
    if out["succeeded"] != n or out["pending"]:
        raise BenchError(f"{what} ran {out['succeeded']} of {n} jobs, {out['pending']} left")
    busy = float(out["last_finish"]) - float(out["started"])
    return {
        "drain_rate": n / busy,
        "drain_seconds": busy,
        "drain_wall_rate": n / (float(out["returned"]) - float(out["started"])),
        "consumer_rss_mb": out["rss_kb"] * 1024 / 1e6,
    }


def _batches(n: int, chunk: int) -> list[int]:
    """Chunk sizes that add up to ``n``."""
    return [min(chunk, n - i) for i in range(0, n, chunk)]


def procrastinate_case(
    base: str, pg_url: str, sizes: Sizes, concurrency: int, measure_batch: bool
) -> Figures:
    """procrastinate on a fresh database (its schema applied through
    ``schema_manager.apply_schema()``): ``defer()`` ``pg_procrastinate_jobs`` jobs one at a
    time (timed), then one worker process with ``concurrency`` drains them. With
    ``measure_batch``, ``batch_defer()`` of ``pg_enqueue_many`` jobs in chunks of ``chunk``
    is timed afterwards (those jobs are not run; the database is dropped)."""
    from bench.procrastinate_app import make_procrastinate

    n = sizes.pg_procrastinate_jobs
    figures: Figures = {"jobs": n, "concurrency": concurrency}
    with (
        case_dir(base, f"procrastinate-c{concurrency}") as d,
        fresh_database(pg_url) as url,
    ):
        p = make_procrastinate(url)
        p.app.open()
        try:
            p.app.schema_manager.apply_schema()
            start = time.perf_counter()
            for _ in range(n):
                p.noop.defer()
            figures["defer_rate"] = n / (time.perf_counter() - start)
        finally:
            p.app.close()
        args = ["--url", url, "--concurrency", str(concurrency)]
        with Child("bench.procrastinate_proc", args, d / "worker.stderr") as child:
            out = child.read(timeout=120 + n / 20)
        figures.update(_peer_drain(out, n, "procrastinate"))
        if measure_batch:
            p = make_procrastinate(url)
            p.app.open()
            try:
                start = time.perf_counter()
                for size in _batches(sizes.pg_enqueue_many, sizes.chunk):
                    p.noop.batch_defer(*({} for _ in range(size)))
                elapsed = time.perf_counter() - start
            finally:
                p.app.close()
            figures.update(
                batch_defer_rate=sizes.pg_enqueue_many / elapsed,
                batch_deferred=sizes.pg_enqueue_many,
                batch_chunk=sizes.chunk,
            )
    return figures


async def _pgqueuer_install(url: str) -> None:
    import psycopg
    from pgqueuer import PsycopgDriver, Queries

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await Queries(PsycopgDriver(conn)).install()


def pgqueuer_case(base: str, pg_url: str, sizes: Sizes) -> Figures:
    """pgqueuer on a fresh database (``Queries.install()``): ``enqueue()`` the first
    ``pg_enqueue_one`` jobs one at a time (timed), the rest of ``pg_peer_jobs`` as list
    (batch) enqueues; one consumer process drains them all (``mode=drain``). Then
    ``pg_enqueue_many`` jobs as batch enqueues of ``chunk`` are timed (not run; the
    database is dropped)."""
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
    from pgqueuer.queries import SyncQueries

    n, one = sizes.pg_peer_jobs, min(sizes.pg_enqueue_one, sizes.pg_peer_jobs)

    def batch(q: SyncQueries, size: int) -> None:
        q.enqueue(["noop"] * size, [None] * size, [0] * size)

    figures: Figures = {"jobs": n, "enqueued_one": one}
    with case_dir(base, "pgqueuer") as d, fresh_database(pg_url) as url:
        asyncio.run(_pgqueuer_install(url))
        with psycopg.connect(url, autocommit=True) as conn:
            q = SyncQueries(SyncPsycopgDriver(conn))
            start = time.perf_counter()
            for _ in range(one):
                q.enqueue("noop", None)
            figures["enqueue_one_rate"] = one / (time.perf_counter() - start)
            for size in _batches(n - one, sizes.chunk):
                batch(q, size)
        with Child("bench.pgqueuer_proc", ["--url", url], d / "consumer.stderr") as child:
            out = child.read(timeout=120 + n / 50)
        figures.update(_peer_drain(out, n, "pgqueuer"))
        with psycopg.connect(url, autocommit=True) as conn:
            q = SyncQueries(SyncPsycopgDriver(conn))
            start = time.perf_counter()
            for size in _batches(sizes.pg_enqueue_many, sizes.chunk):
                batch(q, size)
            elapsed = time.perf_counter() - start
        figures.update(
            batch_enqueue_rate=sizes.pg_enqueue_many / elapsed,
            batch_enqueued=sizes.pg_enqueue_many,
            batch_chunk=sizes.chunk,
        )
    return figures


def pgqueuer_pickup(base: str, pg_url: str, samples: int, gap: float) -> Figures:
    """pgqueuer idle pickup latency, measured like durq's: a serving consumer; one
    ``stamp`` job every ``gap`` seconds; latency = the entrypoint's start time minus the
    moment ``enqueue()`` returned (autocommit: committed)."""
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
    from pgqueuer.queries import SyncQueries

    with case_dir(base, "pgqueuer-pickup") as d, fresh_database(pg_url) as url:
        asyncio.run(_pgqueuer_install(url))
        args = ["--url", url, "--mode", "serve"]
        with (
            psycopg.connect(url, autocommit=True) as conn,
            Child("bench.pgqueuer_proc", args, d / "consumer.stderr") as child,
        ):
            q = SyncQueries(SyncPsycopgDriver(conn))
            child.read(timeout=60)
            warm = q.enqueue("stamp", None)[0]
            while int(child.read(timeout=30).get("job", -1)) != warm:
                pass
            time.sleep(0.3)
            sent: dict[int, float] = {}
            for _ in range(samples):
                job_id = q.enqueue("stamp", None)[0]
                sent[int(job_id)] = time.time()
                time.sleep(gap)
            latencies: list[float] = []
            while len(latencies) < samples:
                got = child.read(timeout=30)
                if int(got.get("job", -1)) in sent:
                    latencies.append((float(got["started"]) - sent[int(got["job"])]) * 1000)
    return latency_figures(latencies, gap)
