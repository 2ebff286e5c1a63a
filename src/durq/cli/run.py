"""Verbs that run work: ``worker`` and ``enqueue``."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NoReturn, TypeVar

import click

from durq.app import DEFAULT_URL, Durq
from durq.cli import render
from durq.cli.common import (
    EXIT_USAGE,
    cli,
    closed_at_exit,
    fail,
    json_option,
    load_app,
)
from durq.errors import DurqError
from durq.observability import events, logs
from durq.store import describe_url

F = TypeVar("F", bound=Callable[..., Any])


#: The options of ``durq worker`` that a framework's own worker command shares (all but
#: MODULE:ATTR, --db and --autoreload): ``flask durq worker``, ``manage.py durq_worker``.
WORKER_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option(
        "--queues",
        default=None,
        help="Comma-separated queues (default: all the app's task queues).",
    ),
    click.option("--concurrency", "-c", default=10, show_default=True, type=click.IntRange(min=1)),
    click.option(
        "--prefetch",
        default=None,
        type=click.IntRange(min=0),
        help="Most jobs claimed ahead of the free slots (default: 8 x concurrency, at least 64; 0: none).",
    ),
    click.option(
        "--lease", default=30.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds."
    ),
    click.option(
        "--heartbeat",
        default=None,
        type=click.FloatRange(min=0.01),
        help="Seconds between lease extensions (default: lease / 3).",
    ),
    click.option(
        "--grace", default=30.0, show_default=True, type=click.FloatRange(min=0), help="Seconds."
    ),
    click.option(
        "--free-requeues",
        default=2,
        show_default=True,
        type=click.IntRange(min=0),
        help="Shutdowns per job that hand its attempt back; later ones count as an attempt.",
    ),
    click.option(
        "--pool",
        default="threads",
        show_default=True,
        type=click.Choice(["threads", "processes"]),
        help="Where def task bodies run: threads of this process, or --concurrency long-lived "
        "child processes (async def tasks keep their event loop here).",
    ),
    click.option(
        "--max-jobs-per-child",
        default=None,
        type=click.IntRange(min=1),
        help="--pool processes: jobs a child runs before it is replaced.",
    ),
    click.option(
        "--max-memory-per-child",
        default=None,
        type=click.FloatRange(min=1),
        help="--pool processes: MB of resident memory a child may hold (measured after each "
        "job: replaced; while a job runs: killed, the job retried).",
    ),
    click.option("--worker-id", default=None, help="Unique worker id (default host:pid:random)."),
    click.option(
        "--log-level",
        default="info",
        show_default=True,
        type=click.Choice(["debug", "info", "warning", "error"]),
    ),
    click.option(
        "--log-format",
        default=None,
        type=click.Choice(["text", "json"]),
        help="text: local time, level, event, job id, task, message (default on a terminal); "
        "json: one object per line with ISO-8601 times (default otherwise).",
    ),
    click.option(
        "--metrics-port",
        default=None,
        type=click.IntRange(0, 65535),
        help="Serve this worker's own Prometheus counters on 127.0.0.1:PORT/metrics.",
    ),
    click.option("--otel", is_flag=True, help="OpenTelemetry spans for each attempt (durq[otel])."),
    click.option(
        "--retain",
        "retain",
        multiple=True,
        metavar="STATE=AGE",
        help="Pruner retention for a finished state, e.g. succeeded=3d, failed=90d, "
        "cancelled=forever (repeatable; defaults: succeeded 7d, failed/cancelled/expired 30d).",
    ),
    click.option(
        "--prune-interval",
        default=300.0,
        show_default=True,
        type=click.FloatRange(min=0),
        help="Seconds between pruner passes (0 turns it off).",
    ),
    click.option("--no-prune", is_flag=True, help="Do not run the pruner in this worker."),
    click.option(
        "--rescue-after",
        default=5.0,
        show_default=True,
        type=click.FloatRange(min=2.0),
        help="Seconds without this worker's liveness beat (one a second) after which the "
        "leader returns its jobs, before their leases expire.",
    ),
    click.option(
        "--loop-block-threshold",
        default=1.0,
        show_default=True,
        type=click.FloatRange(min=0, min_open=True),
        help="Seconds the event loop of async def tasks may run no callback before it is "
        "reported blocked (event loop_blocked, durq status).",
    ),
)


def worker_options(fn: F) -> F:
    """Give a click command every option of :data:`WORKER_OPTIONS`."""
    for option in reversed(WORKER_OPTIONS):
        fn = option(fn)
    return fn


@cli.command()
@click.argument("app_spec", metavar="MODULE:ATTR")
@click.option("--db", envvar="DURQ_URL", default=None, help="Override the app's database URL.")
@worker_options
@click.option(
    "--autoreload",
    is_flag=True,
    help="Development: restart the worker when a *.py file under the current directory "
    "changes (running jobs finish within --grace first).",
)
def worker(app_spec: str, db: str | None, autoreload: bool, **options: Any) -> None:
    """Run a worker for the tasks of MODULE:ATTR (a durq.Durq; MODULE alone means MODULE:dq).
    SIGTERM/SIGINT: graceful shutdown within --grace; a second signal exits at once.
    Events go to stderr (--log-format)."""
    if autoreload:
        from pathlib import Path

        from durq.cli.reload import supervise

        raw = sys.argv[1:]
        if "worker" not in raw:
            fail("--autoreload works from the command line (durq worker ... --autoreload)")
        argv = [a for a in raw[raw.index("worker") :] if a != "--autoreload"]
        sys.exit(supervise(argv, [Path.cwd()]))
    configure_logs(options["log_level"], options["log_format"])
    run_worker(load_app(app_spec, db), app_spec, **options)


def configure_logs(log_level: str, log_format: str | None) -> None:
    """The worker's events to stderr at ``log_level`` as ``log_format`` (None: text on a
    terminal, else JSON): :func:`durq.observability.logs.configure`."""
    logs.configure(log_format, level=getattr(logging, log_level.upper()))


def run_worker(
    app: Durq,
    name: str,
    *,
    queues: str | None,
    concurrency: int,
    prefetch: int | None,
    lease: float,
    heartbeat: float | None,
    grace: float,
    free_requeues: int,
    pool: str,
    max_jobs_per_child: int | None,
    max_memory_per_child: float | None,
    worker_id: str | None,
    log_level: str,
    log_format: str | None,
    metrics_port: int | None,
    otel: bool,
    retain: tuple[str, ...],
    prune_interval: float,
    no_prune: bool,
    rescue_after: float,
    loop_block_threshold: float,
    around: Callable[[], AbstractContextManager[Any]] | None = None,
    stop_when_idle: bool = False,
) -> NoReturn:
    """Run a worker for ``app`` with the options of :data:`WORKER_OPTIONS` (logs already
    configured: :func:`configure_logs`) and exit with its code. ``name`` names the app in
    messages (``MODULE:ATTR``); ``around`` and ``stop_when_idle`` are
    :class:`durq.worker.Worker`'s and :meth:`durq.worker.Worker.run`'s.

    Exits 2 (usage) for a bad option, 1 when the worker cannot start."""
    if otel:
        from durq.observability import tracing

        try:
            tracing.enable()
        except DurqError as exc:
            fail(str(exc), EXIT_USAGE)
        if not tracing.has_provider():
            events.emit(
                tracing.WITHOUT_PROVIDER,
                logging.WARNING,
                message="--otel, but no TracerProvider is set up in this process: spans are "
                "recorded nowhere (set one up where the tasks module is imported)",
            )
    chosen = [q for q in queues.split(",") if q] if queues else None
    used = sorted(
        {t.queue for t in app.tasks.values()}
        | {t.hook_queue for t in app.tasks.values() if t.hook_queue}
    )
    for queue in chosen or []:
        if queue not in used:
            click.echo(
                f"durq: warning: no task of {name} uses queue {queue!r} (its tasks use "
                f"{', '.join(used) or 'none'}); jobs enqueued elsewhere on it still run",
                err=True,
            )
    try:
        w = app.worker(
            queues=chosen,
            concurrency=concurrency,
            prefetch=prefetch,
            lease=lease,
            heartbeat_interval=heartbeat,
            grace=grace,
            free_requeues=free_requeues,
            worker_id=worker_id,
            retention=_retention_option(retain),
            prune_interval=None if no_prune else prune_interval,
            rescue_after=rescue_after,
            loop_block_threshold=loop_block_threshold,
            pool=pool,
            max_jobs_per_child=max_jobs_per_child,
            max_memory_per_child=max_memory_per_child,
            around=around,
        )
        if metrics_port is not None:
            from durq.worker.metrics import serve_metrics

            serve_metrics(w, metrics_port)
        code = w.run(stop_when_idle=stop_when_idle)
    except DurqError as exc:
        fail(str(exc))
    sys.exit(code)


@cli.command()
@click.argument("task")
@click.argument("args", nargs=-1)
@click.option(
    "--db",
    envvar="DURQ_URL",
    default=None,
    help="Database URL or SQLite file path (or set DURQ_URL); default: the --app's own "
    "database, else sqlite:///durq.db.",
)
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
    db: str | None,
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
    (each v parsed as JSON when it is valid JSON, else taken as a string; with --app, by
    the task's annotation: a str parameter keeps "02134" as text, an int one refuses "many").

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
    if app_spec is not None:
        app = load_app(app_spec, db)
        if task not in app.tasks:
            fail(f"{app_spec} has no task named {task!r} (known: {sorted(app.tasks)})", EXIT_USAGE)
    else:
        app = closed_at_exit(Durq(db or DEFAULT_URL))
    known = app.tasks.get(task)
    given: set[str] = set()
    for arg in args:
        name, sep, raw = arg.partition("=")
        if not sep or not name:
            fail(f"expected key=value, got {arg!r}", EXIT_USAGE)
        if name in body or name in given:  # one value per key: none silently wins
            where = "twice" if name in given else "in --payload and as key=value"
            fail(f"the payload key {name!r} is given {where}", EXIT_USAGE)
        given.add(name)
        try:
            if known is not None and name in known.typed.types:  # by the annotation
                body[name] = known.typed.from_text(name, raw)
                continue
            body[name] = json.loads(raw)
        except ValueError:
            body[name] = raw
        except RecursionError as exc:
            fail(f"the value of {name!r} is not usable JSON: {exc}", EXIT_USAGE)
        except DurqError as exc:
            fail(f"payload does not fit {task}(): {exc}")
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
        where = describe_url(app.url)  # the file's absolute path; a password masked
        click.echo(f"enqueued job {job.id} ({job.task} on {job.queue}, {job.state}) in {where}")


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
