"""A fake ``yt-dlp``: the media bot's downloader, scripted per URL so tests are deterministic.

:func:`install` writes this file as an executable ``yt-dlp`` into a bin directory (put it
first on ``PATH``). It speaks the part of yt-dlp's command line the bot uses:

``yt-dlp --dump-json URL``       one line of JSON metadata (id, extractor, format_id, ...)
``yt-dlp -f FMT -o PATH URL``    writes the video to PATH
``yt-dlp --version``             prints the version
``yt-dlp --update``              rewrites *this file* in place with the next version,
                                 non-atomically (half, a pause, the rest), as the zipapp does

URLs look like ``https://vid.example/<behaviour>/<id>[?sleep=S]``:

``ok``           metadata and a small file; ``sleep`` seconds spent downloading
``big``          like ok, but the metadata says 80 MB
``flaky<N>``     the first N metadata calls fail with ``HTTP Error 503``
``unsupported``  ``ERROR: Unsupported URL``        ``private``  ``ERROR: ... Private video``

Every call appends one JSON line (argv mode, url, id, version, start, end, exit code and the
``MEDIA_BOT_JOB``/``MEDIA_BOT_VIA`` the bot set) to ``$FAKE_YTDLP_LOG``.
"""

import fcntl
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

VERSION = 1
BIG = 80_000_000


def _log(entry: dict[str, Any], count_url: str = "") -> int:
    """Append ``entry`` under a lock; return how many earlier metadata calls had this URL."""
    path = os.environ.get("FAKE_YTDLP_LOG")
    if not path:
        return 0
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        entries = [json.loads(line) for line in f] if count_url else []
        seen = sum(1 for e in entries if e["event"] == "peek" and e.get("url") == count_url)
        f.write(json.dumps(entry) + "\n")
    return seen


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def _update() -> int:
    me = Path(__file__).resolve()
    text = me.read_text(encoding="utf-8")
    text = re.sub(
        r"^VERSION = (\d+)$", lambda m: f"VERSION = {int(m[1]) + 1}", text, count=1, flags=re.M
    )
    data = text.encode()
    with open(me, "r+b") as f:  # in place, like the zipapp: a reader now sees half a file
        f.truncate(0)
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(0.4)
        f.write(data[len(data) // 2 :])
    print(f"Updated yt-dlp to version {VERSION + 1}")
    return 0


def _run(argv: list[str], entry: dict[str, Any]) -> int:
    if "--version" in argv:
        print(VERSION)
        return 0
    if "--update" in argv:
        return _update()
    url = argv[-1]
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    behaviour, vid = [*segments, "", ""][:2]
    sleep = float(parse_qs(parts.query).get("sleep", ["0"])[0])
    entry.update(url=url, id=vid)
    if "--dump-json" in argv:
        entry["mode"] = "meta"
        earlier = _log({**entry, "event": "peek"}, count_url=url)
        flaky = re.fullmatch(r"flaky(\d+)", behaviour)
        if parts.hostname != "vid.example" or behaviour == "unsupported" or not vid:
            return _fail(f"ERROR: Unsupported URL: {url}")
        if behaviour == "private":
            return _fail(
                f"ERROR: [vid] {vid}: Private video. Sign in if you've been granted access"
            )
        if flaky and earlier < int(flaky[1]):
            return _fail(
                f"ERROR: [vid] {vid}: Unable to download webpage: HTTP Error 503: "
                "Service Unavailable (caused by <HTTPError 503: Service Unavailable>)"
            )
        size = BIG if behaviour == "big" else 20_000
        meta = {"id": vid, "extractor": "vid", "format_id": "18", "ext": "mp4",
                "title": f"Video {vid}", "filesize_approx": size, "webpage_url": url}  # fmt: skip
        print(json.dumps(meta))
        return 0
    entry["mode"] = "download"
    out = Path(argv[argv.index("-o") + 1])
    time.sleep(sleep)
    out.write_bytes(f"fake video {vid} (format 18)\n".encode() * 500)
    print(f"[download] Destination: {out}")
    return 0


def main() -> int:
    argv = sys.argv[1:]
    entry = {"version": VERSION, "pid": os.getpid(), "start": time.time(),
             "job": os.environ.get("MEDIA_BOT_JOB"), "via": os.environ.get("MEDIA_BOT_VIA"),
             "mode": "other", "args": argv}  # fmt: skip
    code = _run(argv, entry)
    _log({**entry, "event": "call", "end": time.time(), "code": code})
    return code


def install(bin_dir: str | os.PathLike[str], python: str = sys.executable) -> Path:
    """Write this script as ``bin_dir/yt-dlp`` (executable, run by ``python``); its path."""
    target = Path(bin_dir) / "yt-dlp"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"#!{python}\n" + Path(__file__).read_text(encoding="utf-8"))
    target.chmod(0o755)
    return target


if __name__ == "__main__":
    sys.exit(main())
