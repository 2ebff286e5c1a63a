"""Mirror five real podcast feeds through durq: ``python -m examples.podcast_mirror``.

Enqueues one job per episode (keyed by guid, one transaction per feed), runs a worker
until nothing is left, and reports per feed what was mirrored, what failed for good and
why, and how many retries it took. Run it twice: the second run finds every job already
finished and downloads nothing. Press Ctrl-C mid-run and run it again: it finishes the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import durq
from durq.observability.events import JsonLinesFormatter

from . import app
from .fake_host import FakeHost
from .feeds import FEED_NAMES, Episode, load_feed

DEFAULT_DATA_DIR = Path(".demo/podcast_mirror")
PENDING_STATES = ("queued", "scheduled", "running")
TIMES = "\N{MULTIPLICATION SIGN}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line (see ``--help``)."""
    parser = argparse.ArgumentParser(prog="python -m examples.podcast_mirror", description=__doc__)
    parser.add_argument(
        "--feeds",
        default=",".join(FEED_NAMES),
        help=f"comma-separated feed names (default: all of {', '.join(FEED_NAMES)})",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where durq.db and blobs/ live"
    )
    parser.add_argument("--seed", type=int, default=7, help="picks the fake host's fault plan")
    parser.add_argument("--concurrency", type=int, default=4, help="downloads at once")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON only")
    args = parser.parse_args(argv)
    args.feeds = [name.strip() for name in args.feeds.split(",") if name.strip()]
    unknown = sorted(set(args.feeds) - set(FEED_NAMES))
    if unknown or not args.feeds:
        parser.error(f"unknown feed(s) {unknown}; choose from {', '.join(FEED_NAMES)}")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


@contextlib.contextmanager
def events_to_file(path: Path) -> Iterator[None]:
    """Send durq's JSON event lines to ``path`` instead of the console, for the duration."""
    logger = logging.getLogger("durq")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonLinesFormatter())
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        handler.close()


def enqueue(
    task: durq.Task[Any, Any], feeds: dict[str, list[Episode]]
) -> dict[str, list[durq.Job]]:
    """One job per episode, keyed by ``feed/guid``, in one transaction per feed.

    A key that is already stored returns its job as it is (queued, running or finished),
    which is what makes a re-run cheap and an interrupted run resumable.
    """
    jobs: dict[str, list[durq.Job]] = {}
    for feed, episodes in feeds.items():
        payloads = [
            {"feed": feed, "guid": e.guid, "url": e.url, "title": e.title} for e in episodes
        ]
        jobs[feed] = task.enqueue_many(payloads, keys=[f"{feed}/{e.guid}" for e in episodes])
    return jobs


def watch(dq: durq.Durq, progress: Progress, total: int, stop: threading.Event) -> None:
    """Move the progress bar from ``dq.status()`` every 0.2 s until ``stop`` (runs in a thread)."""
    bar = progress.add_task("mirroring", total=total, detail="")
    while True:
        stopping = stop.wait(0.2)
        queue = dq.status()["queues"].get(app.QUEUE, {})
        counts = queue.get("counts", {})
        pending = sum(counts.get(s, 0) for s in PENDING_STATES)
        detail = f"running {counts.get('running', 0)} · backing off {queue.get('in_backoff', 0)}"
        progress.update(bar, completed=max(0, total - pending), detail=detail)
        if stopping:
            return


def run_worker(dq: durq.Durq, concurrency: int, progress: Progress | None, total: int) -> int:
    """Run a worker in this thread until nothing is left (or Ctrl-C); returns its exit code,
    130 when a signal stopped it (the shell's code for Ctrl-C)."""
    worker = dq.worker(concurrency=concurrency, lease=10, grace=5)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(target=watch, args=(dq, progress, total, stop), daemon=True)
        watcher.start()
    try:
        code: int = worker.run(install_signals=True, stop_when_idle=True)
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if worker.stop_signal is not None:
        return 128 + int(worker.stop_signal) if worker.stop_signal != signal.SIGINT else 130
    return code


def failure_reason(job: durq.Job) -> str:
    """``http_404`` from a last error of kind ``permanent:http_404``; else the kind or type."""
    error = job.last_error
    if error is None:
        return "unknown"
    return error.kind.split(":", 1)[1] if ":" in error.kind else (error.kind or error.type)


def summarize(jobs: dict[str, list[durq.Job]], host: FakeHost) -> dict[str, Any]:
    """Re-read every job and count, per feed and in total, what became of it."""
    feeds: dict[str, dict[str, Any]] = {}
    for feed, handles in jobs.items():
        reasons: Counter[str] = Counter()
        row = {
            "episodes": len(handles),
            "mirrored": 0,
            "failed": 0,
            "pending": 0,
            "retries": 0,
            "bytes": 0,
        }
        for job in handles:
            job.refresh()
            if job.state == durq.JobState.SUCCEEDED:
                row["mirrored"] += 1
                row["bytes"] += int(job.result["bytes"])
            elif job.state in PENDING_STATES:
                row["pending"] += 1
            else:
                row["failed"] += 1
                reasons[failure_reason(job)] += 1
            if job.state not in PENDING_STATES:
                row["retries"] += max(0, job.attempts - 1)
        feeds[feed] = {
            **row,
            "failed_reasons": dict(reasons.most_common()),
            "requests": host.requests_by_feed[feed],
        }
    totals: dict[str, Any] = {
        k: sum(f[k] for f in feeds.values())
        for k in ("episodes", "mirrored", "failed", "pending", "retries", "bytes", "requests")
    }
    all_reasons: Counter[str] = Counter()
    for f in feeds.values():
        all_reasons.update(f["failed_reasons"])
    totals["failed_reasons"] = dict(all_reasons.most_common())
    return {
        "feeds": feeds,
        "totals": totals,
        "requests_served": host.requests_served,
        "complete": totals["pending"] == 0,
    }


def render(console: Console, summary: dict[str, Any]) -> None:
    """Print the summary as a rich table plus a line of context."""
    table = Table(
        title="podcast mirror: what durq did",
        title_justify="left",
        caption="failed: failed for good, not retried · retries: attempts after the first · "
        "requests: answered by the fake host in this run",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    complete = summary["complete"]
    columns = ["feed", "episodes", "mirrored", "failed", *([] if complete else ["left"])]
    for name in [*columns, "retries", "requests"]:
        table.add_column(name, justify="left" if name == "feed" else "right", no_wrap=True)
    table.add_column("why they failed", min_width=12)
    rows = [*summary["feeds"].items(), ("total", summary["totals"])]
    for i, (feed, f) in enumerate(rows):
        sep = ", " if console.width >= 100 else "\n"
        why = sep.join(f"{reason} {TIMES}{n}" for reason, n in f["failed_reasons"].items())
        cells = [feed, str(f["episodes"]), f"[green]{f['mirrored']}[/]", f"[red]{f['failed']}[/]"]
        cells += [] if complete else [f"[yellow]{f['pending']}[/]"]
        cells += [str(f["retries"]), str(f["requests"]), why]
        last_feed = i == len(rows) - 2
        table.add_row(*cells, end_section=last_feed, style="bold" if feed == "total" else None)
    console.print(table)
    console.print(
        f"{summary['totals']['bytes'] / 2**20:.1f} MiB mirrored into {summary['data_dir']}/blobs · "
        f"{summary['elapsed_seconds']:.1f} s"
    )
    if not complete:
        left = summary["totals"]["pending"]
        console.print(
            f"[yellow]Stopped early: {left} episodes left; run the same command again.[/]"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    args = parse_args(argv)
    started = time.monotonic()
    console = Console(stderr=args.json)
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    feeds = {name: load_feed(name) for name in args.feeds}
    total = sum(len(e) for e in feeds.values())
    with (
        events_to_file(data_dir / "events.jsonl"),
        FakeHost([e for es in feeds.values() for e in es], args.seed) as host,
    ):
        app.configure(host.base_url, data_dir / "blobs")
        dq, task = app.create_app(data_dir / "durq.db")
        try:
            jobs = enqueue(task, feeds)
            done = sum(j.state not in PENDING_STATES for js in jobs.values() for j in js)
            if not args.json:
                console.print(
                    f"[bold]durq podcast mirror[/]: {total} episodes from {len(feeds)} feeds "
                    f"({done} already finished) · media host {host.base_url} · seed {args.seed}"
                )
                with Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"),
                    TimeElapsedColumn(),
                    console=console,
                ) as progress:
                    code = run_worker(dq, args.concurrency, progress, total)
            else:
                code = run_worker(dq, args.concurrency, None, total)
            summary = summarize(jobs, host)
            left = sum(j.state in PENDING_STATES for js in jobs.values() for j in js)
        finally:
            dq.close()
    summary.update(
        seed=args.seed, data_dir=str(data_dir), elapsed_seconds=round(time.monotonic() - started, 3)
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        render(console, summary)
    if code >= 128:
        print(
            f"interrupted: {total - left} of {total} episodes finished, {left} still queued in "
            f"{data_dir / 'durq.db'}; run the demo again to continue from there",
            file=sys.stderr,
        )
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        # Before the worker took over the signal: each feed's enqueue committed or not at all.
        print("interrupted; run again to continue", file=sys.stderr)
        sys.exit(130)
