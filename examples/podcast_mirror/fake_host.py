"""A loopback media host that serves every enclosure and misbehaves on a fixed plan.

The demo never touches the real podcast hosts. :class:`FakeHost` serves each enclosure's
URL path (``/PC20-57-2021-10-08-Final.mp3``) as deterministic bytes and injects faults
from a **fault plan**: a pure function of a seed and the episode's guid, so a test can
compute exactly what a run must end with.

Faults are decided per *attempt*: the client names its attempt in the ``X-Attempt``
header (the demo sends durq's attempt number; without the header the host counts the
path's requests instead). A 503 that "heals after 2 tries" therefore answers 503 to
attempts 1 and 2 and 200 to attempt 3, also when the run was interrupted in between and
a new host (on a new port) serves the rest.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Final, cast
from urllib.parse import urlsplit

from .feeds import Episode

#: Largest body the host serves, in bytes (256 KiB); longer enclosures are cut to this.
MAX_BODY: Final = 256 * 1024

#: Fault kinds with their share of episodes; the rest are served normally ("ok").
FAULT_RATES: Final = (
    ("503_once", 0.08),  # 503 to attempt 1, then fine
    ("503_twice", 0.05),  # 503 to attempts 1 and 2
    ("429_once", 0.05),  # 429 with Retry-After: 1 to attempt 1
    ("404", 0.02),  # always 404
    ("410", 0.02),  # always 410
    ("slow", 0.05),  # waits 0.3-0.8 s, then serves normally
)

#: Retries each fault kind costs a run that ends well (404/410 fail at once: none).
RETRIES_PER_FAULT: Final = {"503_once": 1, "503_twice": 2, "429_once": 1}

_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Fault:
    """What the host does to one episode.

    Attributes:
        kind: ``"ok"`` or one of :data:`FAULT_RATES`' kinds.
        delay: seconds a ``"slow"`` response waits before its headers (0 otherwise).
    """

    kind: str
    delay: float = 0.0

    def status_for(self, attempt: int) -> int:
        """The HTTP status this fault gives the ``attempt``-th try (1-based)."""
        if self.kind in ("404", "410"):
            return int(self.kind)
        if (self.kind == "503_once" and attempt <= 1) or (
            self.kind == "503_twice" and attempt <= 2
        ):
            return 503
        if self.kind == "429_once" and attempt <= 1:
            return 429
        return 200


def _unit(seed: int, label: str, guid: str) -> float:
    """A number in [0, 1) fixed by (seed, label, guid)."""
    digest = hashlib.sha256(f"{seed}\x00{label}\x00{guid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fault_for(seed: int, guid: str) -> Fault:
    """The planned fault of the episode ``guid`` under ``seed`` (deterministic).

    Args:
        seed: the run's seed.
        guid: the episode's guid.
    """
    roll = _unit(seed, "fault", guid)
    for kind, rate in FAULT_RATES:
        if roll < rate:
            delay = 0.3 + 0.5 * _unit(seed, "delay", guid) if kind == "slow" else 0.0
            return Fault(kind, delay)
        roll -= rate
    return Fault("ok")


def plan_faults(seed: int, episodes: Iterable[Episode]) -> dict[str, Fault]:
    """The fault plan of ``episodes``: guid -> :class:`Fault`."""
    return {e.guid: fault_for(seed, e.guid) for e in episodes}


def body_size(episode: Episode) -> int:
    """Bytes served for ``episode``: its declared length, at most :data:`MAX_BODY`."""
    return max(0, min(episode.length, MAX_BODY))


def media_chunks(path: str, size: int) -> Iterator[bytes]:
    """The bytes served for ``path``, in chunks: the first ``size`` bytes of SHAKE-256(path).

    Args:
        path: the URL path.
        size: total bytes to produce.
    """
    body = hashlib.shake_256(path.encode()).digest(size) if size else b""
    for start in range(0, size, _CHUNK):
        yield body[start : start + _CHUNK]


@dataclass(frozen=True, slots=True)
class _Route:
    feed: str
    size: int
    type: str
    fault: Fault


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    host: FakeHost

    def handle_error(self, request: object, client_address: object) -> None:
        """Keep the console clean: a client hanging up mid-body is not news."""


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "durq-fake-media/1.0"

    def log_message(self, format: str, *args: object) -> None:
        """Silence the per-request access log."""

    def do_GET(self) -> None:
        host = cast(_Server, self.server).host
        path = urlsplit(self.path).path
        route = host.routes.get(path)
        count = host.count(path, route.feed if route else None)
        if route is None:
            self.send_error(404, "no such enclosure")
            return
        header = self.headers.get("X-Attempt", "")
        attempt = int(header) if header.isdigit() else count
        status = route.fault.status_for(attempt)
        if status != 200:
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if route.fault.delay:
            time.sleep(route.fault.delay)
        self.send_response(200)
        self.send_header("Content-Type", route.type)
        self.send_header("Content-Length", str(route.size))
        self.end_headers()
        for chunk in media_chunks(path, route.size):
            self.wfile.write(chunk)


class FakeHost:
    """A threaded HTTP server on 127.0.0.1 (a free port) serving the episodes' enclosures.

    Use as a context manager; the server always shuts down on exit::

        with FakeHost(episodes, seed=7) as host:
            urlopen(host.base_url + "/PC20-57-2021-10-08-Final.mp3")

    Args:
        episodes: the episodes to serve, routed by the path of their enclosure URL.
        seed: picks the fault plan (see :func:`fault_for`).

    Raises:
        ValueError: two episodes share an enclosure path.
    """

    def __init__(self, episodes: Iterable[Episode], seed: int) -> None:
        self.seed = seed
        self.routes: dict[str, _Route] = {}
        for e in episodes:
            path = urlsplit(e.url).path
            if path in self.routes:
                raise ValueError(f"two episodes are served from {path}")
            self.routes[path] = _Route(e.feed, body_size(e), e.type, fault_for(seed, e.guid))
        self.requests: Counter[str] = Counter()
        self.requests_by_feed: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the running server.

        Raises:
            RuntimeError: the server is not running.
        """
        if self._server is None:
            raise RuntimeError("the fake host is not running")
        host, port = cast(tuple[str, int], self._server.server_address)
        return f"http://{host}:{port}"

    @property
    def requests_served(self) -> int:
        """Requests answered so far (any status)."""
        with self._lock:
            return sum(self.requests.values())

    def count(self, path: str, feed: str | None) -> int:
        """Record one request for ``path``; returns that path's request count (1-based)."""
        with self._lock:
            self.requests[path] += 1
            self.requests_by_feed[feed or "(unknown)"] += 1
            return self.requests[path]

    def start(self) -> FakeHost:
        """Bind a free loopback port and serve from a daemon thread."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.host = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-host", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
