"""The root ``durq`` group and what every verb shares: options, exit codes, errors, loading."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from durq.app import Durq
from durq.codecs import Encrypted
from durq.store.sqlite.connection import parse_url

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_USAGE = 2


class JobId(click.IntRange):
    """A job id argument: a whole number from 1 to 2**63 - 1, or a usage error that says
    so (click's own says ``'abc' is not a valid integer range``)."""

    name = "job id"

    def __init__(self) -> None:
        super().__init__(min=1, max=2**63 - 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r} is not a job id (a whole number from 1 to 2**63 - 1)", param, ctx)


JOB_ID = JobId()


def db_option(fn: F) -> F:
    return click.option(
        "--db",
        "db",
        envvar="DURQ_URL",
        default="sqlite:///durq.db",
        show_default=True,
        help="Database URL or SQLite file path (or set DURQ_URL).",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"durq: error: {message}", err=True)
    sys.exit(code)


def closed_at_exit(app: Durq) -> Durq:
    """Close ``app`` when the command ends (also after an error): a PostgreSQL pool left
    to the garbage collector at interpreter exit prints ``Exception ignored in:
    ConnectionPool.__del__ ... cannot join current thread`` after correct output."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().call_on_close(app.close)
    return app


def open_existing(url: str) -> Durq:
    """A Durq on an existing database (read verbs never create a new, empty file)."""
    if "://" not in url or url.startswith("sqlite:"):
        path = parse_url(url).path
        if not Path(path).exists():
            where = str(Path(path).absolute())
            hint = ""
            if not Path(path).is_absolute() and Path("/" + path).exists():
                # sqlite:///tmp/x.db is tmp/x.db here; sqlite:////tmp/x.db is /tmp/x.db
                hint = f"; /{path} exists: an absolute path takes four slashes, sqlite:////{path}"
            fail(
                f"no database at {where}: nothing has created it yet (the first enqueue, "
                f"a worker or `durq migrate` does), or it lives elsewhere (give --db or "
                f"set DURQ_URL){hint}"
            )
    return closed_at_exit(Durq(url, migrate=False, codec=Encrypted.from_env()))  # $DURQ_KEYS


def load_app(spec: str, url: str | None) -> Durq:
    """Import ``module:attr`` (or ``module`` with a ``dq`` attribute) from the current directory.

    The app keeps its own database URL unless ``url`` (``--db`` or ``$DURQ_URL``) is given.
    Exits 2 with one line (never a traceback) when the module cannot be imported, raises
    anything while it is imported (the line names the exception and the file and line it
    was raised at), lacks the attribute, or the attribute is not a :class:`durq.Durq`.
    """
    module_name, _, attr = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    if module_name.endswith(".py"):  # `durq worker tasks.py[:dq]`: a file path
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").strip(".")
        found = [attr] if attr else _durq_attributes(dotted)
        form = f"{dotted}:{found[0]}" if found else f"{dotted}:ATTR"
        fail(f"{spec!r} is a file path; give the module and the app: {form}", EXIT_USAGE)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = ""
        if not attr and "." in module_name:
            head, _, tail = module_name.rpartition(".")
            hint = f" (did you mean {head}:{tail}? the form is MODULE:ATTR)"
        fail(f"cannot import {module_name!r}: {exc}{hint}", EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - the app's own code raised while importing
        fail(f"importing {module_name!r} raised {_raised_where(exc)}", EXIT_USAGE)
    name = attr or "dq"
    if not hasattr(module, name):
        found = _durq_attributes(module_name)
        hint = f"; it has {module_name}:{found[0]}" if found else " (the form is MODULE:ATTR)"
        fail(f"module {module_name!r} has no attribute {name!r}{hint}", EXIT_USAGE)
    app = getattr(module, name)
    if not isinstance(app, Durq):
        fail(f"{module_name}:{name} is a {type(app).__name__}, not a durq.Durq", EXIT_USAGE)
    assert isinstance(app, Durq)
    if url:
        app.url = url
    return closed_at_exit(app)


def _durq_attributes(module_name: str) -> list[str]:
    """The names of the ``durq.Durq`` objects in a module ([] if it does not import)."""
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - only a hint; the caller reports the real problem
        return []
    return sorted(k for k, v in vars(module).items() if isinstance(v, Durq))


def _raised_where(exc: Exception) -> str:
    """``RuntimeError: boom (at /app/jobs.py:12)``: the exception and the file and line
    where it was raised (for a ``SyntaxError``, the line that does not parse)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} (at {exc.filename}:{exc.lineno})"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")
    ]
    if frames:
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


#: Options of the verbs that a user may put before the verb (``durq --db URL status``).
_AFTER_THE_VERB = ("--db", "--app", "--json")


class _Root(click.Group):
    """The root group: a verb's option given before the verb says where it goes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list it is handed
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            name = exc.option_name.partition("=")[0]
            if name not in _AFTER_THE_VERB:
                raise
            at = next(i for i, a in enumerate(given) if a.partition("=")[0] == name)
            takes_value = name != "--json" and "=" not in given[at]
            moved = given[at : at + 2] if takes_value else given[at : at + 1]
            rest = given[:at] + given[at + len(moved) :]
            if not any(a in self.commands for a in rest):
                rest, moved = ["VERB"], [name] + (["..."] if takes_value else [])
            example = shlex.join(["durq", *rest, *moved])
            raise click.UsageError(f"{name} goes after the verb: {example}", ctx) from None


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="durq")
def cli() -> None:
    """durq: a durable job queue. SQLite by default; no job is ever lost."""
