"""``manage.py durq VERB ...``: the ``durq`` command line on this project's database
(``manage.py durq status``, ``manage.py durq jobs list --state failed``, ...)."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durq.contrib.django import get_app


class Command(BaseCommand):
    help = "The durq command line (status, jobs, retry, cancel, ...) on this project's database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*", help="the durq verb and its arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after `durq` belongs to durq's own parser (its --help included).
        self._durq(argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        self._durq(list(args))

    def _durq(self, argv: list[str]) -> None:
        from durq.cli import cli

        app = get_app()
        os.environ["DURQ_URL"] = app.url if not app.follows_django else _url()
        cli.main(args=argv, prog_name="manage.py durq")


def _url() -> str:
    from durq.contrib.django import database_url

    return database_url()
