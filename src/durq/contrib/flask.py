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

from typing import Any

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from durq.app import Durq
from durq.errors import ConfigError
from durq.store import describe_url

#: The key in ``app.extensions``.
EXTENSION = "durq"


class DurqFlask:
    """The extension. ``DurqFlask(dq, app)`` or ``DurqFlask(dq)`` + :meth:`init_app`.

    With a :class:`durq.Durq`, every app it is given to uses that one (declare tasks on it
    at import time); ``app.config["DURQ_URL"]``, when set, must name the same database.
    Without one, each app gets its own ``Durq`` from its ``DURQ_URL`` (an app factory
    called twice with two URLs gets two).
    """

    def __init__(self, dq: Durq | None = None, app: Flask | None = None) -> None:
        self.dq = dq
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Register the app's :class:`durq.Durq` (``app.extensions["durq"]``) and the
        ``flask durq`` command group.

        Raises:
            ConfigError: no ``Durq`` was given and ``app.config`` has no ``DURQ_URL``; or
                one was given and ``DURQ_URL`` names another database (it was ignored).
        """
        url = app.config.get("DURQ_URL")
        dq = self.dq
        if dq is None:
            if not url:
                raise ConfigError("give DurqFlask a durq.Durq, or set app.config['DURQ_URL']")
            dq = Durq(url)
        elif url and describe_url(url) != describe_url(dq.url):
            raise ConfigError(
                f"app.config['DURQ_URL'] is {describe_url(url)}, but the durq.Durq given to "
                f"DurqFlask is on {describe_url(dq.url)}: make the Durq with that URL "
                "(durq.Durq(url), or $DURQ_URL in the environment), or leave DURQ_URL unset"
            )
        app.extensions[EXTENSION] = dq
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
    from durq.cli.common import EXIT_USAGE, fail
    from durq.cli.run import configure_logs, run_worker, worker_options

    @click.group(
        "durq", cls=AppGroup, help="durq: this app's job queue (worker, status, jobs, ...)."
    )
    @with_appcontext
    def group() -> None:
        ctx = click.get_current_context()
        ctx.default_map = _db_defaults(durq_cli, current_durq().url)  # every verb's --db

    @group.command("worker")
    @worker_options
    @click.option("--until-idle", is_flag=True, help="Stop once nothing is left to run.")
    def worker(until_idle: bool, **options: Any) -> None:
        """Run a worker for this app's tasks, each body inside the app's context
        (``current_app``, Flask-SQLAlchemy's ``db.session``). The options are ``durq
        worker``'s. SIGTERM/SIGINT: graceful stop."""
        if options["pool"] == "processes":  # the children would run bodies outside the app
            fail(
                "flask durq worker runs bodies in threads, each inside the app's context; "
                "for --pool processes run durq worker MODULE:ATTR",
                EXIT_USAGE,
            )
        configure_logs(options["log_level"], options["log_format"])
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        run_worker(
            current_durq(), app.import_name, around=app.app_context, stop_when_idle=until_idle,
            **options,
        )  # fmt: skip

    assert isinstance(group, AppGroup)
    for name, command in durq_cli.commands.items():
        if name != "worker":
            group.add_command(command, name)
    return group
