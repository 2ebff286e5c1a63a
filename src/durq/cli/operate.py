"""Verbs for operators: ``workers`` (live workers) and ``dashboard`` (the web dashboard)."""

from __future__ import annotations

import os
import sys

import click
from rich.table import Table

from durq.cli import render
from durq.cli.common import (
    EXIT_USAGE,
    cli,
    db_option,
    fail,
    json_option,
    load_app,
    open_existing,
)
from durq.errors import DurqError
from durq.observability import views


@cli.command()
@db_option
@json_option
def workers(db: str, as_json: bool) -> None:
    """Live workers: host, pid, pool, queues, concurrency, version, uptime, last beat, the
    jobs in hand (task and how long each has run), jobs done and failed since start."""
    try:
        rows = views.workers(open_existing(db).store)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(rows)
        return
    if not rows:
        click.echo("no live workers")
        return
    table = Table(title=f"live workers: {len(rows)}", title_justify="left")
    for col in ("worker", "pool", "queues", "busy", "done", "failed", "up", "beat"):
        table.add_column(col, justify="right" if col in ("busy", "done", "failed") else "left")
    for w in rows:
        table.add_row(
            f"{w['id']}\n{w['host']} pid {w['pid']} v{w['version']}",
            w["pool"],
            ",".join(w["queues"]),
            f"{w['busy']}/{w['concurrency']}",
            str(w["done"]),
            str(w["failed"]),
            render.ago(w["uptime"]),
            render.ago(w["last_beat_age"]) + " ago",
        )
    render.console.print(table)
    for w in rows:
        for h in w["in_hand"]:
            render.console.print(
                f"  {w['id']}: job {h['id']} {h['task']} running {render.ago(h['running_for'])}",
                highlight=False,
                markup=False,
            )


@cli.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option("--read-only", is_flag=True, help="Hide and refuse every action.")
@click.option(
    "--token",
    envvar="DURQ_DASHBOARD_TOKEN",
    default=None,
    help="Token that actions need (or set DURQ_DASHBOARD_TOKEN). Without one, actions are refused.",
)
@click.option(
    "--app",
    "app_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Import this app to show its periodic schedules' next slots.",
)
def dashboard(
    db: str, host: str, port: int, read_only: bool, token: str | None, app_spec: str | None
) -> None:
    """Serve the web dashboard (needs `pip install 'durq[dashboard]'`): overview, jobs,
    failed and parked sets, batches, schedules, limits, workers; /metrics, /healthz and
    /api/status. Binds to loopback unless --host says otherwise."""
    try:
        import uvicorn

        from durq.dashboard.app import create_app
    except ImportError as exc:
        fail(f"the dashboard needs its extra: pip install 'durq[dashboard]' ({exc})", EXIT_USAGE)
    try:
        dq = load_app(app_spec, db) if app_spec else open_existing(db)
        app = create_app(dq, token=token, read_only=read_only)
    except DurqError as exc:
        fail(str(exc))
    where = "loopback only" if host in ("127.0.0.1", "::1", "localhost") else "ALL that reach it"
    mode = (
        "read-only"
        if read_only
        else ("actions need the token" if token else "no token: actions refused")
    )
    problem = _unbindable(host, port)
    if problem is not None:  # said before "on http://...", not after it (uvicorn exits 3)
        fail(f"cannot serve the dashboard on {host}:{port}: {problem}")
    click.echo(f"durq dashboard on http://{host}:{port} ({where}; {mode})", err=True)
    sys.stdout.flush()
    uvicorn.run(
        app, host=host, port=port, log_level=os.environ.get("DURQ_DASHBOARD_LOG", "warning")
    )


def _unbindable(host: str, port: int) -> str | None:
    """Why ``host``:``port`` cannot be bound now (a port in use, an address this machine
    does not have), or None; the test socket is closed at once (``SO_REUSEADDR`` as
    uvicorn sets it, so a port in TIME_WAIT is not refused)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return str(exc)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None
