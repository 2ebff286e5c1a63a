"""``manage.py durq_worker [--queues a,b] [--concurrency N] [--autoreload/--noreload]``:
a worker for the project's durq app (autoreload by default when ``DEBUG``)."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from durq.contrib.django import get_app


class Command(BaseCommand):
    help = "Run a durq worker for this project's tasks (SIGTERM/SIGINT: graceful stop)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", default=None, help="comma-separated queues")
        parser.add_argument("--concurrency", type=int, default=10)
        parser.add_argument("--grace", type=float, default=30.0)
        reload = parser.add_mutually_exclusive_group()
        reload.add_argument("--autoreload", dest="reload", action="store_true", default=None)
        reload.add_argument("--noreload", dest="reload", action="store_false")

    def handle(self, *args: Any, **options: Any) -> None:
        reload = settings.DEBUG if options["reload"] is None else options["reload"]
        if reload:
            from django.utils import autoreload

            autoreload.run_with_reloader(self._run, **options)
        else:
            self._run(**options)

    def _run(self, **options: Any) -> None:
        from durq.observability.events import configure_json_logging

        configure_json_logging()
        queues = options["queues"]
        worker = get_app().worker(
            queues=[q for q in queues.split(",") if q] if queues else None,
            concurrency=options["concurrency"],
            grace=options["grace"],
        )
        sys.exit(worker.run())
