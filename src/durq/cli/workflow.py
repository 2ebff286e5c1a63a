"""Verbs on workflow features: ``batches show``, ``periodic list`` and ``blobs ls|gc``."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import click

from durq.app import Durq
from durq.cli import render
from durq.cli.common import (
    JOB_ID,
    F,
    cli,
    closed_at_exit,
    db_option,
    fail,
    json_option,
    load_app,
    open_existing,
)
from durq.errors import DurqError
from durq.store.sqlite.connection import parse_url


@cli.group()
def batches() -> None:
    """Inspect batches (the jobs enqueued inside a `with dq.batch(...)` block)."""


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
    """Each schedule of the app and each stored in the database: name, task, cron, time
    zone, last slot enqueued, next slot, and its standing: "live" (a live worker defines
    it; the leader fires it), "orphaned" (no live worker has defined it for a while: not
    fired), "not stored" (no worker of this code has started yet), "differs" (the
    stored definition, which the leader fires, is not this app's) and "not in this app"
    (another code version defines it)."""
    from datetime import datetime

    from rich.table import Table

    from durq.model import ScheduleRecord
    from durq.periodic import from_record
    from durq.worker.scheduler import ORPHAN_AFTER, own_definitions

    app = load_app(app_spec, db)
    stored: dict[str, ScheduleRecord] = {}
    now = time.time()
    if not _sqlite_file_missing(app.url):  # schedules are in code: no database is needed
        try:
            reader = closed_at_exit(Durq(app.url, migrate=False))
            stored = {r.name: r for r in reader.store.schedules()}
            now = reader.store.now()
        except DurqError as exc:
            fail(str(exc))
    mine = {d.name: d for d in own_definitions(app)}
    rows: list[dict[str, Any]] = []
    table = Table()
    for col in ("name", "task", "cron", "tz", "last slot", "job", "next slot", "standing"):
        table.add_column(col)
    for name in sorted(set(mine) | set(stored)):
        r = stored.get(name)
        notes: list[str] = []
        p = app.periodics.get(name)
        if r is not None and r.definition is not None:
            with contextlib.suppress(DurqError):
                p = from_record(r)
            alive = r.seen_at is not None and now - r.seen_at <= ORPHAN_AFTER
            notes.append("live" if alive else "orphaned")
            if name not in mine:
                notes.append("not in this app")
            elif (mine[name].cron, mine[name].tz, mine[name].task, mine[name].definition) != (
                r.cron, r.tz, r.task, r.definition,
            ):  # fmt: skip
                notes.append("differs")
        else:
            notes.append("not stored")
        if p is None:
            continue
        last = r.last_slot if r is not None else None
        job_id = r.job_id if r is not None else None
        upcoming = p.next_slot(max(now, last or now))
        if job_id is None:  # an anchor (where the schedule started), not a slot that ran
            last = None
        if job_id is None:  # an anchor (where the schedule started), not a slot that ran
            last = None
        last_local = None if last is None else datetime.fromtimestamp(last, p.tzinfo).isoformat()
        next_local = datetime.fromtimestamp(upcoming, p.tzinfo).isoformat()
        rows.append(
            {
                "name": p.name, "task": p.task, "cron": p.cron, "tz": p.tz, "queue": p.queue,
                "catch_up": p.catch_up, "last_slot": last, "last_slot_local": last_local,
                "last_job_id": job_id, "next_slot": upcoming, "next_slot_local": next_local,
                "standing": notes, "code_version": r.code_version if r else None,
                "defined_by": r.defined_by if r else None,
                "seen_at": r.seen_at if r else None,
            }
        )  # fmt: skip
        table.add_row(
            render.cell(p.name),
            render.cell(p.task),
            p.cron,
            p.tz,
            render.when(last, p.tzinfo),  # in the schedule's own zone, as its cron reads
            str(job_id or "-"),
            render.when(upcoming, p.tzinfo),
            ", ".join(notes),
        )
    if as_json:
        render.print_json(rows)
        return
    render.console.print(table)
    for row in rows:
        if "orphaned" in row["standing"]:
            render.console.print(
                f"warning: {row['name']!r} is orphaned: no live worker has defined it for "
                f"over {ORPHAN_AFTER:g} s (last by {row['defined_by']}, "
                f"{row['code_version']}); it is not fired",
                style="yellow", highlight=False, markup=False,
            )  # fmt: skip


def _sqlite_file_missing(url: str) -> bool:
    if "://" in url and not url.startswith("sqlite:"):
        return False
    try:
        return not Path(parse_url(url).path).exists()
    except DurqError:
        return False


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
            r["key"][:16], str(r["size"]), here, str(r["holds"]),
            render.cell(r["external_id"] or ""), render.cell(r["name"] or ""),
            render.when(r["touched_at"]),
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
