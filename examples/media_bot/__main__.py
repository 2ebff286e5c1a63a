"""``python -m examples.media_bot``: the media bot's command line.

serve   run the bot: the chat update loop plus the durq worker (downloads, the updater)
gc      delete finished jobs older than --age and collect unreferenced blob bytes
demo    a fake chat API, the fake downloader on PATH, a few users, one bot; a transcript
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path

from durq.observability.events import configure_json_logging
from examples import fresh_demo_dir

from . import chat_api, fake_ytdlp
from .bot import LARGE, QUEUE, MediaBot, say


def _bot(args: argparse.Namespace, chat_url: str, **options: object) -> MediaBot:
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    configure_json_logging(open(data / "events.jsonl", "a", encoding="utf-8"))  # noqa: SIM115
    return MediaBot(f"sqlite:///{data / 'durq.db'}", data, chat_url, **options)  # type: ignore[arg-type]


def serve(args: argparse.Namespace) -> int:
    bot = _bot(args, args.chat_url, time_scale=args.time_scale, update_cron=args.update_cron,
               large=args.large, lease=args.lease)  # fmt: skip
    return bot.serve(grace=args.grace)


def gc(args: argparse.Namespace) -> int:
    bot = _bot(args, "http://127.0.0.1:9")
    purged = bot.dq.prune(args.age, queue=QUEUE)  # their job references to blobs go too
    summary = bot.blobs.gc(grace=args.grace)
    say("gc", purged_jobs=purged, **dataclasses.asdict(summary))
    bot.dq.close()
    return 0


def demo(args: argparse.Namespace) -> int:
    data = fresh_demo_dir(args.data_dir)
    os.environ["PATH"] = (
        f"{fake_ytdlp.install(data / 'bin').parent}{os.pathsep}{os.environ['PATH']}"
    )
    os.environ["FAKE_YTDLP_LOG"] = str(data / "ytdlp.jsonl")
    server, _ = chat_api.serve()
    svc = server.chat
    bot = _bot(args, f"http://127.0.0.1:{server.server_address[1]}", time_scale=0.01)
    base = "https://vid.example"
    texts = [(1, f"{base}/ok/cat?sleep=0.5"), (2, f"{base}/ok/cat"), (3, f"{base}/flaky2/dog"),
             (4, f"{base}/private/eel"), (5, "https://elsewhere.example/x"),
             (6, f"{base}/big/whale"), (7, f"{base}/ok/fox?sleep=0.5")]  # fmt: skip
    svc.push([{"message": {"message_id": 1, "chat": {"id": c}, "text": t}} for c, t in texts])
    svc.push([{"inline_query": {"id": "q1", "query": f"{base}/ok/owl?sleep=0.5"}}])
    stop = threading.Event()
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(4)
    threading.Thread(target=bot.poll, args=(stop, pool), daemon=True).start()
    time.sleep(1.5)  # the loop picks the updates up and persists one job per URL message
    worker = bot.dq.worker(concurrency=6, lease=10, grace=5)
    worker.run(install_signals=True, stop_when_idle=True)
    parked = [j for j in bot.dq.jobs(state="parked", queue=QUEUE)]
    svc.push(
        [{"callback_query": {"id": f"cb{j.id}", "data": f"confirm:{j.id}"}} for j in parked]
        + [{"callback_query": {"id": f"cx{j.id}", "data": f"cancel:{j.id}"}} for j in parked]
    )
    time.sleep(1.0)
    worker = bot.dq.worker(concurrency=6, lease=10, grace=5)
    worker.run(install_signals=True, stop_when_idle=True)
    stop.set()
    with svc.cond:
        for c, t in texts:
            print(f"chat {c}: {t}")
            for entry in svc.log:
                if entry.get("chat_id") == c and entry["method"] == "sendMessage":
                    edits = svc.texts[entry["message_id"]]
                    print("   ", " → ".join(x.replace("\n", " ") for x in edits))
                elif entry.get("chat_id") == c and entry["method"] == "sendVideo":
                    print("    video", "uploaded" if "uploaded" in entry else "sent by file id")
        for entry in svc.log:
            if entry["method"] in ("answerInlineQuery", "answerCallbackQuery"):
                print(
                    entry["method"],
                    json.dumps({k: v for k, v in entry.items() if k not in ("method", "at")}),
                )
    calls = [json.loads(x) for x in (data / "ytdlp.jsonl").read_text().splitlines()]
    downloads = [c["id"] for c in calls if c["event"] == "call" and c["mode"] == "download"]
    print("downloads run:", sorted(downloads))
    server.shutdown()
    server.server_close()
    bot.dq.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.media_bot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--data-dir", default=".demo/media_bot", help="durq.db, blobs/, work/")
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("serve", help="run the bot")
    p.add_argument("--chat-url", required=True, help="the chat bot API's base URL")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a claimed job is held")
    p.add_argument("--grace", type=float, default=30.0, help="seconds SIGTERM lets jobs finish")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply backoff (tests)")
    p.add_argument("--update-cron", default="*/5 * * * *", help="when to update the downloader")
    p.add_argument("--large", type=int, default=LARGE, help="bytes above which to ask first")
    p.set_defaults(run=serve)
    p = verbs.add_parser("gc", help="purge finished jobs, collect blob bytes")
    p.add_argument("--age", type=float, default=86400.0, help="prune jobs finished before, s")
    p.add_argument("--grace", type=float, default=3600.0, help="blob gc grace, seconds")
    p.set_defaults(run=gc)
    p = verbs.add_parser("demo", help="run the demo")
    p.set_defaults(run=demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
