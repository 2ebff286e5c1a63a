"""Rendering CLI output: rich tables for people, JSON for programs."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, tzinfo
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from durq.job import Job
from durq.model import HOOK_TASK_PREFIX
from durq.observability import views
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


#: The one format of a point in time in the CLI's tables (``--json`` keeps epoch seconds).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S%z"


def when(ts: float | None, tz: tzinfo | None = None) -> str:
    """``ts`` (seconds since the epoch) as :data:`TIME_FORMAT` in ``tz`` (default: the local
    time zone), or ``-`` for None; a value no calendar can show is printed as it is."""
    if ts is None:
        return "-"
    try:
        if tz is None:
            return time.strftime(TIME_FORMAT, time.localtime(ts))
        return datetime.fromtimestamp(ts, tz).strftime(TIME_FORMAT)
    except (OverflowError, OSError, ValueError, TypeError):
        return str(ts)


#: Characters a terminal would act on (C0 and C1 controls but tab and newline, DEL) and lone
#: surrogates, which no UTF-8 stream can write.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def plain(text: str) -> str:
    """``text`` as a terminal shows it literally: a control character (an ANSI escape, a
    carriage return, a bell) or a lone surrogate is written as its Python escape (``\\x1b``,
    ``\\ud800``); tabs, newlines and everything else stay. Task errors and progress messages
    are any text the task chose; printed raw they could move the cursor or retitle the
    terminal, and a lone surrogate made the whole verb fail with ``UnicodeEncodeError``."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


def cell(text: str) -> Text:
    """A table cell that shows ``text`` as it is: brackets are not rich markup (an error
    ``[/bold]`` made ``jobs list`` fail, ``[str]`` vanished) and controls are escaped."""
    return Text(plain(text))


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def print_json(value: Any) -> None:
    """``value`` as indented JSON, non-ASCII text as it is but a lone surrogate (which durq
    stores and round-trips) as its ``\\uXXXX`` escape: the output stays valid UTF-8 and
    valid JSON that decodes to the stored value."""
    text = json.dumps(value, indent=2, default=str, ensure_ascii=False)
    print(_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


#: The compact status columns (the rest are under --wide or --json).
COMPACT = (("ready", "queued"), ("sched", "scheduled"), ("run", "running"), ("failed", "failed"),
           ("parked", "parked"))  # fmt: skip


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def status_table(snap: dict[str, Any], wide: bool = False) -> None:
    """``durq status``: one row per queue in 80 columns (queue, ready, scheduled, running,
    failed, parked, oldest queued age, paused); ``wide`` shows every state and the rest."""
    if wide:
        return status_wide(snap)
    header = f"{'queue':<22} {'ready':>7} {'sched':>6} {'run':>5} {'failed':>7} {'parked':>6} {'oldest':>7}  paused"
    lines = [header]
    for name, q in snap["queues"].items():
        c = _counts(q)
        paused = q["paused"]
        lines.append(
            f"{_short(name, 22):<22} {c.get('queued', 0):>7} {c.get('scheduled', 0):>6} "
            f"{c.get('running', 0):>5} {c.get('failed', 0):>7} {c.get('parked', 0):>6} "
            f"{ago(q['oldest_queued_age']):>7}  " + ("yes" if paused else "no")
        )
    if not snap["queues"]:
        lines.append("(no jobs)")
    for name, q in snap["queues"].items():
        if q["paused"]:
            p = q["paused"]
            lines.append(plain(f"paused {name} by {p['source']}: {p['reason']}"))
    workers = snap["workers"]
    lines.append(f"live workers: {len(workers)}" + _stranded_note(snap))
    for w in workers:  # a wedged worker is live but holds slots its bodies will not free
        if w.get("wedged", 0):
            lines.append(f"  {_short(w['id'], 40)}: wedged={w['wedged']} (held past their timeout)")
        if w.get("loop_blocked", 0):
            lines.append(f"  {_short(w['id'], 40)}: {_loop_note(w)}")
    reap = snap["last_reap"]
    if reap:
        lines.append(
            f"last reaper pass: {when(reap['at'])}: recovered {reap['recovered']}, failed {reap['failed']}"
        )
    for line in lines:
        print(line[:80])


def _counts(q: dict[str, Any]) -> dict[str, Any]:
    """A queue's counts, an estimated one shown as ``~N`` (PostgreSQL's big finished states)."""
    shown: dict[str, Any] = dict(q["counts"])
    for state in q.get("estimated", ()):
        shown[state] = f"~{shown.get(state, 0)}"
    return shown


def _stranded_note(snap: dict[str, Any]) -> str:
    n = sum(s["jobs"] for s in snap["stranded"])
    return f"; {n} job(s) stranded (no live worker has their task)" if n else ""


def status_wide(snap: dict[str, Any]) -> None:
    table = Table(title="durq status", title_justify="left")
    table.add_column("queue")
    queues = snap["queues"].values()
    # waiting (jobs with unfinished parents) gets a column only when some queue has any
    states = [s for s in STATES if s != "waiting" or any(q["counts"].get(s) for q in queues)]
    for state in states:
        table.add_column(state, justify="right")
    for extra in ("in backoff", "stranded", "oldest queued", "paused"):
        table.add_column(extra, justify="right")
    for name, q in snap["queues"].items():
        paused = q["paused"]
        table.add_row(
            cell(name),
            *(str(_counts(q).get(s, 0)) for s in states),
            str(q["in_backoff"]),
            str(q["stranded"]),
            ago(q["oldest_queued_age"]),
            cell(f"{paused['source']}: {paused['reason']}") if paused else "",
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
        if w.get("loop_blocked", 0):
            held += f" [red]{_loop_note(w)}[/]"
        console.print(
            f"  {w['id']} queues={','.join(w['queues'])} seen {ago(w['last_seen_age'])} ago{held}"
        )
    reap = snap["last_reap"]
    if reap:
        console.print(
            f"last reaper pass: {when(reap['at'])}: recovered {reap['recovered']}, failed {reap['failed']}"
        )


def _error_line(err: Any) -> str:
    """The last error's type and message, whole (first line only): never cut mid-word."""
    first = str(err.message).strip().splitlines()[0] if str(err.message).strip() else ""
    return f"{err.type}: {first}"


def jobs_table(jobs: list[Job]) -> None:
    """``jobs list``: ended times for finished jobs, errors whole (rich wraps them at word
    boundaries), internal hook jobs marked."""
    table = Table()
    for col in ("id", "queue", "task", "state", "tries", "run at / ended"):
        table.add_column(col, no_wrap=col in ("id", "tries"))
    table.add_column("last error", overflow="fold", ratio=1)
    for job in jobs:
        err = views.run_error(job)
        task = f"{job.task} (hook)" if job.task.startswith(HOOK_TASK_PREFIX) else job.task
        ended = job.finished_at is not None
        table.add_row(
            str(job.id),
            cell(job.queue),
            cell(task),
            str(job.state),
            f"{job.attempts}/{job.max_attempts}",
            ("ended " + when(job.finished_at)) if ended else when(job.run_at),
            cell(_error_line(err)) if err else "",
        )
    console.print(table, highlight=False)


def job_detail(job: Job) -> None:
    """One job, showing only what applies to it: no deadline rows for a job without one, no
    worker before it ran, no progress once it succeeded (``--json`` has every field)."""
    d = job.to_dict()
    console.print(f"[bold]job {job.id}[/] {job.task} on {job.queue}: [bold]{job.state}[/]")
    finished = job.finished_at is not None
    rows: list[tuple[str, object]] = [
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("snoozes", job.snoozes or None),
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
        console.print(f"  {label:>9}: {plain(str(value))}", highlight=False, markup=False)
    for a in views.attempts(job):  # each attempt: start, end, lease holder, its error
        started = when(a["started_at"]) if a["started_at"] is not None else "-"
        ended = when(a["ended_at"]) if a["ended_at"] is not None else "-"
        if a["attempt"] is None:  # no attempt: entries not kept, or a child not run
            line = (
                f"  ... {a['label']} ..."
                if a["ended_at"] is None
                else f"  {a['label']} {ended}: {a['error']}"
            )
            console.print(line, highlight=False, markup=False)
            continue
        line = f"  {a['label']}: {started} -> {ended} on {a['worker_id'] or '-'} [{a['outcome']}]"
        console.print(
            plain(line + (f" {a['error']}" if a["error"] else "")), highlight=False, markup=False
        )
        if a["traceback"]:
            for tb_line in a["traceback"].rstrip().splitlines():
                console.print(
                    f"      {plain(tb_line)}", highlight=False, markup=False, soft_wrap=True
                )


def _loop_note(worker: dict[str, Any]) -> str:
    """A worker's blocked event loop, for status (async def tasks run blocking code)."""
    return f"event loop blocked {worker['loop_blocked']:.1f} s (async jobs stalled)"
