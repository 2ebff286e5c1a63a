"""``python -m examples.delivery_gateway``: the gateway's command line.

serve   run the worker, the recovery-summary cycle and ``GET /api/queue/status``
send    store one message for delivery (it is on disk when this returns)
status  print what ``/api/queue/status`` answers, read straight from the database
retry   put failed messages back in the queue (all failed ones, or the ids given)
demo    a fake chat service, a mix of good and bad chats, one gateway, a summary
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import durq
from durq.observability.events import configure_json_logging
from examples import fresh_demo_dir

from . import chat_api
from .gateway import QUEUE, RecoverySummary, configure, create_app, queue_status, summarize


def _url(args: argparse.Namespace) -> str:
    """The database URL; durq's JSON event lines go to ``events.jsonl`` beside it."""
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    configure_json_logging(open(data / "events.jsonl", "a", encoding="utf-8"))  # noqa: SIM115
    return f"sqlite:///{data / 'durq.db'}"


def _say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _api(dq: durq.Durq, last: list[RecoverySummary | None], port: int) -> Any:
    """Start ``GET /api/queue/status`` on 127.0.0.1 in a thread; returns the uvicorn server."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def status(request: Request) -> JSONResponse:
        return JSONResponse(queue_status(dq, last[0]))

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    app = Starlette(routes=[Route("/api/queue/status", status)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    _say("api_listening", port=sock.getsockname()[1])
    return server


def _cycle(
    dq: durq.Durq, last: list[RecoverySummary | None], every: float, stop: threading.Event
) -> None:
    """Emit a recovery summary per cycle, counted from the database."""
    since = time.time()
    while not stop.wait(every):
        now = time.time()
        last[0] = summarize(dq, since, now)
        since = now
        _say(
            "recovery_summary",
            **{k: v for k, v in vars(last[0]).items() if k not in ("since", "until")},
        )


def serve(args: argparse.Namespace) -> int:
    configure(args.chat_url)
    dq, _ = create_app(_url(args), args.time_scale)
    last: list[RecoverySummary | None] = [None]
    stop = threading.Event()
    server = _api(dq, last, args.port)
    threading.Thread(target=_cycle, args=(dq, last, args.cycle, stop), daemon=True).start()
    try:
        return int(dq.worker(concurrency=4, lease=args.lease, grace=5).run(install_signals=True))
    finally:
        stop.set()
        server.should_exit = True
        dq.close()


def send(args: argparse.Namespace) -> int:
    dq, deliver = create_app(_url(args))
    job = deliver.enqueue(
        channel=args.channel, to=args.to, payloads=[{"text": t} for t in args.text]
    )
    _say("stored", id=job.id, to=args.to)
    dq.close()
    return 0


def status(args: argparse.Namespace) -> int:
    dq, _ = create_app(_url(args))
    print(json.dumps(queue_status(dq, summarize(dq, time.time() - args.window)), indent=2))
    dq.close()
    return 0


def retry(args: argparse.Namespace) -> int:
    dq, _ = create_app(_url(args))
    ids = args.ids or [j.id for j in dq.jobs(state="failed", queue=QUEUE, limit=10_000)]
    done, refused = [], []
    for job_id in ids:
        try:
            done.append(dq.retry(job_id).id)
        except (durq.JobGone, durq.JobNotFound) as exc:
            refused.append({"id": job_id, "reason": str(exc)})
    _say("retried", ids=done, refused=refused)
    dq.close()
    return 1 if refused else 0


def demo(args: argparse.Namespace) -> int:
    fresh_demo_dir(args.data_dir)
    server, _ = chat_api.serve()
    configure(f"http://127.0.0.1:{server.server_address[1]}")
    dq, deliver = create_app(_url(args), time_scale=0.01)
    chats = ["ok-ann", "ok-bob", "flaky2-cat", "reset1-dan", "blocked-eve", "gone-fay", "down-gus"]
    start = time.time()
    for chat in chats:
        deliver.enqueue(channel="telegram", to=chat, payloads=[{"text": f"hello {chat}"}])
    deliver.enqueue(channel="telegram", to="ok-hal", payloads=[{"text": "x" * 5000}])
    dq.worker(concurrency=4, lease=10, grace=5).run(install_signals=True, stop_when_idle=True)
    summary = summarize(dq, start)
    print(f"{'chat':<12} {'state':<10} {'attempts':>8}  last error")
    for job in sorted(dq.jobs(queue=QUEUE, limit=100), key=lambda j: j.id):
        err = job.last_error
        print(
            f"{job.payload['to']:<12} {job.state:<10} {job.attempts:>8}  {err.kind + ': ' + err.message if err else ''}"
        )
    print(json.dumps({k: v for k, v in vars(summary).items() if k not in ("since", "until")}))
    print(f"chat API requests: {len(server.chat.log)}")
    server.shutdown()
    server.server_close()
    dq.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.delivery_gateway",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", default=".demo/delivery_gateway", help="where durq.db lives")
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("serve", help="run the gateway")
    p.add_argument("--chat-url", required=True, help="the chat API's base URL")
    p.add_argument("--port", type=int, default=8089, help="port of /api/queue/status (0: any free)")
    p.add_argument("--cycle", type=float, default=10.0, help="seconds between recovery summaries")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a claimed message is held")
    p.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply the backoff tiers (tests)"
    )
    p.set_defaults(run=serve)
    p = verbs.add_parser("send", help="store one message")
    p.add_argument("--to", required=True)
    p.add_argument("--channel", default="telegram")
    p.add_argument("text", nargs="+", help="one payload per text")
    p.set_defaults(run=send)
    p = verbs.add_parser("status", help="queue status as JSON")
    p.add_argument("--window", type=float, default=3600.0, help="seconds the summary covers")
    p.set_defaults(run=status)
    p = verbs.add_parser("retry", help="retry failed messages")
    p.add_argument("ids", nargs="*", type=int)
    p.set_defaults(run=retry)
    p = verbs.add_parser("demo", help="run the demo")
    p.set_defaults(run=demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
