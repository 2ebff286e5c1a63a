"""A fake chat service on loopback: the outside world of the delivery gateway.

It answers ``POST /sendMessage`` with a JSON body ``{"chat_id": ..., "text": ...}`` the way a
bot API does (``{"ok": true, "result": {...}}`` or ``{"ok": false, "error_code": ...,
"description": ...}``) and records every request it was asked, so tests can check what was
sent, how often and when. A chat id's prefix decides how the chat behaves:

=================  ===========================================================================
``ok-…``           delivered
``flaky<N>-…``     the first N requests answer 502 Bad Gateway, then delivered
``reset<N>-…``     the first N requests get the connection dropped without an answer
``down-…``         always 502 (until healed)
``slow-…``         delivered after 3 s (a request in flight when the gateway is killed)
``blocked-…``      403 Forbidden: bot was blocked by the user
``gone-…``         400 Bad Request: chat not found
``deactivated-…``  403 Forbidden: user is deactivated
=================  ===========================================================================

Any text over 4,096 characters gets 400 Bad Request: message is too long.
``POST /admin/heal`` with ``{"chat_id": ...}`` makes that chat deliver from then on;
``GET /admin/log`` returns the request log.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_TEXT = 4096
_PERMANENT = {
    "blocked": (403, "Forbidden: bot was blocked by the user"),
    "gone": (400, "Bad Request: chat not found"),
    "deactivated": (403, "Forbidden: user is deactivated"),
}


class ChatService:
    """The service's state: the request log and the chats healed by hand."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.healed: set[str] = set()
        self.seen: dict[str, int] = {}

    def answer(self, chat_id: str, text: str) -> tuple[int, dict[str, Any]] | None:
        """(status, body) for one request, or None to drop the connection."""
        with self.lock:
            n = self.seen[chat_id] = self.seen.get(chat_id, 0) + 1
            self.log.append({"chat_id": chat_id, "text": text, "n": n, "at": time.time()})
            healed = chat_id in self.healed
        kind = chat_id.split("-", 1)[0]
        counted = re.fullmatch(r"(flaky|reset)(\d+)", kind)
        if len(text) > MAX_TEXT:
            return 400, _error(400, "Bad Request: message is too long")
        if not healed and kind in _PERMANENT:
            return _PERMANENT[kind][0], _error(*_PERMANENT[kind])
        if not healed and (kind == "down" or (counted and n <= int(counted.group(2)))):
            if counted and counted.group(1) == "reset":
                return None
            return 502, _error(502, "Bad Gateway")
        if kind == "slow":
            time.sleep(3.0)
        return 200, {"ok": True, "result": {"message_id": len(self.log), "chat_id": chat_id}}


def _error(code: int, description: str) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "description": description}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        data = json.loads(self.rfile.read(length) or b"{}")
        return data if isinstance(data, dict) else {}

    def do_GET(self) -> None:
        if self.path == "/admin/log":
            with self.server.chat.lock:
                self._reply(200, list(self.server.chat.log))
        else:
            self._reply(404, _error(404, "Not Found"))

    def do_POST(self) -> None:
        body = self._body()
        chat_id = str(body.get("chat_id", ""))
        if self.path == "/admin/heal":
            with self.server.chat.lock:
                self.server.chat.healed.add(chat_id)
            self._reply(200, {"ok": True})
        elif self.path == "/sendMessage":
            answer = self.server.chat.answer(chat_id, str(body.get("text", "")))
            if answer is None:
                self.close_connection = True
                self.connection.close()
                return
            self._reply(*answer)
        else:
            self._reply(404, _error(404, "Not Found"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    chat: ChatService


def serve(port: int = 0) -> tuple[_Server, threading.Thread]:
    """Start the fake service on 127.0.0.1 (``port`` 0: a free one) in a daemon thread.

    Returns the server (``server.server_address[1]`` is the port, ``server.chat`` the state)
    and its thread; stop it with ``server.shutdown(); server.server_close()``.
    """
    server = _Server(("127.0.0.1", port), _Handler)
    server.chat = ChatService()
    thread = threading.Thread(target=server.serve_forever, name="fake-chat", daemon=True)
    thread.start()
    return server, thread


def main() -> None:
    """``python -m examples.delivery_gateway.chat_api PORT``: run the fake service alone."""
    import sys

    server, thread = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(json.dumps({"event": "chat_listening", "port": server.server_address[1]}), flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
