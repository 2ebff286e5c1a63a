"""The ``durq`` command line: a thin adapter over :class:`durq.Durq` and the status snapshot."""

from durq.cli.commands import cli, main

__all__ = ["cli", "main"]
