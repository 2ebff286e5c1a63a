"""python -m examples.podcast_import: the podcast import executor's command line.

work       run a worker for the three tasks (import_item, finalise_import, attempt_link)
podcast    add (or replace) a podcast whose external feed is one of the real feeds
import     fetch the podcast's feed and enqueue one job per episode as one durq batch
retry      put an import's failed items back (the batch reopens and finalises again)
link       publish-handoff: try to link an episode to its feed <guid> (attempt 0)
send       route one write-up-shaped JSON message by its "type"
status     an import, its items by status and its batch, as JSON
demo       a fake host, an 8-episode back-catalogue import with faults, then a retry of
           the failed items (a hosting migration is `import --migration`; the demo does
           not run one)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import durq
from durq.observability.events import configure_json_logging
from examples import fresh_demo_dir
from examples.podcast_mirror.feeds import FEED_NAMES

from . import host, importer, product


def _app(args: argparse.Namespace, time_scale: float = 1.0) -> durq.Durq:
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    configure_json_logging(open(data / "events.jsonl", "a", encoding="utf-8"))  # noqa: SIM115
    importer.configure(args.host_url, data / "product.db")
    return importer.create_app(f"sqlite:///{data / 'durq.db'}", time_scale)


def work(args: argparse.Namespace) -> int:
    dq = _app(args, args.time_scale)
    try:
        worker = dq.worker(concurrency=4, lease=args.lease, grace=5)  # "max_concurrency = 4"
        return int(worker.run(install_signals=True, stop_when_idle=args.until_idle))
    finally:
        dq.close()


def add_podcast(args: argparse.Namespace) -> int:
    _app(args).close()
    with product.connect(Path(args.data_dir) / "product.db") as conn, product.write(conn):
        conn.execute(
            "INSERT OR REPLACE INTO podcasts (id, slug, owner_email, hosting_type, "
            "external_rss_url) VALUES (?, ?, ?, 'external', ?)",
            (args.id, args.id, args.email, f"/feeds/{args.feed}.xml"),
        )
    importer.log("podcast_added", id=args.id, feed=args.feed)
    return 0


def start(args: argparse.Namespace) -> int:
    dq = _app(args)
    importer.start_import(dq, args.podcast, migration=args.migration, limit=args.limit,
                          use_rss_titles=args.use_rss_titles,
                          use_rss_descriptions=args.use_rss_descriptions)  # fmt: skip
    dq.close()
    return 0


def retry(args: argparse.Namespace) -> int:
    dq = _app(args)
    importer.log("import_retried", import_id=args.import_id,
                 items=importer.retry_failed(dq, args.import_id))  # fmt: skip
    dq.close()
    return 0


def link(args: argparse.Namespace) -> int:
    dq = _app(args)
    job = (
        dq.get_task("attempt_link")
        .options(key=f"link:{args.episode}:0")
        .enqueue(
            episode_id=args.episode, podcast_id=args.podcast, target_published_at=args.at, attempt=0
        )
    )
    importer.log("link_enqueued", job_id=job.id, episode_id=args.episode)
    dq.close()
    return 0


def send(args: argparse.Namespace) -> int:
    dq = _app(args)
    job = importer.route(dq, json.loads(args.message))
    importer.log("message_routed" if job else "message_dropped", job_id=job and job.id)
    dq.close()
    return 0


def import_status(dq: durq.Durq, import_id: int) -> dict[str, Any]:
    """The import row, its items by status (and failure reason), and durq's view of its batch."""
    with product.connect(importer.SETTINGS["db"]) as conn:
        imp = product.row(conn, "SELECT * FROM imports WHERE id = ?", import_id) or {}
        items = conn.execute("SELECT status, reason FROM import_items WHERE import_id = ?",
                             (import_id,)).fetchall()  # fmt: skip
    batch = dq.batch_status(imp["batch_id"]) if imp.get("batch_id") else None
    return {
        **imp,
        "items": dict(Counter(s for s, _ in items)),
        "reasons": dict(Counter(r for _, r in items if r)),
        "batch": batch
        and {
            "state": batch.state,
            "outcome": batch.outcome,
            "counts": batch.counts,
            "fired": batch.fired,
        },
    }


def status(args: argparse.Namespace) -> int:
    dq = _app(args)
    print(json.dumps(import_status(dq, args.import_id), indent=2))
    dq.close()
    return 0


def demo(args: argparse.Namespace) -> int:
    fresh_demo_dir(args.data_dir)
    server, _ = host.serve()
    svc = server.svc
    args.host_url = f"http://127.0.0.1:{server.server_address[1]}"
    dq = _app(args, time_scale=0.01)
    feed = importer.read_feed(svc.feeds["cre"])[:8]
    paths = [urlsplit(i["audio_url"]).path for i in feed]
    svc.faults.update({paths[1]: "404", paths[2]: "oversize", paths[3]: "503x2",
                       paths[4]: "html1", paths[5]: "503"})  # fmt: skip
    with product.connect(importer.SETTINGS["db"]) as conn, product.write(conn):
        conn.execute("INSERT OR REPLACE INTO podcasts VALUES ('cre', 'cre', 'tim@example.org', "
                     "'external', '/feeds/cre.xml')")  # fmt: skip
    run = dq.worker(concurrency=4, lease=10, grace=5)
    import_id, _ = importer.start_import(dq, "cre", limit=8)
    run.run(install_signals=True, stop_when_idle=True)
    print(json.dumps(import_status(dq, import_id)))
    svc.faults.clear()
    importer.retry_failed(dq, import_id)
    dq.worker(concurrency=4, lease=10, grace=5).run(install_signals=True, stop_when_idle=True)
    print(json.dumps(import_status(dq, import_id)))
    print(
        f"e-mails: {[r['body']['outcome'] for r in svc.requests('email')]}, "
        f"RSS invalidations: {len(svc.requests('rss'))}"
    )
    server.shutdown()
    server.server_close()
    dq.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.podcast_import", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--data-dir", default=".demo/podcast_import", help="durq.db, product.db")
    parser.add_argument("--host-url", default="http://127.0.0.1:8091", help="the fake host")
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("work", help="run a worker")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a claimed job is held")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every delay (tests)")
    p.add_argument("--until-idle", action="store_true", help="exit when nothing is pending")
    p.set_defaults(run=work)
    p = verbs.add_parser("podcast", help="add a podcast hosted elsewhere")
    p.add_argument("id")
    p.add_argument("--feed", required=True, choices=sorted(FEED_NAMES))
    p.add_argument("--email", default="owner@example.org")
    p.set_defaults(run=add_podcast)
    p = verbs.add_parser("import", help="start an import")
    p.add_argument("podcast")
    p.add_argument("--migration", action="store_true", help="a hosting migration (merge by GUID)")
    p.add_argument("--use-rss-titles", action="store_true")
    p.add_argument("--use-rss-descriptions", action="store_true")
    p.add_argument("--limit", type=int, default=None, help="only the first N feed items")
    p.set_defaults(run=start)
    p = verbs.add_parser("retry", help="retry an import's failed items")
    p.add_argument("import_id", type=int)
    p.set_defaults(run=retry)
    p = verbs.add_parser("link", help="link an episode to its feed guid")
    p.add_argument("episode", type=int)
    p.add_argument("--podcast", required=True)
    p.add_argument("--at", required=True, help="the publish time, ISO 8601 with a zone")
    p.set_defaults(run=link)
    p = verbs.add_parser("send", help="route a JSON message by its type")
    p.add_argument("message")
    p.set_defaults(run=send)
    p = verbs.add_parser("status", help="an import's status")
    p.add_argument("import_id", type=int)
    p.set_defaults(run=status)
    p = verbs.add_parser("demo", help="run the demo")
    p.set_defaults(run=demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
