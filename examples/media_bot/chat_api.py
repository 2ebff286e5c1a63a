"""A fake chat bot API on loopback: the media bot's outside world.

Bot methods (``POST /<method>``, JSON body, answers ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": ..., "description": ...}``):

``getUpdates``           ``{"offset": N, "timeout": s}``: updates with ``update_id >= N`` (long poll)
``sendMessage``          ``{"chat_id", "text", "reply_markup"?}`` -> ``{"message_id"}``
``editMessageText``      ``{"chat_id", "message_id", "text"}``
``sendVideo``            ``{"chat_id", "video": file_id}`` or ``{"chat_id", "video_data": base64}``
                         -> ``{"message_id", "file_id"}``; an unknown or forgotten file id
                         answers 400 ``wrong file identifier``
``answerInlineQuery``    ``{"inline_query_id", "results"}``
``answerCallbackQuery``  ``{"callback_query_id", "text"}``

Test controls: ``POST /admin/updates`` with a list of updates (``message``, ``inline_query``
or ``callback_query``; delivered together in one ``getUpdates`` batch), ``POST
/admin/forget`` ``{"file_id"}`` (the service drops a file: sending it by id fails), ``GET
/admin/log`` (every bot call, with the time it arrived).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatService:
    """The service's state: updates, messages, known files and the call log."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.texts: dict[int, list[str]] = {}  # message id -> its text, then each edit
        self.files: set[str] = set()
        self.acked = 0  # getUpdates with offset N acknowledges every update below N

    def push(self, updates: list[dict[str, Any]]) -> list[int]:
        with self.cond:
            ids = []
            for update in updates:
                ids.append(len(self.updates) + 1)
                self.updates.append({"update_id": ids[-1], **update})
            self.cond.notify_all()
            return ids

    def call(self, method: str, body: dict[str, Any]) -> tuple[int, Any]:
        if method == "getUpdates":
            deadline = time.time() + float(body.get("timeout", 0))
            with self.cond:
                offset = max(int(body.get("offset") or 0), self.acked + 1)
                self.acked = offset - 1
                while len(self.updates) < offset and self.cond.wait(
                    max(0.0, deadline - time.time())
                ):
                    pass
                return 200, self.updates[offset - 1 :]
        with self.cond:
            entry = {"method": method, "at": time.time(), **body}
            self.log.append(entry)
            if method == "sendMessage":
                mid = len(self.texts) + 1
                self.texts[mid] = [str(body.get("text"))]
                entry["message_id"] = mid
                return 200, {"message_id": mid}
            if method == "editMessageText":
                self.texts[int(body["message_id"])].append(str(body.get("text")))
                return 200, True
            if method == "sendVideo":
                if "video_data" in body:
                    data = base64.b64decode(entry.pop("video_data"))
                    file_id = "file-" + hashlib.sha256(data).hexdigest()[:16]
                    entry.update(uploaded=len(data))
                    self.files.add(file_id)
                else:
                    file_id = str(body.get("video"))
                    if file_id not in self.files:
                        return 400, "Bad Request: wrong file identifier/HTTP URL specified"
                self.texts[len(self.texts) + 1] = [f"<video {file_id}>"]
                return 200, {"message_id": len(self.texts), "file_id": file_id}
            if method in ("answerInlineQuery", "answerCallbackQuery"):
                return 200, True
        return 404, "Not Found: method not found"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, result: Any) -> None:
        ok = status == 200
        body = (
            {"ok": True, "result": result}
            if ok
            else {"ok": False, "error_code": status, "description": result}
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        svc = self.server.chat
        if self.path == "/admin/log":
            with svc.cond:
                self._reply(200, {"log": svc.log, "texts": svc.texts})
        else:
            self._reply(404, "Not Found")

    def do_POST(self) -> None:
        svc = self.server.chat
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path == "/admin/updates":
            self._reply(200, svc.push(body))
        elif self.path == "/admin/forget":
            with svc.cond:
                svc.files.discard(body["file_id"])
            self._reply(200, True)
        else:
            self._reply(*svc.call(self.path.strip("/"), body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    chat: ChatService

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a bot killed in the middle of a long poll: nothing to report


def serve(port: int = 0) -> tuple[_Server, threading.Thread]:
    """Start the fake API on 127.0.0.1 (``port`` 0: any free one) in a daemon thread.

    ``server.server_address[1]`` is the port and ``server.chat`` the state; stop it with
    ``server.shutdown(); server.server_close()``.
    """
    server = _Server(("127.0.0.1", port), _Handler)
    server.chat = ChatService()
    thread = threading.Thread(target=server.serve_forever, name="fake-chat", daemon=True)
    thread.start()
    return server, thread
