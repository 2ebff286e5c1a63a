"""``manage.py durq_worker [durq worker's options] [--autoreload/--noreload]``: a worker for
the project's durq app, with every option of ``durq worker`` (``--log-format``,
``--metrics-port``, ``--pool``, ...; ``manage.py durq_worker --help``), autoreload by
default when ``DEBUG``. Each body runs between two ``close_old_connections()``, as a
request does, so a database connection that broke or outlived ``CONN_MAX_AGE`` is not
used by the next job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from durq.cli.common import EXIT_USAGE, fail
from durq.cli.run import configure_logs, run_worker, worker_options
from durq.contrib.django import get_app


@contextmanager
def job_scope() -> Iterator[None]:
    """Around each body: Django's ``close_old_connections()`` before and after (what
    Django does around a request), on the thread that runs the body."""
    from django.db import close_old_connections

    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


@click.command(help="Run a durq worker for this project's tasks (SIGTERM/SIGINT: graceful stop).")
@worker_options
def worker(**options: Any) -> None:
    if options["pool"] == "processes":  # the children would run bodies outside Django
        fail(
            "manage.py durq_worker runs bodies in threads, each between two "
            "close_old_connections(): --pool processes is not available here (its children "
            "would run bodies without Django set up)",
            EXIT_USAGE,
        )
    configure_logs(options["log_level"], options["log_format"])
    run_worker(get_app(), "this project", around=job_scope, **options)


class Command(BaseCommand):
    help = "Run a durq worker for this project's tasks (SIGTERM/SIGINT: graceful stop)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*", help="durq worker's options, --autoreload")

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after `durq_worker` belongs to durq's own parser (its --help included).
        self._start(argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        self._start(list(args))

    def _start(self, argv: list[str]) -> None:
        reload = settings.DEBUG
        rest: list[str] = []
        for arg in argv:
            if arg in ("--autoreload", "--noreload"):
                reload = arg == "--autoreload"
            else:
                rest.append(arg)
        if reload:
            from django.utils import autoreload

            autoreload.run_with_reloader(self._run, rest)
        else:
            self._run(rest)

    def _run(self, argv: list[str]) -> None:
        worker.main(args=argv, prog_name="manage.py durq_worker")
