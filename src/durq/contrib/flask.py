"""durq in a Flask app: an extension with ``init_app`` and a ``flask durq`` command group.

::

    from flask import Flask
    from durq.contrib.flask import DurqFlask

    dq = durq.Durq("sqlite:///app.db")
    ext = DurqFlask(dq)

    def create_app():
        app = Flask(__name__)
        ext.init_app(app)          # app.extensions["durq"], and `flask durq ...`
        return app

``flask durq worker`` runs a worker for the app's tasks; ``flask durq status``, ``flask
durq jobs list`` and every other ``durq`` verb run on the app's database. Without a
``Durq``, ``DurqFlask()`` makes one from ``app.config["DURQ_URL"]``. In a view,
:func:`current_durq` gives the app's. For the outbox through Flask-SQLAlchemy's session,
use :func:`durq.contrib.sqlalchemy.enqueue_in` with ``db.session``.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from durq.app import Durq
from durq.errors import ConfigError

#: The key in ``app.extensions``.
EXTENSION = "durq"


class DurqFlask:
    """The extension. ``DurqFlask(dq, app)`` or ``DurqFlask(dq)`` + :meth:`init_app`."""

    def __init__(self, dq: Durq | None = None, app: Flask | None = None) -> None:
        self.dq = dq
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Register the app's :class:`durq.Durq` (``app.extensions["durq"]``) and the
        ``flask durq`` command group.

        Raises:
            ConfigError: no ``Durq`` was given and ``app.config`` has no ``DURQ_URL``.
        """
        if self.dq is None:
            url = app.config.get("DURQ_URL")
            if not url:
                raise ConfigError("give DurqFlask a durq.Durq, or set app.config['DURQ_URL']")
            self.dq = Durq(url)
        app.extensions[EXTENSION] = self.dq
        app.cli.add_command(command_group())


def current_durq() -> Durq:
    """The current Flask app's :class:`durq.Durq` (inside an app or request context).

    Raises:
        ConfigError: the app has no :class:`DurqFlask`.
        RuntimeError: (Flask's) outside an application context.
    """
    dq = current_app.extensions.get(EXTENSION)
    if not isinstance(dq, Durq):
        raise ConfigError("this Flask app has no durq extension: DurqFlask(dq).init_app(app)")
    return dq


def _db_defaults(group: click.Group, url: str) -> dict[str, Any]:
    """A click ``default_map`` that gives every verb under ``group`` ``--db url``."""
    out: dict[str, Any] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out[name] = _db_defaults(command, url)
        elif any(p.name == "db" for p in command.params):
            out[name] = {"db": url}
    return out


def command_group() -> AppGroup:
    """``flask durq``: ``worker`` plus every verb of the ``durq`` command line, on the
    app's database."""
    from durq.cli import cli as durq_cli

    @click.group(
        "durq", cls=AppGroup, help="durq: this app's job queue (worker, status, jobs, ...)."
    )
    @with_appcontext
    def group() -> None:
        ctx = click.get_current_context()
        ctx.default_map = _db_defaults(durq_cli, current_durq().url)  # every verb's --db

    @group.command("worker")
    @click.option("--queues", default=None, help="Comma-separated queues.")
    @click.option("--concurrency", "-c", default=10, type=click.IntRange(min=1))
    @click.option("--grace", default=30.0, type=click.FloatRange(min=0))
    @click.option("--until-idle", is_flag=True, help="Stop once nothing is left to run.")
    def worker(queues: str | None, concurrency: int, grace: float, until_idle: bool) -> None:
        """Run a worker for this app's tasks (SIGTERM/SIGINT: graceful stop)."""
        from durq.observability.events import configure_json_logging

        configure_json_logging()
        w = current_durq().worker(
            queues=[q for q in queues.split(",") if q] if queues else None,
            concurrency=concurrency,
            grace=grace,
        )
        sys.exit(w.run(stop_when_idle=until_idle))

    assert isinstance(group, AppGroup)
    for name, command in durq_cli.commands.items():
        if name != "worker":
            group.add_command(command, name)
    return group
