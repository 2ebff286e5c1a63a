"""Verbs on queues: ``status``, ``pause``, ``resume`` and ``limits``."""

from __future__ import annotations

import time
from typing import Any

import click

from durq.cli import render
from durq.cli.common import cli, db_option, fail, json_option, open_existing
from durq.errors import DurqError


@cli.command()
@db_option
@json_option
@click.option("--wide", is_flag=True, help="Every state and column (needs ~150 columns).")
@click.option(
    "--watch",
    "watch",
    default=None,
    is_flag=False,
    flag_value=2.0,
    type=click.FloatRange(min=0.2),
    metavar="SECONDS",
    help="Redraw every SECONDS (default 2) until Ctrl-C.",
)
def status(db: str, as_json: bool, wide: bool, watch: float | None) -> None:
    """One row per queue: ready, scheduled, running, failed, parked, oldest queued age,
    paused (fits 80 columns); --wide for every state, backoff and stranded counts."""
    app = open_existing(db)
    while True:
        try:
            snap = app.status()
        except DurqError as exc:
            fail(str(exc))
        if watch is not None and not as_json:
            click.clear()
        if as_json:
            render.print_json(snap)
        else:
            render.status_table(snap, wide=wide)
            _print_running(snap.get("running") or [], {w["id"] for w in snap["workers"]})
        if watch is None:
            return
        try:
            time.sleep(watch)
        except KeyboardInterrupt:
            return


def _print_running(running: list[dict[str, Any]], live: set[str]) -> None:
    """The newest running jobs with their progress, then how many of them a worker that is
    not live holds (killed, crashed): they stay ``running`` until a worker's rescue gives
    them back, which needs a worker to be running."""
    if not running:
        return
    render.console.print(f"running jobs (newest {len(running)}):")
    gone = sum(1 for r in running if r.get("worker_id") not in live)
    for r in running:
        p = r.get("progress") or {}
        shown = f"{100 * float(p.get('fraction', 0)):.0f}% {p.get('message', '')}" if p else "-"
        line = f"  {r['id']} {r['queue']}/{r['task']} attempt {r['attempt']}: {shown}"
        click.echo(render.plain(line)[:80])
    if gone and live:
        click.echo(f"{gone} of them held by a worker that is gone: a live worker returns them")
        click.echo("to the queue within seconds (--rescue-after)")
    elif gone:
        click.echo(f"{gone} of them held by a worker that is gone, and no worker is live:")
        click.echo("they return to the queue when a worker starts (durq worker MODULE:APP)")


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
        table.add_row(
            render.cell(r["name"]), str(r["running"]), str(r["held"]), str(r["queued"]), cap
        )
    render.console.print(table if rows else "no limit keys in use")
