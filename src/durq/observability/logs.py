"""Logs people can read, and JSON lines for collectors, at a cost the drain does not feel.

``durq worker --log-format text|json`` calls :func:`configure`:

- ``text`` (the default on a terminal): ``11:33:21.042 INFO  job_succeeded  #42 send
  0.013s``, local time, level, event, job id, task and a short message; a failed attempt's
  traceback follows, indented.
- ``json`` (the default otherwise): one object per line with ``event``, ``time`` (ISO-8601,
  UTC), ``ts`` (epoch seconds), ``level`` and the event's fields (``traceback`` included).

Both go through :class:`BufferedHandler`: the ``job_succeeded`` lines of one claimer batch
are written together right after its commit (a 0.2 s timer is the backstop), not one
``write`` per event; every other event is written at once. With events handed over as
tuples (no LogRecord) and formatted by hand, this is what keeps per-job events at the default
``info`` level from costing the drain rate (issue 12 measured 4,764 jobs/s at ``warning``
against 2,240/s at ``info`` with a write per line).

Other libraries' records (the psycopg pool's warnings) go through the same handler and
formatter, so the JSON stream holds nothing that is not JSON.
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

from durq.observability import events

#: Loggers whose records join durq's stream (else Python's last-resort handler would print
#: them as plain text); ``psycopg`` covers ``psycopg.pool``.
FOREIGN = ("psycopg",)

#: The per-job events that wait for the claimer's :func:`durq.observability.events.flush`
#: after its batch (or the timer); every other event is written at once.
BATCHED = frozenset({events.JOB_SUCCEEDED, events.JOB_STARTED})

#: Seconds between writes of buffered lines, and the number waiting that forces one.
FLUSH_INTERVAL = 0.2
FLUSH_ENTRIES = 20_000

_LEVELS = {
    "DEBUG": "DEBUG",
    "INFO": "INFO ",
    "WARNING": "WARN ",
    "ERROR": "ERROR",
    "CRITICAL": "CRIT ",
}


_encode = json.JSONEncoder(default=repr, ensure_ascii=False).encode
_LEVEL_NAMES = {10: "debug", 20: "info", 30: "warning", 40: "error", 50: "critical"}
_second: list[Any] = [None, ""]  # the last whole second formatted, and its text


def _seconds(whole: int) -> str:
    """``whole`` (epoch seconds) as ``YYYY-MM-DDTHH:MM:SS`` UTC, formatted once per second."""
    if _second[0] != whole:
        _second[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = whole
    return str(_second[1])


def iso_utc(ts: float) -> str:
    """``ts`` (epoch seconds) as ISO-8601 UTC with microseconds; the seconds part is
    formatted once per second (this runs for every event)."""
    whole = int(ts)
    return f"{_seconds(whole)}.{int((ts - whole) * 1_000_000):06d}+00:00"


_str = json.encoder.encode_basestring  # the C encoder of one str


def _value(v: Any) -> str:
    t = type(v)
    if t is str:
        return str(_str(v))
    if t is int:
        return str(v)
    if t is float and v == v and v not in (float("inf"), float("-inf")):
        return repr(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    return _encode(v)


#: (event, level, *field names) -> the line as a ``%`` template: its fixed text (the event,
#: level and keys, encoded once) around ``%s`` for the time, the ``ts`` and each value.
#: Events have a few shapes each, so this stays small; it is bounded all the same.
_templates: dict[tuple[Any, ...], str] = {}
TEMPLATES_KEPT = 1024


def _template(key: tuple[Any, ...]) -> str:
    event, level, keys = key[0], key[1], key[2:]
    name = _LEVEL_NAMES.get(level) or logging.getLevelName(level).lower()

    def fixed(text: str) -> str:
        return text.replace("%", "%%")

    made = (
        '{"time": "%s.%s+00:00", "event": ' + fixed(_str(event)) + ', "ts": %s.%s, "level": "'
        + fixed(name) + '"' + "".join(", " + fixed(_str(k)) + ": %s" for k in keys) + "}"
    )  # fmt: skip
    if len(_templates) < TEMPLATES_KEPT:
        _templates[key] = made
    return made


def json_event(ts: float, level: int, event: str, fields: dict[str, Any]) -> str:
    """One JSON line: ``time`` (ISO-8601, UTC), ``event``, ``ts``, ``level``, the fields.

    Written by hand for the flat fields events carry, as one ``%`` of a template cached per
    shape (:func:`_template`) with each value through the C string encoder or ``repr``;
    ``time`` and ``ts`` share one microsecond reading (no ``round``, which cost more than
    the rest of the line). Under callgrind this is 27k instructions a line against 31k for
    the line joined piece by piece and about 60k for ``json.dumps`` (the per-job figures are
    in docs/features/observability.md)."""
    key = (event, level, *fields)
    template = _templates.get(key) or _template(key)
    whole = int(ts)
    if _second[0] != whole:
        _second[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = whole
    micros = f"{int((ts - whole) * 1_000_000):06d}"
    values: list[Any] = [_second[1], micros, whole, micros]
    for v in fields.values():
        t = type(v)
        values.append(_str(v) if t is str else v if t is int else _value(v))
    return template % tuple(values)


#: (queue, task, worker id) -> the ``job_succeeded`` line as a ``%`` template, those three
#: values encoded in it: what :func:`json_event` writes for the event, made once per task.
_succeeded_templates: dict[tuple[str, str, str], str] = {}


def json_succeeded(
    ts: float, job_id: int, queue: str, task: str, attempt: int, worker_id: str, duration: float
) -> str:
    """The ``job_succeeded`` line of :func:`json_event`, the same to the byte, from its
    values (``durq.observability.events.emit_succeeded``): ``ts`` epoch seconds, the job's
    id, queue, task and attempt, the worker's id, ``duration`` seconds. The template holds
    the queue, task and worker id already encoded, so a line is one ``%`` of seven values
    (in instructions about half of the general line; docs/features/observability.md).
    Raises nothing for ``str``, ``int`` and ``float`` values of those types."""
    key = (queue, task, worker_id)
    template = _succeeded_templates.get(key)
    if template is None:
        template = _succeeded_template(key)
    whole = int(ts)
    micros = f"{int((ts - whole) * 1_000_000):06d}"
    return template % (_seconds(whole), micros, whole, micros, job_id, attempt, duration)


def _succeeded_template(key: tuple[str, str, str]) -> str:
    queue, task, worker_id = key

    def fixed(value: str) -> str:
        return str(_str(value)).replace("%", "%%")

    made = (
        '{"time": "%s.%s+00:00", "event": ' + fixed(events.JOB_SUCCEEDED)
        + ', "ts": %s.%s, "level": "info", "id": %s, "queue": ' + fixed(queue)
        + ', "task": ' + fixed(task) + ', "attempt": %s, "worker_id": ' + fixed(worker_id)
        + ', "duration": %s}'
    )  # fmt: skip
    if len(_succeeded_templates) < TEMPLATES_KEPT:
        _succeeded_templates[key] = made
    return made


SHOWN_FIRST = frozenset({"id", "task", "duration"})
HIDDEN = frozenset({"traceback", "queue", "max_attempts"})


def text_event(ts: float, level: int, event: str, fields: dict[str, Any]) -> str:
    """One readable line: local time, level, event, ``#id task``, the run time, then the
    other fields as ``key=value`` (errors whole); a traceback follows, indented."""
    t = time.localtime(ts)
    name = logging.getLevelName(level)
    parts = [
        time.strftime("%H:%M:%S", t) + f".{int((ts % 1) * 1000):03d}",
        _LEVELS.get(name, name[:5]),
        f"{event:<20}",
    ]
    if "id" in fields:
        parts.append(f"#{fields['id']}")
    if "task" in fields:
        parts.append(str(fields["task"]))
    if "duration" in fields:
        parts.append(f"{float(fields['duration']):.3f}s")
    for key, value in fields.items():
        if key in SHOWN_FIRST or key in HIDDEN:
            continue
        if isinstance(value, str) and value and " " not in value and "\n" not in value:
            shown = value
        else:
            shown = json.dumps(value, default=repr, ensure_ascii=False)
        parts.append(f"{key}={shown}")
    line = " ".join(parts)
    tb = fields.get("traceback")
    if tb:
        line += "\n" + "\n".join("    " + ln for ln in str(tb).rstrip().splitlines())
    return line


EventFormat = Callable[[float, int, str, dict[str, Any]], str]
SucceededFormat = Callable[[float, int, str, str, int, str, float], str]


class EventFormatter(logging.Formatter):
    """Formats LogRecords (durq's events sent through the logger, and other libraries'
    records) with the same layout as the fast path."""

    def __init__(self, fmt_event: EventFormat) -> None:
        super().__init__()
        self.fmt_event = fmt_event

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "durq_event", None)
        fields = dict(getattr(record, "durq_fields", None) or {})
        if event is None:
            event = "log"
            fields = {"logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            fields["traceback"] = self.formatException(record.exc_info)
        return self.fmt_event(record.created, record.levelno, event, fields)


def _succeeded_via(fmt_event: EventFormat) -> SucceededFormat:
    """A ``job_succeeded`` formatter for any event formatter: the fields as a dict."""

    def fmt(
        ts: float, job_id: int, queue: str, task: str, attempt: int, worker_id: str, d: float
    ) -> str:
        fields = events.succeeded_fields(job_id, queue, task, attempt, worker_id, d)
        return fmt_event(ts, logging.INFO, events.JOB_SUCCEEDED, fields)

    return fmt


class BufferedHandler(logging.Handler):
    """Writes lines to ``stream`` in chunks: when the claimer flushes after a batch, every
    :data:`FLUSH_INTERVAL` seconds (a daemon thread), when :data:`FLUSH_ENTRIES` wait, for
    any event not in :data:`BATCHED` and any record at WARNING or above (at once, after
    what is buffered), and at exit.

    :meth:`put` is the events' fast path (:func:`durq.observability.events.set_sink`): it
    appends a tuple; formatting happens when the buffer is written, off the hot path.
    """

    def __init__(
        self, stream: TextIO, fmt_event: EventFormat, fmt_succeeded: SucceededFormat | None = None
    ) -> None:
        super().__init__()
        self.stream = stream
        self.fmt_event = fmt_event
        self.fmt_succeeded = fmt_succeeded or _succeeded_via(fmt_event)
        self.setFormatter(EventFormatter(fmt_event))
        # a formatted line, an event (time, level, event, fields), or a job_succeeded line's
        # seven values (put_succeeded)
        self._pending: deque[tuple[Any, ...] | str] = deque()
        # re-entrant: a signal handler on the main thread (the worker's SIGTERM) emits an
        # event, and so flushes, while that thread may be inside flush already
        self._write_lock = threading.RLock()
        self._stop_flush = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="durq-log-flush", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def put(self, ts: float, level: int, event: str, fields: dict[str, Any]) -> None:
        self._pending.append((ts, level, event, fields))
        if event not in BATCHED or level >= logging.WARNING or len(self._pending) >= FLUSH_ENTRIES:
            self.flush()

    def put_succeeded(
        self,
        ts: float,
        job_id: int,
        queue: str,
        task: str,
        attempt: int,
        worker_id: str,
        duration: float,
    ) -> None:
        """The ``job_succeeded`` line's values (``events.emit_succeeded``), buffered like
        :meth:`put`'s batched events."""
        self._pending.append((ts, job_id, queue, task, attempt, worker_id, duration))
        if len(self._pending) >= FLUSH_ENTRIES:
            self.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._pending.append(self.format(record))
        except Exception:  # noqa: BLE001 - logging must not raise into the worker
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            lines = []
            pending = self._pending
            while pending:
                item = pending.popleft()
                if isinstance(item, str):
                    lines.append(item)
                    continue
                try:
                    if len(item) == 7:  # put_succeeded
                        lines.append(self.fmt_succeeded(*item))
                    else:
                        lines.append(self.fmt_event(*item))
                except Exception:  # noqa: BLE001 - one bad field must not stop the log
                    event = events.JOB_SUCCEEDED if len(item) == 7 else item[2]
                    lines.append(json.dumps({"event": event, "error": "unformattable"}))
            if not lines:
                return
            try:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # a closed pipe: drop, do not raise
                pass

    def _tick(self) -> None:
        while not self._stop_flush.wait(FLUSH_INTERVAL):
            self.flush()

    def close(self) -> None:
        self._stop_flush.set()
        self.flush()
        super().close()


def configure(
    fmt: str | None = None, level: int = logging.INFO, stream: TextIO | None = None
) -> logging.Handler:
    """Send durq's events and the psycopg pool's records to ``stream`` (default stderr) as
    ``fmt`` (``text``, ``json``, or None: text on a terminal, else JSON). Idempotent: a
    handler set up by an earlier call is replaced. Returns the handler.

    Raises:
        ValueError: ``fmt`` is not ``text``, ``json`` or None.
    """
    out = stream or sys.stderr
    if fmt is None:
        fmt = "text" if getattr(out, "isatty", lambda: False)() else "json"
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be text or json, not {fmt!r}")
    if fmt == "text":
        handler = BufferedHandler(out, text_event)
    else:
        handler = BufferedHandler(out, json_event, json_succeeded)
    handler._durq_json = True  # type: ignore[attr-defined]
    for name in ("durq", *FOREIGN):
        lg = logging.getLogger(name)
        for old in list(lg.handlers):
            if getattr(old, "_durq_json", False):
                lg.removeHandler(old)
                old.close()
        lg.propagate = False
    root = logging.getLogger("durq")
    root.addHandler(handler)
    root.setLevel(level)
    only_ours = not logging.getLogger("durq.events").handlers and not any(
        getattr(h, "_durq_json", False) is False for h in root.handlers
    )
    if only_ours:
        events.set_sink(handler.put, handler.flush, handler.put_succeeded)
    else:
        events.set_sink(None)
    for name in FOREIGN:
        lg = logging.getLogger(name)
        lg.addHandler(handler)
        lg.setLevel(max(level, logging.WARNING))  # the pool's INFO chatter is not ours
    return handler
