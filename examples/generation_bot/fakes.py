"""The generation bot's outside world on loopback: two AI providers and a chat service.

One :class:`ThreadingHTTPServer` on 127.0.0.1 that records every request and injects faults:

==================================  ===========================================================
``POST /ai/<provider>/generate``    ``{"photo": ...}`` -> 200 ``{"pack": url}``, or an error
                                    with ``{"error": ...}`` (see below)
``POST /chat/sendMessage``          ``{"chat_id", "text"}``: recorded, 200
``GET /admin/log``                  ``{"calls": [...], "messages": [...]}``
``POST /admin/provider``            ``{"name", "mode", "script"}``: set a provider's behaviour
==================================  ===========================================================

A provider answers from its ``script`` first (a list consumed one entry per call), then
from its ``mode``: ``ok``; ``429`` (rate limited; ``429:40`` adds ``Retry-After: 40``);
``daily`` (429, daily quota exhausted); ``402`` (no money); ``500``. The photo's name adds
per-photo behaviour: a ``slow<ms>-`` prefix answers after that many milliseconds, and
``fail<N>-`` makes the first N calls for that photo (any provider) answer 500 at once.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERRORS = {
    "429": "rate_limited",
    "daily": "daily_quota_exceeded",
    "402": "insufficient_funds",
    "500": "internal_error",
}


class World:
    """The fake services' state: provider behaviour and what everyone was asked."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.modes: dict[str, str] = {"primary": "ok", "fallback": "ok"}
        self.scripts: dict[str, list[str]] = {}
        self.photo_calls: dict[str, int] = {}

    def set_provider(self, name: str, mode: str = "ok", script: list[str] | None = None) -> None:
        with self.lock:
            self.modes[name] = mode
            self.scripts[name] = list(script or [])

    def generate(self, provider: str, photo: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, body, headers) for one generation call."""
        with self.lock:
            script = self.scripts.get(provider) or []
            answer = script.pop(0) if script else self.modes.get(provider, "500")
            n = self.photo_calls[photo] = self.photo_calls.get(photo, 0) + 1
            failing = re.match(r"fail(\d+)-", photo)
            if failing and n <= int(failing.group(1)):
                answer = "fail"
            self.calls.append({"provider": provider, "photo": photo, "answer": answer,
                               "at": time.time()})  # fmt: skip
        slow = re.search(r"slow(\d+)-", photo)
        if slow and answer != "fail":
            time.sleep(int(slow.group(1)) / 1000)
        code, _, hint = answer.replace("fail", "500").partition(":")
        if code == "ok":
            return 200, {"pack": f"https://t.me/addstickers/pack_{photo}"}, {}
        status = 429 if code == "daily" else int(code)
        return status, {"error": ERRORS[code]}, {"Retry-After": hint} if hint else {}

    def sent_to(self, chat_id: str) -> list[str]:
        """Texts the chat service delivered to ``chat_id``, in order."""
        with self.lock:
            return [m["text"] for m in self.messages if m["chat_id"] == chat_id]

    def calls_for(self, photo: str) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.calls if c["photo"] == photo]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a killed caller
            self.wfile.write(data)

    def do_GET(self) -> None:
        world = self.server.world
        if self.path == "/admin/log":
            with world.lock:
                self._reply(200, {"calls": world.calls, "messages": world.messages})
        else:
            self._reply(404, {"error": "not_found"})

    def do_POST(self) -> None:
        world = self.server.world
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        ai = re.fullmatch(r"/ai/(\w+)/generate", self.path)
        if ai:
            self._reply(*world.generate(ai.group(1), str(body.get("photo", ""))))
        elif self.path == "/chat/sendMessage":
            with world.lock:
                world.messages.append({"chat_id": str(body.get("chat_id")),
                                       "text": str(body.get("text")), "at": time.time()})  # fmt: skip
            self._reply(200, {"ok": True})
        elif self.path == "/admin/provider":
            world.set_provider(str(body["name"]), str(body.get("mode", "ok")), body.get("script"))
            self._reply(200, {"ok": True})
        else:
            self._reply(404, {"error": "not_found"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    world: World


def serve(port: int = 0) -> tuple[_Server, threading.Thread]:
    """Start the fakes on 127.0.0.1 (``port`` 0: a free one) in a daemon thread.

    Returns the server (``server.server_address[1]`` is the port, ``server.world`` the
    state) and its thread; stop it with ``server.shutdown(); server.server_close()``.
    """
    server = _Server(("127.0.0.1", port), _Handler)
    server.world = World()
    thread = threading.Thread(target=server.serve_forever, name="fake-world", daemon=True)
    thread.start()
    return server, thread


if __name__ == "__main__":
    import sys

    srv, thr = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(json.dumps({"event": "fakes_listening", "port": srv.server_address[1]}), flush=True)
    try:
        thr.join()
    except KeyboardInterrupt:
        srv.shutdown()
