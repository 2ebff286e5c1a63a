"""Rendering CLI output: rich tables for people, JSON for programs."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from durq.job import Job
from durq.observability.status import STATES

console = Console()
if not console.is_terminal:  # pipes and logs: do not squeeze tables into 80 columns
    console = Console(width=160)


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S%z", time.localtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return str(ts)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def status_table(snap: dict[str, Any]) -> None:
    table = Table(title="durq status", title_justify="left")
    table.add_column("queue")
    for state in STATES:
        table.add_column(state, justify="right")
    for extra in ("in backoff", "stranded", "oldest queued", "paused"):
        table.add_column(extra, justify="right")
    for name, q in snap["queues"].items():
        paused = q["paused"]
        table.add_row(
            name,
            *(str(q["counts"].get(s, 0)) for s in STATES),
            str(q["in_backoff"]),
            str(q["stranded"]),
            ago(q["oldest_queued_age"]),
            f"{paused['source']}: {paused['reason']}" if paused else "",
        )
    console.print(table)
    if snap["stranded"]:
        console.print("[yellow]stranded[/] (queued; no live worker runs this task on this queue):")
        for s in snap["stranded"]:
            console.print(f"  {s['queue']}/{s['task']}: {s['jobs']} job(s)")
    workers = snap["workers"]
    console.print(f"live workers: {len(workers)}")
    for w in workers:
        wedged = w.get("wedged", 0)
        held = (
            f" [red]wedged={wedged}[/] (slots held by task bodies past their timeout)"
            if wedged
            else ""
        )
        console.print(
            f"  {w['id']} queues={','.join(w['queues'])} seen {ago(w['last_seen_age'])} ago{held}"
        )
    reap = snap["last_reap"]
    if reap:
        console.print(
            f"last reaper pass: {when(reap['at'])}: recovered {reap['recovered']}, failed {reap['failed']}"
        )


def jobs_table(jobs: list[Job]) -> None:
    table = Table()
    for col in ("id", "queue", "task", "state", "attempts", "run at", "last error"):
        table.add_column(col)
    for job in jobs:
        err = job.last_error
        table.add_row(
            str(job.id),
            job.queue,
            job.task,
            str(job.state),
            f"{job.attempts}/{job.max_attempts}",
            when(job.run_at),
            f"{err.type}: {err.message}"[:80] if err else "",
        )
    console.print(table)


def job_detail(job: Job) -> None:
    """One job, showing only what applies to it: no deadline rows for a job without one, no
    worker before it ran, no progress once it succeeded (``--json`` has every field)."""
    d = job.to_dict()
    console.print(f"[bold]job {job.id}[/] {job.task} on {job.queue}: [bold]{job.state}[/]")
    finished = job.finished_at is not None
    rows: list[tuple[str, object]] = [
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("priority", job.priority),
        ("key", job.key),
        ("created", when(job.created_at)),
        ("run at", None if job.started_at is not None else when(job.run_at)),
        ("started", job.started_at and when(job.started_at)),
        ("finished", job.finished_at and when(job.finished_at)),
        ("worker", job.worker_id),
        ("deadline", job.deadline and when(job.deadline)),
        ("notice at", None if finished else job.notice_at and when(job.notice_at)),
        ("noticed", job.noticed_at and when(job.noticed_at)),
        ("park ttl", None if finished else job.park_expires_at and when(job.park_expires_at)),
        ("batch", job.batch_id),
        ("payload", json.dumps(d["payload"], ensure_ascii=False)[:500]),
        ("meta", json.dumps(d["meta"], ensure_ascii=False) if d["meta"] is not None else None),
        (
            "progress",
            json.dumps(d["progress"], ensure_ascii=False)
            if d["progress"] and job.state != "succeeded"
            else None,
        ),
        (
            "result",
            json.dumps(d["result"], ensure_ascii=False)[:500] if d["result"] is not None else None,
        ),
    ]
    for label, value in rows:
        if value is None or value == "":
            continue
        console.print(f"  {label:>9}: {value}", highlight=False, markup=False)
    for err in job.errors:
        console.print(
            f"  attempt {err.attempt} at {when(err.at)} [{err.kind}] {err.type}: {err.message}",
            highlight=False,
            markup=False,
        )
