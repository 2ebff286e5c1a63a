"""Serve an ASGI app with uvicorn on a free loopback port in a thread; always stopped."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:<port>``) while uvicorn serves ``app``."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class Client:
    """A ``requests.Session`` bound to a base URL (cookies kept), redirects not followed."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def get(self, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("allow_redirects", False)
        return self.session.get(self.base + path, timeout=30, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("allow_redirects", False)
        return self.session.post(self.base + path, timeout=30, **kw)
