"""The ``durq`` command line: a thin adapter over :class:`durq.Durq` and the status snapshot.

Each verb takes ``--db`` (or ``$DURQ_URL``); data verbs take ``--json``. One module per group:
``common`` (the root group, shared options, exit codes, ``fail``), ``run``, ``jobs``,
``queues``, ``workflow``, ``admin``, ``proving``, ``operate`` (workers, dashboard); ``render`` draws tables and JSON.
"""

import io
import sys

# Importing a verb module registers its verbs on ``cli``.
from durq.cli import admin, jobs, operate, proving, queues, run, workflow  # noqa: F401
from durq.cli.common import cli, fail
from durq.errors import DurqError

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point. Text no UTF-8 stream can write (a lone surrogate from a
    stored payload, error or name) is printed as its escape rather than ending the verb in a
    ``UnicodeEncodeError``."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        cli(standalone_mode=True)
    except DurqError as exc:  # anything a verb did not catch itself
        fail(str(exc))
