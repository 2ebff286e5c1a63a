"""Verbs that look after the database: ``migrate`` and ``prune``."""

from __future__ import annotations

import click

from durq.app import Durq
from durq.cli import render
from durq.cli.common import cli, db_option, fail, json_option, open_existing
from durq.errors import DurqError
from durq.store import describe_url


@cli.command()
@db_option
@json_option
def migrate(db: str, as_json: bool) -> None:
    """Create the database or bring its schema up to date (a backup is written first)."""
    try:
        version = Durq(db).store.migrate()
    except DurqError as exc:
        fail(str(exc))
    where = describe_url(db)  # never print the password of a postgresql:// URL
    if as_json:
        render.print_json({"url": where, "schema_version": version})
    else:
        click.echo(f"{where}: schema at v{version}")


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
