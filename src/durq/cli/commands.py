"""One function per CLI verb. Each takes ``--db`` (or ``$DURQ_URL``); data verbs take ``--json``."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from durq.app import Durq
from durq.cli import render
from durq.errors import DurqError
from durq.model import JobState
from durq.observability.events import configure_json_logging
from durq.store.sqlite.connection import parse_url

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_USAGE = 2
JOB_ID = click.IntRange(min=1, max=2**63 - 1)


def db_option(fn: F) -> F:
    return click.option(
        "--db",
        "db",
        envvar="DURQ_URL",
        default="sqlite:///durq.db",
        show_default=True,
        help="Database URL or SQLite file path (or set DURQ_URL).",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"durq: error: {message}", err=True)
    sys.exit(code)


def open_existing(url: str) -> Durq:
    """A Durq on an existing database (read verbs never create a new, empty file)."""
    if "://" not in url or url.startswith("sqlite:"):
        path = parse_url(url).path
        if not Path(path).exists():
            fail(
                f"no database at {path}: nothing has created it yet (the first enqueue, "
                f"a worker or `durq migrate` does), or it lives elsewhere (give --db or "
                f"set DURQ_URL)"
            )
    return Durq(url, migrate=False)


def load_app(spec: str, url: str | None) -> Durq:
    """Import ``module:attr`` (or ``module`` with a ``dq`` attribute) from the current directory."""
    module_name, _, attr = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = ""
        if not attr and "." in module_name:
            head, _, tail = module_name.rpartition(".")
            hint = f" (did you mean {head}:{tail}? the form is MODULE:ATTR)"
        fail(f"cannot import {module_name!r}: {exc}{hint}", EXIT_USAGE)
    name = attr or "dq"
    if not hasattr(module, name):
        fail(
            f"module {module_name!r} has no attribute {name!r} (the form is MODULE:ATTR)",
            EXIT_USAGE,
        )
    app = getattr(module, name)
    if not isinstance(app, Durq):
        fail(f"{module_name}:{name} is a {type(app).__name__}, not a durq.Durq", EXIT_USAGE)
    assert isinstance(app, Durq)
    if url:
        app.url = url
    return app


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="durq")
def cli() -> None:
    """durq: a durable job queue. SQLite by default; no job is ever lost."""


@cli.command()
@click.argument("app_spec", metavar="MODULE:ATTR")
@click.option("--db", envvar="DURQ_URL", default=None, help="Override the app's database URL.")
@click.option(
    "--queues", default=None, help="Comma-separated queues (default: all the app's task queues)."
)
@click.option("--concurrency", "-c", default=10, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--lease", default=30.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds."
)
@click.option(
    "--heartbeat",
    default=None,
    type=click.FloatRange(min=0.01),
    help="Seconds between lease extensions (default: lease / 3).",
)
@click.option(
    "--grace", default=30.0, show_default=True, type=click.FloatRange(min=0), help="Seconds."
)
@click.option(
    "--free-requeues",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Shutdowns per job that hand its attempt back; later ones count as an attempt.",
)
@click.option("--worker-id", default=None, help="Unique worker id (default host:pid:random).")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
@click.option(
    "--retain",
    "retain",
    multiple=True,
    metavar="STATE=AGE",
    help="Pruner retention for a finished state, e.g. succeeded=3d, failed=90d, "
    "cancelled=forever (repeatable; defaults: succeeded 7d, failed/cancelled/expired 30d).",
)
@click.option(
    "--prune-interval",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds between pruner passes (0 turns it off).",
)
@click.option("--no-prune", is_flag=True, help="Do not run the pruner in this worker.")
def worker(
    app_spec: str,
    db: str | None,
    queues: str | None,
    concurrency: int,
    lease: float,
    heartbeat: float | None,
    grace: float,
    free_requeues: int,
    worker_id: str | None,
    log_level: str,
    retain: tuple[str, ...],
    prune_interval: float,
    no_prune: bool,
) -> None:
    """Run a worker for the tasks of MODULE:ATTR (a durq.Durq; MODULE alone means MODULE:dq).
    SIGTERM/SIGINT: graceful shutdown within --grace; a second signal exits at once.
    Events: JSON lines on stderr."""
    import logging

    configure_json_logging(level=getattr(logging, log_level.upper()))
    app = load_app(app_spec, db)
    try:
        w = app.worker(
            queues=[q for q in queues.split(",") if q] if queues else None,
            concurrency=concurrency,
            lease=lease,
            heartbeat_interval=heartbeat,
            grace=grace,
            free_requeues=free_requeues,
            worker_id=worker_id,
            retention=_retention_option(retain),
            prune_interval=None if no_prune else prune_interval,
        )
        code = w.run()
    except DurqError as exc:
        fail(str(exc))
    sys.exit(code)


@cli.command()
@click.argument("task")
@click.argument("args", nargs=-1)
@db_option
@click.option("--payload", default=None, help="The payload as a JSON object.")
@click.option("--queue", default=None)
@click.option("--delay", type=float, default=None, help="Seconds from now.")
@click.option("--priority", type=int, default=None, help="Lower runs first.")
@click.option("--key", default=None, help="Idempotency key.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=None)
@click.option(
    "--app",
    "app_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Take the task's queue, attempts and priority from this app (and check the payload).",
)
@json_option
def enqueue(
    task: str,
    args: tuple[str, ...],
    db: str,
    payload: str | None,
    queue: str | None,
    delay: float | None,
    priority: int | None,
    key: str | None,
    max_attempts: int | None,
    app_spec: str | None,
    as_json: bool,
) -> None:
    """Enqueue a job for TASK. The payload is --payload '{"k": 1}' and/or k=v pairs
    (each v parsed as JSON when it is valid JSON, else taken as a string).

    Without --app the job gets queue "default", 3 attempts and priority 0 unless the
    options say otherwise: durq does not import your code to learn the task's settings."""
    body: dict[str, Any] = {}
    if payload is not None:
        try:
            body = json.loads(payload)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            fail(f"--payload is not valid JSON: {exc}", EXIT_USAGE)
        if not isinstance(body, dict):
            fail("--payload must be a JSON object", EXIT_USAGE)
    for arg in args:
        name, sep, raw = arg.partition("=")
        if not sep or not name:
            fail(f"expected key=value, got {arg!r}", EXIT_USAGE)
        try:
            body[name] = json.loads(raw)
        except ValueError:
            body[name] = raw
        except RecursionError as exc:
            fail(f"the value of {name!r} is not usable JSON: {exc}", EXIT_USAGE)
    app = Durq(db)
    if app_spec is not None:
        app = load_app(app_spec, db)
        if task not in app.tasks:
            fail(f"{app_spec} has no task named {task!r} (known: {sorted(app.tasks)})", EXIT_USAGE)
    try:
        job = app.enqueue(
            task,
            body,
            queue=queue,
            delay=delay,
            priority=priority,
            key=key,
            max_attempts=max_attempts,
        )
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(job.to_dict())
    else:
        click.echo(f"enqueued job {job.id} ({job.task} on {job.queue}, {job.state}) in {app.url}")


@cli.command()
@db_option
@json_option
def status(db: str, as_json: bool) -> None:
    """Counts per queue and state, oldest queued age, backoff, stranded jobs, workers, reaper."""
    try:
        snap = open_existing(db).status()
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(snap)
    else:
        render.status_table(snap)
        _print_running(snap.get("running") or [])


@cli.group()
def jobs() -> None:
    """List and show jobs."""


@jobs.command("list")
@db_option
@click.option(
    "--state",
    default=None,
    type=click.Choice([s.value for s in JobState]),  # the stored states and "scheduled"
)
@click.option("--queue", default=None)
@click.option("--task", default=None)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1, max=2**63 - 1))
@json_option
def jobs_list(
    db: str, state: str | None, queue: str | None, task: str | None, limit: int, as_json: bool
) -> None:
    """Jobs, newest first."""
    try:
        found = open_existing(db).jobs(state=state, queue=queue, task=task, limit=limit)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json([j.to_dict() for j in found])
    else:
        render.jobs_table(found)


@jobs.command("show")
@click.argument("job_id", type=JOB_ID)
@db_option
@json_option
def jobs_show(job_id: int, db: str, as_json: bool) -> None:
    """One job: payload, result, progress and its whole error history."""
    try:
        app = open_existing(db)
        job = app.get(job_id)
        steps = app.steps(job_id)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json({**job.to_dict(), "steps": [s.to_dict() for s in steps]})
    else:
        render.job_detail(job)
        _print_steps(steps)


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1, required=True)
@db_option
@json_option
def retry(job_ids: tuple[int, ...], db: str, as_json: bool) -> None:
    """Re-queue failed, cancelled or expired jobs with a fresh attempt budget."""
    _steer(db, job_ids, as_json, "retry")


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1, required=True)
@db_option
@json_option
def cancel(job_ids: tuple[int, ...], db: str, as_json: bool) -> None:
    """Cancel queued, scheduled or running jobs."""
    _steer(db, job_ids, as_json, "cancel")


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1, required=True)
@db_option
@json_option
def adopt(job_ids: tuple[int, ...], db: str, as_json: bool) -> None:
    """Move parked jobs to the queue (exit 1 if one is no longer parked)."""
    _steer(db, job_ids, as_json, "adopt")


def _steer(db: str, job_ids: tuple[int, ...], as_json: bool, verb: str) -> None:
    app = open_existing(db)
    results: list[dict[str, Any]] = []
    failed = False
    for job_id in job_ids:
        try:
            job = getattr(app, verb)(job_id)
            results.append({"id": job_id, "ok": True, "state": str(job.state)})
        except DurqError as exc:
            failed = True
            results.append({"id": job_id, "ok": False, "error": str(exc)})
    if as_json:
        render.print_json(results)
    else:
        for r in results:
            error = str(r.get("error", ""))
            if r["ok"]:
                click.echo(f"job {r['id']}: {r['state']}")
            else:  # most errors name the job already
                shown = error if error.startswith(f"job {r['id']} ") else f"job {r['id']}: {error}"
                click.echo(shown, err=True)
    if failed:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.argument("queue")
@db_option
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(["succeeded", "failed", "cancelled", "expired", "queued", "running"]),
    help="Delete jobs in this state (repeatable; default: every finished state).",
)
@click.option("--yes", is_flag=True, help="Required to delete queued or running jobs.")
@json_option
def purge(queue: str, db: str, states: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Delete the jobs of QUEUE for good: by default the finished ones (succeeded, failed,
    cancelled, expired). Deleting queued (incl. scheduled) or running jobs drops work that
    was never done, so it also needs --yes."""
    chosen = list(states) or ["succeeded", "failed", "cancelled", "expired"]
    if {"queued", "running"} & set(chosen) and not yes:
        fail(
            "deleting queued or running jobs loses work that was never done; add --yes", EXIT_USAGE
        )
    try:
        deleted = open_existing(db).purge(queue, states=chosen)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json({"queue": queue, "states": chosen, "deleted": deleted})
    else:
        click.echo(f"deleted {deleted} job(s) of queue {queue!r} ({', '.join(chosen)})")


@cli.command()
@db_option
@json_option
def migrate(db: str, as_json: bool) -> None:
    """Create the database or bring its schema up to date (a backup is written first)."""
    try:
        version = Durq(db).store.migrate()
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json({"url": db, "schema_version": version})
    else:
        click.echo(f"{db}: schema at v{version}")


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
    from durq.verify import QueueNotEmpty, VerifyConfig, report_table, run_verify

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


# -- soak --


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
    as_json: bool,
) -> None:
    """Soak this database: mixed jobs (fast, slow, flaky, failing, retried, timing out,
    expiring) at a steady rate for --seconds on real workers that are SIGKILLed and SIGTERMed
    at random and restarted, with retention on. Reports throughput over time, lost jobs,
    duplicate runs, worker RSS and database size, and PASS/FAIL (docs/guarantees.md).
    Exit 0 on PASS, 1 on FAIL, 2 when the queue is not empty."""
    from durq.soak import SoakConfig, report_tables, run_soak
    from durq.verify import QueueNotEmpty

    config = SoakConfig(
        db, seconds, rate, workers, concurrency, lease, (kill_min, kill_max), retain,
        prune_interval, report_every, drain, warmup, queue, seed,
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


# -- pause and alerts --


@cli.command()
@click.argument("queue")
@click.option("--reason", required=True, help="Why (shown by durq status and alerts).")
@click.option("--source", default="admin", show_default=True, help="Who pauses.")
@db_option
@json_option
def pause(queue: str, reason: str, source: str, db: str, as_json: bool) -> None:
    """Pause QUEUE: workers claim nothing more from it; jobs already running finish.
    A queue paused already keeps its first pause (reason and source)."""
    try:
        app = open_existing(db)
        done = app.pause(queue, reason, source=source)
        info = app.paused(queue)
    except DurqError as exc:
        fail(str(exc))
    shown = None if info is None else {"reason": info.reason, "source": info.source}
    if as_json:
        render.print_json({"queue": queue, "paused": done, "pause": shown})
    elif done:
        click.echo(f"paused queue {queue!r} ({source}: {reason})")
    else:
        click.echo(
            f"queue {queue!r} was already paused ({info.source}: {info.reason})"
            if info
            else f"queue {queue!r} was already paused"
        )


@cli.command()
@click.argument("queue")
@click.option(
    "--source",
    default=None,
    help="Clear only a pause made by this source (default: any pause).",
)
@db_option
@json_option
def resume(queue: str, source: str | None, db: str, as_json: bool) -> None:
    """Resume QUEUE: workers claim from it again. Exit 1 when it was not paused (or, with
    --source, was paused by another source)."""
    try:
        app = open_existing(db)
        done = app.resume(queue, source=source)
        info = None if done else app.paused(queue)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        left = None if info is None else {"reason": info.reason, "source": info.source}
        render.print_json({"queue": queue, "resumed": done, "pause": left})
    elif done:
        click.echo(f"resumed queue {queue!r}")
    if done:
        return
    if info is None:
        fail(f"queue {queue!r} is not paused")
    else:
        fail(
            f"queue {queue!r} is paused by {info.source!r}, not {source!r} ({info.reason}); "
            "left paused"
        )


# -- batches --


@cli.group()
def batches() -> None:
    """Inspect batches (jobs enqueued inside ``with dq.batch(...)``)."""


@batches.command("show")
@click.argument("batch_id", type=JOB_ID)
@db_option
@json_option
def batches_show(batch_id: int, db: str, as_json: bool) -> None:
    """One batch: state, last outcome, members by state, meta, times its callback fired."""
    try:
        status = open_existing(db).batch_status(batch_id)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(status.to_dict())
        return
    render.console.print(
        f"[bold]batch {status.id}[/] -> {status.on_complete or '(no callback)'} "
        f"on {status.queue}: [bold]{status.state}[/]"
    )
    counts = ", ".join(f"{k} {v}" for k, v in status.counts.items()) or "none"
    for label, value in (
        ("outcome", status.outcome or "-"),
        ("fired", status.fired),
        ("members", f"{status.size}: {counts}"),
        ("meta", json.dumps(status.meta, ensure_ascii=False)[:500]),
        ("aborted", status.aborted or "-"),
        ("callback", status.callback_job_id or "-"),
        ("created", render.when(status.created_at)),
        ("sealed", render.when(status.sealed_at)),
        ("completed", render.when(status.completed_at)),
    ):
        render.console.print(f"  {label:>9}: {value}", highlight=False, markup=False)


# -- results, retention and steps --


def _retention_option(items: tuple[str, ...]) -> dict[str, float | str | None] | None:
    """``--retain STATE=AGE`` values as a worker's ``retention`` (AGE ``forever``: keep)."""
    if not items:
        return None
    out: dict[str, float | str | None] = {}
    for item in items:
        state, sep, age = item.partition("=")
        if not sep or not state or not age:
            fail(f"--retain takes STATE=AGE (e.g. succeeded=7d), not {item!r}", EXIT_USAGE)
        out[state.strip()] = None if age.strip().lower() in ("forever", "never") else age
    return out


def _print_running(running: list[dict[str, Any]]) -> None:
    if not running:
        return
    render.console.print(f"running jobs (newest {len(running)}):")
    for r in running:
        p = r.get("progress") or {}
        shown = f"{100 * float(p.get('fraction', 0)):.0f}% {p.get('message', '')}" if p else "-"
        render.console.print(
            f"  {r['id']} {r['queue']}/{r['task']} attempt {r['attempt']}: {shown}",
            highlight=False,
            markup=False,
        )


def _print_steps(steps: list[Any]) -> None:
    for s in steps:
        render.console.print(
            f"  step {s.name!r} (attempt {s.attempt}, {render.when(s.created_at)}): "
            f"{s.result[:200]}",
            highlight=False,
            markup=False,
        )


@cli.command()
@db_option
@click.option(
    "--older-than",
    default=None,
    metavar="AGE",
    help="Delete finished jobs older than AGE (90s, 15m, 12h, 7d, 2w). Default: the "
    "retention defaults (succeeded 7d; failed, cancelled, expired 30d).",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(["succeeded", "failed", "cancelled", "expired"]),
    help="Only this finished state (repeatable; default: all four).",
)
@click.option("--queue", default=None, help="Only this queue (default: every queue).")
@click.option(
    "--chunk",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows deleted per transaction.",
)
@json_option
def prune(
    db: str,
    older_than: str | None,
    states: tuple[str, ...],
    queue: str | None,
    chunk: int,
    as_json: bool,
) -> None:
    """Delete finished jobs (succeeded, failed, cancelled, expired) by age, with their steps.
    Queued, scheduled and running jobs are never deleted."""
    try:
        deleted = open_existing(db).prune(
            older_than, states=list(states) or None, queue=queue, chunk=chunk
        )
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(
            {
                "deleted": deleted,
                "older_than": older_than,
                "states": list(states) or None,
                "queue": queue,
            }
        )
    else:
        age = f"older than {older_than}" if older_than else "past the default retention"
        where = f" of queue {queue!r}" if queue else ""
        click.echo(f"deleted {deleted} finished job(s){where} {age}")


@cli.group()
def periodic() -> None:
    """Periodic schedules (@dq.periodic): what they are and where they stand."""


@periodic.command("list")
@click.option(
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:ATTR",
    help="The app whose schedules to list (MODULE alone means MODULE:dq).",
)
@click.option("--db", envvar="DURQ_URL", default=None, help="Override the app's database URL.")
@json_option
def periodic_list(app_spec: str, db: str | None, as_json: bool) -> None:
    """Each schedule of the app: name, task, cron, time zone, last slot enqueued, next slot."""
    from datetime import datetime

    from rich.table import Table

    app = load_app(app_spec, db)
    try:
        reader = open_existing(app.url)
        try:
            stored = reader.store.periodic_slots()
            now = reader.store.now()
        finally:
            reader.close()
    except DurqError as exc:
        fail(str(exc))
    rows: list[dict[str, Any]] = []
    table = Table()
    for col in ("name", "task", "cron", "tz", "last slot", "job", "next slot"):
        table.add_column(col)
    for p in app.periodics.values():
        last, job_id = stored.get(p.name, (None, None))
        upcoming = p.next_slot(max(now, last or now))
        last_local = None if last is None else datetime.fromtimestamp(last, p.tzinfo).isoformat()
        next_local = datetime.fromtimestamp(upcoming, p.tzinfo).isoformat()
        rows.append(
            {
                "name": p.name,
                "task": p.task,
                "cron": p.cron,
                "tz": p.tz,
                "queue": p.queue,
                "catch_up": p.catch_up,
                "last_slot": last,
                "last_slot_local": last_local,
                "last_job_id": job_id,
                "next_slot": upcoming,
                "next_slot_local": next_local,
            }
        )
        table.add_row(
            p.name, p.task, p.cron, p.tz, last_local or "-", str(job_id or "-"), next_local
        )
    if as_json:
        render.print_json(rows)
        return
    render.console.print(table)


@cli.command("limits")
@db_option
@json_option
def limits_verb(db: str, as_json: bool) -> None:
    """Limit keys in use: running jobs, live holds and queued jobs per key."""
    try:
        rows = open_existing(db).limits()
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(rows)
        return
    from rich.table import Table

    table = Table("limit key", "running", "held", "queued", "concurrency", box=None)
    for r in rows:
        cap = "-" if r["concurrency"] is None else str(r["concurrency"])
        table.add_row(r["name"], str(r["running"]), str(r["held"]), str(r["queued"]), cap)
    render.console.print(table if rows else "no limit keys in use")


# -- blobs --


def root_option(fn: F) -> F:
    return click.option(
        "--root",
        "root",
        envvar="DURQ_BLOB_ROOT",
        required=True,
        type=click.Path(file_okay=False),
        help="The blob store's root directory (or set DURQ_BLOB_ROOT).",
    )(fn)


def open_blobs(db: str, root: str) -> Any:
    """A BlobStore on an existing database and an existing root (nothing is created)."""
    from durq.blobs import BlobStore

    if not Path(root).is_dir():
        fail(f"no blob store at {root} (not a directory)")
    return BlobStore(open_existing(db), root)


@cli.group()
def blobs() -> None:
    """The blob store (durq.blobs): list records, collect garbage."""


@blobs.command("ls")
@db_option
@root_option
@click.option("--after", default="", help="Start after this key (paging).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@json_option
def blobs_ls(db: str, root: str, after: str, limit: int, as_json: bool) -> None:
    """Blob records by key: size, whether the bytes are here, holders, external id."""
    try:
        found = open_blobs(db, root).ls(after=after, limit=limit)
    except DurqError as exc:
        fail(str(exc))
    rows = [
        {
            "key": b.key, "size": b.size, "stored": b.stored, "present": b.present,
            "holds": b.holds, "external_id": b.external_id, "name": b.name,
            "created_at": b.created_at, "touched_at": b.touched_at,
        }
        for b in found
    ]  # fmt: skip
    if as_json:
        render.print_json(rows)
        return
    from rich.table import Table

    table = Table("key", "size", "bytes", "holds", "external id", "name", "touched")
    for r in rows:
        here = "here" if r["present"] else ("MISSING" if r["stored"] else "released")
        table.add_row(
            r["key"][:16], str(r["size"]), here, str(r["holds"]), r["external_id"] or "",
            r["name"] or "", render.when(r["touched_at"]),
        )  # fmt: skip
    render.console.print(table)


@blobs.command("gc")
@db_option
@root_option
@click.option(
    "--grace",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds: spare blobs touched, and files written, more recently than this.",
)
@json_option
def blobs_gc(db: str, root: str, grace: float, as_json: bool) -> None:
    """Release blobs nothing holds, delete their bytes, and delete files nothing records
    (left by crashes). Safe to run beside live processes and other collectors."""
    try:
        summary = open_blobs(db, root).gc(grace=grace)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(summary.as_dict())
    else:
        click.echo(" ".join(f"{k}={v}" for k, v in summary.as_dict().items()))


def main() -> None:
    """Console-script entry point."""
    try:
        cli(standalone_mode=True)
    except DurqError as exc:  # anything a verb did not catch itself
        fail(str(exc))
