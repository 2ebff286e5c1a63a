"""Verbs that prove the guarantees on a real database: ``verify`` and ``soak``."""

from __future__ import annotations

import sys

import click

from durq.cli import render
from durq.cli.common import EXIT_ERROR, EXIT_USAGE, cli, db_option, fail, json_option
from durq.errors import DurqError


@cli.command()
@db_option
@click.option("--jobs", default=1000, show_default=True, type=click.IntRange(min=1))
@click.option("--kills", default=5, show_default=True, type=click.IntRange(min=0), help="SIGKILLs.")
@click.option(
    "--workers", default=2, show_default=True, type=click.IntRange(min=1), help="Processes."
)
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--lease", default=2.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds."
)
@click.option("--queue", default="durq-verify", show_default=True, help="Must be empty.")
@click.option("--seed", default=None, type=int, help="Seeds job lengths and kill moments.")
@click.option(
    "--timeout",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds to wait for the jobs (default: from jobs, kills and lease).",
)
@json_option
def verify(
    db: str,
    jobs: int,
    kills: int,
    workers: int,
    concurrency: int,
    lease: float,
    queue: str,
    seed: int | None,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Prove on this database that killed workers lose no job: run --jobs jobs on real
    worker processes, SIGKILL one --kills times, and report jobs run, lost, duplicated and
    the worst recovery time. Uses its own empty --queue and removes everything it created.
    Exit 0 on PASS, 1 on FAIL, 2 when the queue is not empty."""
    from durq.proving.verify import QueueNotEmpty, VerifyConfig, report_table, run_verify

    config = VerifyConfig(db, jobs, kills, workers, concurrency, lease, queue, seed, timeout)

    def progress(line: str) -> None:
        if not as_json:
            render.console.print(line, style="dim", highlight=False, markup=False)

    try:
        report = run_verify(config, progress)
    except QueueNotEmpty as exc:
        fail(str(exc), EXIT_USAGE)
    except DurqError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted; its workers, jobs and files were removed", 130)
    if as_json:
        render.print_json(report.to_dict())
    else:
        render.console.print(report_table(report))
        style = "bold green" if report.passed else "bold red"
        render.console.print(report.summary(), style=style, highlight=False, markup=False)
    sys.exit(0 if report.passed else EXIT_ERROR)


@cli.command()
@db_option
@click.option(
    "--seconds",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="How long the producer runs (a drain follows).",
)
@click.option(
    "--rate",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Jobs enqueued per second.",
)
@click.option(
    "--workers",
    default=3,
    show_default=True,
    type=click.IntRange(min=2),
    help="Processes (worker 0 is never killed).",
)
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--lease", default=5.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds."
)
@click.option(
    "--kill-min",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Least seconds between two kills.",
)
@click.option(
    "--kill-max",
    default=25.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Most seconds between two kills.",
)
@click.option(
    "--retain",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=10),
    help="Seconds the workers' pruner keeps finished jobs.",
)
@click.option(
    "--prune-interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds between pruner passes.",
)
@click.option(
    "--report-every",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds between progress lines.",
)
@click.option(
    "--drain",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds to wait for the last jobs after the producer stops.",
)
@click.option(
    "--warmup",
    default=None,
    type=click.FloatRange(min=0),
    help="Seconds of RSS/size growth ignored (default: a quarter of --seconds, <= 60).",
)
@click.option("--queue", default="durq-soak", show_default=True, help="Must be empty.")
@click.option("--seed", default=None, type=int, help="Seeds the mix, durations and kills.")
@click.option(
    "--producers",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Producer processes, killed like the workers (0: a thread of the soak, never killed).",
)
@json_option
def soak(
    db: str,
    seconds: float,
    rate: float,
    workers: int,
    concurrency: int,
    lease: float,
    kill_min: float,
    kill_max: float,
    retain: float,
    prune_interval: float,
    report_every: float,
    drain: float,
    warmup: float | None,
    queue: str,
    seed: int | None,
    producers: int,
    as_json: bool,
) -> None:
    """Soak this database: mixed jobs (fast, slow, flaky, failing, retried, timing out,
    expiring) at a steady rate for --seconds on real workers that are SIGKILLed and SIGTERMed
    at random and restarted, with retention on. Reports throughput over time, lost jobs,
    duplicate runs, worker RSS and database size, and PASS/FAIL (docs/guarantees.md).
    Exit 0 on PASS, 1 on FAIL, 2 when the queue is not empty."""
    from durq.proving.soak import QueueNotEmpty, SoakConfig, report_tables, run_soak

    config = SoakConfig(
        db, seconds, rate, workers, concurrency, lease, (kill_min, kill_max), retain,
        prune_interval, report_every, drain, warmup, queue, seed, producers,
    )  # fmt: skip

    def progress(line: str) -> None:
        if not as_json:
            render.console.print(line, style="dim", highlight=False, markup=False)
            render.console.file.flush()  # a long run's progress must show up in logs too

    try:
        report = run_soak(config, progress)
    except QueueNotEmpty as exc:
        fail(str(exc), EXIT_USAGE)
    except DurqError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted; its workers and jobs were removed", 130)
    if as_json:
        render.print_json(report.to_dict())
    else:
        for table in report_tables(report):
            render.console.print(table)
        if report.workdir:
            render.console.print(f"worker logs and runs file kept in {report.workdir}")
        style = "bold green" if report.passed else "bold red"
        render.console.print(report.summary(), style=style, highlight=False, markup=False)
    sys.exit(0 if report.passed else EXIT_ERROR)
