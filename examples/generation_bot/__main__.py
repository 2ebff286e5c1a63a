"""``python -m examples.generation_bot``: the generation bot's two processes and its tools.

api      the API process (Starlette): POST /photos, POST /leads, GET /status
bot      the bot process: the durq worker (generation, messages, lead cards), the failure
         reporter, the maintenance pause from MAINTENANCE_MODE, the single-instance lock
command  an admin command: /pause, /resume, /status (what the bot's admin chat would do)
demo     fakes, an API and a bot in one process: uploads, a 429, a 402, /resume
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import IO, Any

from durq.observability.events import configure_json_logging

from .bot import FREE_REQUEUES, QUEUE, SHUTDOWN_GRACE, Bot, create_app

UPLOADS = """CREATE TABLE IF NOT EXISTS uploads (
    request_id TEXT PRIMARY KEY, chat_id TEXT NOT NULL, photo TEXT NOT NULL,
    job_id INTEGER NOT NULL, created_at REAL NOT NULL)"""


def _say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _open(args: argparse.Namespace) -> tuple[Bot, Path]:
    """The bot's durq app on ``<data-dir>/durq.db`` (durq's events go to ``events.jsonl``)."""
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    configure_json_logging(open(data / "events.jsonl", "a", encoding="utf-8"))  # noqa: SIM115
    bot = create_app(f"sqlite:///{data / 'durq.db'}", chat_url=args.fakes_url,
                     ai_url=args.fakes_url, time_scale=args.time_scale)  # fmt: skip
    return bot, data / "durq.db"


def make_api(bot: Bot, db: Path, chat_url: str) -> Any:
    """The API's Starlette app. Uploads are an outbox: the ``uploads`` row and the
    generation job commit in one transaction on the API's own sqlite3 connection."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from .bot import _post

    with sqlite3.connect(db) as conn:
        conn.execute(UPLOADS)

    def maintenance() -> JSONResponse | None:
        pause = bot.dq.paused(QUEUE)
        body = {"code": "maintenance", "source": pause.source} if pause else None
        return JSONResponse(body, status_code=503) if body else None

    async def photos(request: Request) -> JSONResponse:
        body = await request.json()
        return maintenance() or _upload(str(body["request_id"]), str(body["chat_id"]),
                                        str(body["photo"]))  # fmt: skip

    def _upload(request_id: str, chat_id: str, photo: str) -> JSONResponse:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            job = bot.generate.options(key=f"photo:{request_id}", connection=conn).enqueue(
                chat_id=chat_id, photo=photo
            )
            new = conn.execute("INSERT INTO uploads VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                               (request_id, chat_id, photo, job.id, time.time())).rowcount  # fmt: skip
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()
        try:  # "Generating..." from the API: one try, for a new upload only
            if new:
                _post(f"{chat_url}/chat/sendMessage", {"chat_id": chat_id, "text": "Generating..."})
        except OSError:
            pass
        return JSONResponse({"job": job.id, "request_id": request_id})

    async def leads(request: Request) -> JSONResponse:
        body = await request.json()
        job = bot.publish_lead.options(key=f"lead:{body['requestId']}").enqueue(
            name=str(body["name"]), contact=str(body["contact"])
        )
        return JSONResponse({"lead": job.id})

    async def status(request: Request) -> JSONResponse:
        pause = bot.dq.paused(QUEUE)
        queue = bot.dq.status()["queues"].get(QUEUE, {})
        return JSONResponse({"maintenance": pause.source if pause else None,
                             "counts": queue.get("counts", {})})  # fmt: skip

    return Starlette(routes=[Route("/photos", photos, methods=["POST"]),
                             Route("/leads", leads, methods=["POST"]),
                             Route("/status", status)])  # fmt: skip


def api(args: argparse.Namespace) -> int:
    import uvicorn

    bot, db = _open(args)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn serves them
    server = uvicorn.Server(uvicorn.Config(make_api(bot, db, args.fakes_url), log_level="warning"))
    _say("api_listening", port=sock.getsockname()[1])
    server.run(sockets=[sock])
    bot.dq.close()
    return 0


def _lock(data: Path) -> IO[str] | None:
    """The single-instance lock: an exclusive ``flock`` on ``<data>/main.lock``, released by
    the OS when the process ends for any reason. None if another process holds it."""
    handle = open(data / "main.lock", "a", encoding="utf-8")  # noqa: SIM115 - held for life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def run_bot(args: argparse.Namespace) -> int:
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    held = _lock(data)
    if held is None:
        print(f"start cancelled: another bot process holds {data / 'main.lock'}", file=sys.stderr)
        _say("start_cancelled", lock=str(data / "main.lock"))
        return 1
    bot, _ = _open(args)
    if os.environ.get("MAINTENANCE_MODE", "0") == "1":
        bot.dq.pause(QUEUE, "MAINTENANCE_MODE=1", source="env")
    else:
        bot.dq.resume(QUEUE, source="env")  # set to 0 and restarted: the env pause goes
    pause = bot.dq.paused(QUEUE)
    worker = bot.dq.worker(concurrency=args.concurrency, lease=args.lease,
                           grace=SHUTDOWN_GRACE * bot.scale, free_requeues=FREE_REQUEUES)  # fmt: skip
    _say("bot_started", pid=os.getpid(), maintenance=pause.source if pause else None)
    try:
        return int(worker.run(install_signals=True))
    finally:
        bot.dq.close()
        held.close()


def command(args: argparse.Namespace) -> int:
    """The admin commands. ``/resume`` clears an ``auto`` or ``admin`` pause, never ``env``."""
    bot, _ = _open(args)
    dq, done = bot.dq, True
    if args.text == "/pause":
        done = dq.pause(QUEUE, "paused by an admin", source="admin")
    elif args.text == "/resume":
        done = dq.resume(QUEUE, source="auto") or dq.resume(QUEUE, source="admin")
    pause = dq.paused(QUEUE)
    note = None
    if args.text == "/resume" and pause is not None and pause.source == "env":
        note = "maintenance is set by MAINTENANCE_MODE=1: set it to 0 and restart the bot"
    _say("command", text=args.text, done=done, maintenance=pause.source if pause else None,
         reason=pause.reason if pause else None, note=note)  # fmt: skip
    dq.close()
    return 0 if done else 1


def demo(args: argparse.Namespace) -> int:
    """Fakes in this process; the API and the bot as two child processes on one file."""
    import subprocess
    import urllib.request

    from . import fakes

    server, _ = fakes.serve()
    world, url = server.world, f"http://127.0.0.1:{server.server_address[1]}"
    for old in Path(args.data_dir).glob("durq.db*"):  # a fresh database for each demo
        old.unlink()
    base = [sys.executable, "-m", "examples.generation_bot", "--data-dir", args.data_dir,
            "--fakes-url", url, "--time-scale", "0.01"]  # fmt: skip
    children: list[subprocess.Popen[str]] = []

    def child(*verb: str) -> dict[str, Any]:
        """Start a child; its first line (api_listening / bot_started) says it is ready."""
        children.append(subprocess.Popen([*base, *verb], stdout=subprocess.PIPE, text=True))
        assert children[-1].stdout is not None
        first: dict[str, Any] = json.loads(children[-1].stdout.readline())
        print("  ", first)
        return first

    def post(path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return {"status": exc.code, **json.loads(exc.read())}

    def until(check: Any) -> None:
        while not check():
            time.sleep(0.05)

    try:
        print("1. the API runs, the bot does not:")
        port = child("api", "--port", "0")["port"]
        world.set_provider("primary", "429", ["429", "429:40"])  # rate limits, then the fallback
        for rid in ("ann", "bob"):
            print("   upload:", post("/photos", {"request_id": rid, "chat_id": rid,
                                              "photo": f"p-{rid}"}))  # fmt: skip
        lead = {"requestId": "L-1", "name": "Cy", "contact": "@cy"}
        print("   lead, sent twice:", post("/leads", lead), post("/leads", lead))
        print("2. the bot starts and works through the outbox:")
        child("bot")
        until(lambda: [len(world.sent_to(g)) for g in ("ann", "bob", "leads")] == [2, 2, 1])
        print("3. the AI account runs dry (402 from both providers):")
        world.set_provider("primary", "402")
        world.set_provider("fallback", "402")
        print(
            "   upload:", post("/photos", {"request_id": "dan", "chat_id": "dan", "photo": "p-dan"})
        )
        until(lambda: len(world.sent_to("dan")) == 2)
        print(
            "   next upload:",
            post("/photos", {"request_id": "eve", "chat_id": "eve", "photo": "p-eve"}),
        )
        world.set_provider("primary", "ok")
        resumed = subprocess.run([*base, "command", "/resume"], capture_output=True, text=True)
        print("   /resume:", resumed.stdout.strip())
        print(
            "   upload:", post("/photos", {"request_id": "eve", "chat_id": "eve", "photo": "p-eve"})
        )
        until(lambda: len(world.sent_to("eve")) == 2)
        for chat in ("ann", "bob", "dan", "eve", "admin", "leads"):
            print(f"{chat:>7}: {world.sent_to(chat)}")
        print("provider calls:", [(c["provider"], c["photo"], c["answer"]) for c in world.calls])
        return 0
    finally:
        for proc in children:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(30)
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.generation_bot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", default=".demo/generation_bot", help="durq.db, main.lock")
    parser.add_argument("--fakes-url", default="http://127.0.0.1:8093", help="AI and chat")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="multiply delays, deadlines and the grace (tests)")  # fmt: skip
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("api", help="run the API process")
    p.add_argument("--port", type=int, default=8092, help="0: any free port")
    p.set_defaults(run=api)
    p = verbs.add_parser("bot", help="run the bot process")
    p.add_argument("--concurrency", type=int, default=4, help="worker slots (all queues)")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a claim lasts")
    p.set_defaults(run=run_bot)
    p = verbs.add_parser("command", help="an admin command")
    p.add_argument("text", choices=["/pause", "/resume", "/status"])
    p.set_defaults(run=command)
    verbs.add_parser("demo", help="run the demo").set_defaults(run=demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
