"""Verbs on jobs: ``jobs list|show``, ``retry``, ``cancel``, ``adopt`` and ``purge``."""

from __future__ import annotations

import sys
from typing import Any

import click

from durq.cli import render
from durq.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    JOB_ID,
    cli,
    db_option,
    fail,
    json_option,
    open_existing,
)
from durq.errors import DurqError
from durq.model import JobState


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


def _print_steps(steps: list[Any]) -> None:
    for s in steps:
        render.console.print(
            f"  step {s.name!r} (attempt {s.attempt}, {render.when(s.created_at)}): "
            f"{s.result[:200]}",
            highlight=False,
            markup=False,
        )


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
    """Cancel queued, scheduled, running or parked jobs (a running job's lease is revoked;
    its worker's outcome is discarded)."""
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
                click.echo(f"durq: error: {shown}", err=True)
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
