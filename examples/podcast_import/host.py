"""A fake podcast host and product back end on loopback: the outside world of the importer.

One :class:`ThreadingHTTPServer` on 127.0.0.1 that records every request and fails on demand:

=========================  =================================================================
``GET /feeds/<name>.xml``  a real feed from ``examples/podcast_mirror/feeds`` (or one a test
                           put in ``service.feeds``)
``GET <any other path>``   an enclosure: 16 KiB of deterministic bytes, ``audio/mpeg``
``POST /rss-invalidation`` the RSS worker's queue (records ``{"type": "import.completed", ...}``)
``POST /email``            the e-mail provider (records the completion e-mail)
``GET /admin/log``         the request log; ``POST /admin/fault`` ``{"path", "kind"}`` and
                           ``POST /admin/heal`` ``{"path"}`` set faults from another process
=========================  =================================================================

Fault kinds for an enclosure path (``service.faults[path]``): ``404``, ``410``, ``503``
(until healed), ``503x<N>`` (the first N requests), ``oversize`` (a ``Content-Length`` of
600 MB), ``html<N>`` (the first N requests get a 200 HTML maintenance page). ``service.failing``
may hold ``"email"`` and/or ``"rss"``: those endpoints then answer 500.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from examples.podcast_mirror.feeds import FEED_NAMES, FEEDS_DIR

BODY = 16 * 1024
OVERSIZE = 600 * 1024 * 1024


class HostService:
    """The host's state: feeds, faults, failing endpoints and the request log."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.feeds: dict[str, bytes] = {
            n: (FEEDS_DIR / f"{n}.xml").read_bytes() for n in FEED_NAMES
        }
        self.faults: dict[str, str] = {}
        self.failing: set[str] = set()
        self.seen: dict[str, int] = {}

    def record(self, kind: str, path: str, body: Any = None) -> int:
        with self.lock:
            n = self.seen[path] = self.seen.get(path, 0) + 1
            self.log.append({"kind": kind, "path": path, "n": n, "at": time.time(), "body": body})
            return n

    def requests(self, kind: str, path: str | None = None) -> list[dict[str, Any]]:
        """Logged requests of ``kind`` (``media``, ``feed``, ``email``, ``rss``), for ``path``."""
        with self.lock:
            return [r for r in self.log if r["kind"] == kind and path in (None, r["path"])]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, ctype: str = "application/json",
               length: int | None = None) -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        svc, path = self.server.svc, urlsplit(self.path).path
        if path == "/admin/log":
            with svc.lock:
                self._reply(200, json.dumps(svc.log).encode())
            return
        feed = re.fullmatch(r"/feeds/(\w+)\.xml", path)
        if feed:
            svc.record("feed", path)
            data = svc.feeds.get(feed.group(1))
            self._reply(*((200, data, "application/rss+xml") if data else (404, b"{}")))
            return
        n = svc.record("media", path)
        fault = svc.faults.get(path, "")
        counted = re.fullmatch(r"(503x|html)(\d+)", fault)
        if fault in ("404", "410", "503") or (fault.startswith("503x") and counted
                                               and n <= int(counted.group(2))):  # fmt: skip
            self._reply(int(fault[:3]), b"")
        elif fault == "oversize":
            self._reply(200, b"\0" * 1024, "audio/mpeg", length=OVERSIZE)
            self.close_connection = True
        elif counted and counted.group(1) == "html" and n <= int(counted.group(2)):
            self._reply(200, b"<html>down for maintenance</html>", "text/html")
        else:
            self._reply(200, hashlib.shake_256(path.encode()).digest(BODY), "audio/mpeg")

    def do_POST(self) -> None:
        svc, path = self.server.svc, urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if path in ("/email", "/rss-invalidation"):
            kind = "email" if path == "/email" else "rss"
            svc.record(kind, path, body)
            self._reply(500 if kind in svc.failing else 200, b"{}")
        elif path == "/admin/fault":
            with svc.lock:
                svc.faults[body["path"]] = body["kind"]
            self._reply(200, b"{}")
        elif path == "/admin/heal":
            with svc.lock:
                svc.faults.pop(body["path"], None)
            self._reply(200, b"{}")
        else:
            self._reply(404, b"{}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    svc: HostService


def serve(port: int = 0) -> tuple[_Server, threading.Thread]:
    """Start the fake host on 127.0.0.1 (``port`` 0: a free one) in a daemon thread.

    Returns the server (``server.server_address[1]`` is the port, ``server.svc`` the state)
    and its thread; stop it with ``server.shutdown(); server.server_close()``.
    """
    server = _Server(("127.0.0.1", port), _Handler)
    server.svc = HostService()
    thread = threading.Thread(target=server.serve_forever, name="fake-host", daemon=True)
    thread.start()
    return server, thread


def main() -> None:
    """``python -m examples.podcast_import.host PORT``: run the fake host alone."""
    import sys

    server, thread = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(json.dumps({"event": "host_listening", "port": server.server_address[1]}), flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
