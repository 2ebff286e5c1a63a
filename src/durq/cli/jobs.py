"""Verbs on jobs: ``jobs list|show|tree``, ``retry``, ``cancel``, ``adopt`` and ``purge``."""

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
from durq.observability import views


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
@click.option("--tag", default=None, help="Only jobs with this tag (options(tags=[...])).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1, max=2**63 - 1))
@json_option
def jobs_list(
    db: str,
    state: str | None,
    queue: str | None,
    task: str | None,
    tag: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Jobs, newest first."""
    try:
        found = open_existing(db).jobs(state=state, queue=queue, task=task, limit=limit, tag=tag)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json([j.to_dict() for j in found])
    elif not found:  # an empty table's frame said nothing; `jobs list --state failed` is
        # the README's dead-letter check, where "none" is the answer hoped for
        filters = [f"{k}={v}" for k, v in (("state", state), ("queue", queue), ("task", task),
                                           ("tag", tag)) if v is not None]  # fmt: skip
        click.echo("no jobs" + (f" with {', '.join(filters)}" if filters else ""))
    else:
        render.jobs_table(found)


@jobs.command("show")
@click.argument("job_id", type=JOB_ID)
@db_option
@json_option
def jobs_show(job_id: int, db: str, as_json: bool) -> None:
    """One job: payload, result, progress, tags, parents and children, its whole error
    history with tracebacks, and why it is not running now."""
    try:
        app = open_existing(db)
        job = app.get(job_id)
        steps = app.steps(job_id)
        record = app.store.get(job_id)
        why = views.why(app.store, record) if record is not None else None
        links: dict[str, list[Any]] = {
            "tags": list(job.tags),
            "parents": list(job.parents),
            "children": list(job.children),
        }
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        shown = {**job.to_dict(), **links, "steps": [s.to_dict() for s in steps]}
        shown["why"] = why.to_dict() if why else None
        shown["attempts"] = views.attempts(job)
        render.print_json(shown)
    else:
        render.job_detail(job)
        for label in ("tags", "parents", "children"):  # only those that apply
            if links[label]:
                listed = ", ".join(str(v) for v in links[label])
                render.console.print(f"  {label:>9}: {listed}", highlight=False, markup=False)
        if why is not None:
            render.console.print(f"  {'why':>9}: {why.sentence}", highlight=False, markup=False)
        _print_steps(steps)


def _print_steps(steps: list[Any]) -> None:
    for s in steps:
        render.console.print(
            f"  step {s.name!r} (attempt {s.attempt}, {render.when(s.created_at)}): "
            f"{s.result[:200]}",
            highlight=False,
            markup=False,
        )


TAG_OPTION = click.option(
    "--tag", default=None, help="Every job with this tag (instead of, or besides, JOB_IDS)."
)

#: The states each bulk verb applies to, for --tag.
BULK_STATES = {
    "retry": ("failed", "cancelled", "expired"),
    "cancel": ("queued", "scheduled", "running", "waiting", "parked"),
}


#: ``durq retry --state`` asks for ``--yes`` above this many matching jobs.
RETRY_CONFIRM_ABOVE = 100


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1)
@TAG_OPTION
@click.option(
    "--state",
    default=None,
    type=click.Choice(["failed", "cancelled", "expired", "succeeded"]),
    help="Every job in this state (instead of JOB_IDS), one transaction per 500.",
)
@click.option("--queue", default=None, help="With --state: only this queue.")
@click.option("--task", default=None, help="With --state: only this task.")
@click.option(
    "--yes", is_flag=True, help=f"With --state: required above {RETRY_CONFIRM_ABOVE} jobs."
)
@db_option
@json_option
def retry(
    job_ids: tuple[int, ...],
    tag: str | None,
    state: str | None,
    queue: str | None,
    task: str | None,
    yes: bool,
    db: str,
    as_json: bool,
) -> None:
    """Replay finished jobs (succeeded, failed, cancelled or expired) with a fresh attempt
    budget; their history is kept. With --state, every match: prints the count."""
    if state is None:
        if queue is not None or task is not None or yes:
            fail("--queue, --task and --yes go with --state", EXIT_USAGE)
        _steer(db, _with_tag(db, job_ids, tag, "retry"), as_json, "retry")
        return
    if job_ids or tag is not None:
        fail("give JOB_IDS / --tag or --state, not both", EXIT_USAGE)
    try:
        app = open_existing(db)
        if not yes:
            found = app.store.list_jobs(
                state=state, queue=queue, task=task, limit=RETRY_CONFIRM_ABOVE + 1
            )
            if len(found) > RETRY_CONFIRM_ABOVE:
                fail(
                    f"more than {RETRY_CONFIRM_ABOVE} {state} jobs match; nothing was retried "
                    "(add --yes to retry them all)",
                    EXIT_USAGE,
                )
        count = app.retry_where(state, queue=queue, task=task)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json({"retried": count, "state": state, "queue": queue, "task": task})
    else:
        click.echo(f"retried {count} {state} job{'' if count == 1 else 's'}")


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1)
@TAG_OPTION
@db_option
@json_option
def cancel(job_ids: tuple[int, ...], tag: str | None, db: str, as_json: bool) -> None:
    """Cancel queued, scheduled, waiting, parked or running jobs (a running job's lease is
    revoked; its worker's outcome is discarded)."""
    _steer(db, _with_tag(db, job_ids, tag, "cancel"), as_json, "cancel")


def _with_tag(db: str, job_ids: tuple[int, ...], tag: str | None, verb: str) -> tuple[int, ...]:
    """JOB_IDS plus, with --tag, the ids of the tagged jobs the verb applies to (each then
    goes through the same per-job call as a listed id)."""
    if tag is None:
        if not job_ids:
            also = ", --tag or --state" if verb == "retry" else " or --tag"
            fail(f"give job ids{also} to {verb}", EXIT_USAGE)
        return job_ids
    try:
        app = open_existing(db)
        found: list[int] = []
        for state in BULK_STATES[verb]:
            found += [j.id for j in app.jobs(state=state, tag=tag, limit=2**62)]
    except DurqError as exc:
        fail(str(exc))
    return tuple(dict.fromkeys([*job_ids, *sorted(found)]))


@cli.command()
@click.argument("job_ids", type=JOB_ID, nargs=-1, required=True)
@db_option
@json_option
def adopt(job_ids: tuple[int, ...], db: str, as_json: bool) -> None:
    """Move parked jobs to the queue (exit 1 if one is no longer parked)."""
    _steer(db, job_ids, as_json, "adopt")


def _steer(db: str, job_ids: tuple[int, ...], as_json: bool, verb: str) -> None:
    app = open_existing(db)
    if not job_ids and not as_json:
        click.echo("no job matched", err=True)
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
    was never done, so it also needs --yes. A job that a child not yet ended still waits
    for is kept (unless the child goes too), and the count kept is printed."""
    chosen = list(states) or ["succeeded", "failed", "cancelled", "expired"]
    if {"queued", "running"} & set(chosen) and not yes:
        fail(
            "deleting queued or running jobs loses work that was never done; add --yes", EXIT_USAGE
        )
    try:
        app = open_existing(db)
        deleted = app.purge(queue, states=chosen)
        held = app.store.purge_held(queue, chosen)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json({"queue": queue, "states": chosen, "deleted": deleted, "kept": held})
    else:
        click.echo(f"deleted {deleted} job(s) of queue {queue!r} ({', '.join(chosen)})")
        if held:
            click.echo(
                f"kept {held} job(s) that a child not yet ended still waits for (a fan-in "
                "takes its parents' results when it is queued); they can go once their "
                "children have ended, or cancel the children first"
            )


@jobs.command("tree")
@click.argument("job_id", type=JOB_ID)
@db_option
@json_option
def jobs_tree(job_id: int, db: str, as_json: bool) -> None:
    """The dependency graph around one job: from its roots down, each job with its task and
    state (a job with several parents is drawn once, then named "(above)")."""
    from durq.cli.graph import draw_graph, read_graph

    try:
        app = open_existing(db)
        app.get(job_id)
        graph = read_graph(app.store, job_id)
    except DurqError as exc:
        fail(str(exc))
    if as_json:
        render.print_json(graph.to_dict())
    else:
        render.console.print(draw_graph(graph, job_id))
